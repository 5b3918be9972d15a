package postgres_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/host/hosttest"
)

// hbaInstance is a server of the given version whose data directory is
// /data and whose user owns the test's files.
func hbaInstance(version string) *engine.Instance {
	return &engine.Instance{Engine: engine.Postgres, Version: version, DataDir: "/data", UID: os.Getuid(), Settings: map[string]engine.Setting{}}
}

func readHBA(t *testing.T, version string, files map[string]string) *engine.PGHBA {
	t.Helper()
	return postgres.ReadHBA(hosttest.Tree(t, files), hbaInstance(version))
}

// records renders the records as "file:line type dbs users address method".
func records(hba *engine.PGHBA) []string {
	var out []string
	for _, l := range hba.Lines {
		out = append(out, filepath.Base(l.File)+":"+strconv.Itoa(l.Line)+" "+postgres.FormatHBA(l, l.Method))
	}
	return out
}

func wantRecords(t *testing.T, hba *engine.PGHBA, want ...string) {
	t.Helper()
	got := records(hba)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s\nerrors: %v", strings.Join(got, "\n"), strings.Join(want, "\n"), hba.Errors)
	}
}

func TestHBAGrammar(t *testing.T) {
	hba := readHBA(t, "15.4", map[string]string{"data/pg_hba.conf": `# comment
local   all   all   peer
host  "all",db2  +admins,"+x"  10.1.0.0  255.255.0.0  md5   # trailing comment
hostssl  replication  "my ""q"" role"  ::1/128  scram-sha-256
host all all samenet ldap ldapserver=ldap.example.com "ldapprefix=cn="
hostnossl all all .example.com password
local all all ident map=x
host all all 192.168.1.7/32 cert clientcert=verify-full
`})
	if hba.Err != "" || len(hba.Errors) > 0 {
		t.Fatalf("err %q errors %v", hba.Err, hba.Errors)
	}
	wantRecords(t, hba,
		"pg_hba.conf:2 local all all peer",
		`pg_hba.conf:3 host "all",db2 +admins,"+x" 10.1.0.0/16 md5`,
		`pg_hba.conf:4 hostssl replication "my ""q"" role" ::1/128 scram-sha-256`,
		"pg_hba.conf:5 host all all samenet ldap ldapserver=ldap.example.com ldapprefix=cn=",
		"pg_hba.conf:6 hostnossl all all .example.com password",
		"pg_hba.conf:7 local all all peer map=x", // ident on a socket is peer
		"pg_hba.conf:8 host all all 192.168.1.7/32 cert clientcert=verify-full",
	)
	l := hba.Lines[1]
	if !l.Databases[0].Quoted || l.Databases[0].Text != "all" || postgres.HBAAllDatabases(l) {
		t.Errorf("a quoted all is a database name: %+v", l.Databases)
	}
	if postgres.HBAUserMatch(l, "bob", []string{"admins"}) != "yes" || postgres.HBAUserMatch(l, "bob", nil) != "no" {
		t.Errorf("+admins matches members only")
	}
	if hba.File != "/data/pg_hba.conf" || hba.FileSource != "default" {
		t.Errorf("file %q from %q", hba.File, hba.FileSource)
	}
}

// TestHBASecretOptions: option values that are secrets never reach the
// facts (and so no evidence or fix shows them).
func TestHBASecretOptions(t *testing.T) {
	hba := readHBA(t, "15", map[string]string{"data/pg_hba.conf": "host all all 10.0.0.0/8 ldap ldapserver=l ldapbindpasswd=s3cr3t\n" +
		"host all all 10.0.0.0/8 radius radiusservers=r radiussecrets=\"t0p,s3cr3t\"\n"})
	wantRecords(t, hba,
		"pg_hba.conf:1 host all all 10.0.0.0/8 ldap ldapserver=l ldapbindpasswd=<redacted>",
		"pg_hba.conf:2 host all all 10.0.0.0/8 radius radiusservers=r radiussecrets=<redacted>")
	for _, l := range hba.Lines {
		if strings.Contains(l.Text+strings.Join(l.Options, " "), "s3cr3t") {
			t.Errorf("secret kept: %+v", l)
		}
	}
	// A snapshot stores the file redacted (ReadConfig), still parseable.
	red := string(host.Redact([]byte("host all all 10.0.0.0/8 ldap ldapbindpasswd=s3cr3t\nhost all all 10.0.0.0/8 radius radiusservers=r radiussecrets=\"t0p,s3cr3t\"\n")))
	if strings.Contains(red, "s3cr3t") {
		t.Errorf("snapshot keeps a secret:\n%s", red)
	}
	hba = readHBA(t, "15", map[string]string{"data/pg_hba.conf": red})
	if len(hba.Lines) != 2 || len(hba.Errors) > 0 {
		t.Errorf("redacted file: %v %v", records(hba), hba.Errors)
	}
}

func TestHBAHbaFileSetting(t *testing.T) {
	in := hbaInstance("15")
	in.Settings["hba_file"] = engine.Setting{Value: "/etc/pg/hba.conf", Source: "file:/etc/pg/postgresql.conf:9"}
	h := hosttest.Tree(t, map[string]string{"etc/pg/hba.conf": "host all all 0.0.0.0/0 trust\n", "data/pg_hba.conf": "local all all peer\n"})
	hba := postgres.ReadHBA(h, in)
	wantRecords(t, hba, "hba.conf:1 host all all 0.0.0.0/0 trust")
	if hba.FileSource != "file:/etc/pg/postgresql.conf:9" {
		t.Errorf("source %q", hba.FileSource)
	}
	// A relative name is relative to the data directory, the server's
	// working directory.
	in.Settings["hba_file"] = engine.Setting{Value: "conf/hba", Source: "cmdline"}
	h = hosttest.Tree(t, map[string]string{"data/conf/hba": "host all all ::/0 reject\n"})
	wantRecords(t, postgres.ReadHBA(h, in), "hba:1 host all all ::/0 reject")
}

// TestHBAIncludes: PostgreSQL 16 include directives, relative to the
// including file, include_dir in byte order with only *.conf, a missing
// include_if_exists silently skipped, a missing include reported, and @file
// lists (with comments and nesting) in user and database fields.
func TestHBAIncludes(t *testing.T) {
	files := map[string]string{
		"data/pg_hba.conf":        "include sub/a.conf\ninclude_if_exists nothere.conf\ninclude missing.conf\ninclude_dir hba.d\nhost @dbs @users 10.0.0.0/8 scram-sha-256\n",
		"data/sub/a.conf":         "host all all 127.0.0.1/32 trust\n",
		"data/hba.d/20-b.conf":    "host all all 0.0.0.0/0 reject\n",
		"data/hba.d/10-a.conf":    "local all all peer\n",
		"data/hba.d/.hidden.conf": "host all all 0.0.0.0/0 trust\n",
		"data/hba.d/x.txt":        "host all all 0.0.0.0/0 trust\n",
		"data/dbs":                "app, # the application\nreports\n",
		"data/users":              "alice bob\n@more\n",
		"data/more":               "carol\n",
	}
	hba := readHBA(t, "16.2", files)
	wantRecords(t, hba,
		"a.conf:1 host all all 127.0.0.1/32 trust",
		"10-a.conf:1 local all all peer",
		"20-b.conf:1 host all all 0.0.0.0/0 reject",
		"pg_hba.conf:5 host app,reports alice,bob,carol 10.0.0.0/8 scram-sha-256",
	)
	if len(hba.Errors) != 1 || !strings.Contains(hba.Errors[0], "pg_hba.conf:3: include \"/data/missing.conf\"") {
		t.Errorf("errors %v", hba.Errors)
	}
	// Before 16 the same lines are not directives: the server rejects them.
	old := readHBA(t, "15.4", files)
	if len(old.Errors) < 4 || !strings.Contains(old.Errors[0], `invalid connection type "include"`) {
		t.Errorf("PostgreSQL 15 errors %v", old.Errors)
	}
}

func TestHBAIncludeLoopAndDepth(t *testing.T) {
	hba := readHBA(t, "16", map[string]string{
		"data/pg_hba.conf": "include a.conf\nlocal all all peer\n",
		"data/a.conf":      "include b.conf\n",
		"data/b.conf":      "include a.conf\nhost all all ::1/128 trust\n",
	})
	wantRecords(t, hba, "b.conf:2 host all all ::1/128 trust", "pg_hba.conf:2 local all all peer")
	if len(hba.Errors) != 1 || !strings.Contains(hba.Errors[0], "include loop") {
		t.Errorf("errors %v", hba.Errors)
	}
	// A chain deeper than the server allows stops with an error.
	deep := map[string]string{"data/pg_hba.conf": "include d1.conf\n"}
	for i := 1; i <= 14; i++ {
		deep["data/d"+strconv.Itoa(i)+".conf"] = "include d" + strconv.Itoa(i+1) + ".conf\n"
	}
	hba = readHBA(t, "16", deep)
	if len(hba.Errors) == 0 || !strings.Contains(strings.Join(hba.Errors, "\n"), "nested more than") {
		t.Errorf("deep errors %v", hba.Errors)
	}
}

// TestHBAOddLines: records the server rejects are reported with file:line
// and left out; a truncated last line without a newline still counts.
func TestHBAOddLines(t *testing.T) {
	hba := readHBA(t, "15", map[string]string{"data/pg_hba.conf": "host all all\n" +
		"hots all all 0.0.0.0/0 trust\n" +
		"host all all 10.0.0.1 md5\n" +
		"host all all 10.0.0.0/33 md5\n" +
		"host all all 0.0.0.0/0 magic\n" +
		"host all all 0.0.0.0/0 peer\n" +
		"host all \"unterminated 0.0.0.0/0 md5\n" +
		"host all all 0.0.0.0/0 ldap noequals\n" +
		"host all,all all 10.0.0.0 255.0.255.0 md5\n" +
		"\x00\xff\n" +
		"host all all 0.0.0.0/0 trust"})
	wantRecords(t, hba, "pg_hba.conf:11 host all all 0.0.0.0/0 trust")
	want := []string{":1:", ":2:", ":3:", ":4:", ":5:", ":6:", ":7:", ":8:", ":9:", ":10:"}
	if len(hba.Errors) != len(want) {
		t.Fatalf("errors %d, want %d: %v", len(hba.Errors), len(want), hba.Errors)
	}
	for i, w := range want {
		if !strings.Contains(hba.Errors[i], "pg_hba.conf"+w) {
			t.Errorf("error %d %q lacks %q", i, hba.Errors[i], w)
		}
	}
}

// TestHBAContinuation: from PostgreSQL 14 a backslash at the end of a line
// joins the next one (also inside quotes); before, it is part of the text.
func TestHBAContinuation(t *testing.T) {
	files := map[string]string{"data/pg_hba.conf": "host all all \\\n  0.0.0.0/0 trust\nhost \"a\\\nb\" all ::/0 md5\n"}
	wantRecords(t, readHBA(t, "14", files), "pg_hba.conf:1 host all all 0.0.0.0/0 trust", `pg_hba.conf:3 host "ab" all ::/0 md5`)
	old := readHBA(t, "13", files)
	if len(old.Lines) != 0 || len(old.Errors) == 0 {
		t.Errorf("PostgreSQL 13: lines %v errors %v", records(old), old.Errors)
	}
}

func TestHBAUnreadable(t *testing.T) {
	hba := readHBA(t, "15", map[string]string{"data/other": "x"})
	if !strings.HasPrefix(hba.Err, "missing") || len(hba.Lines) != 0 {
		t.Errorf("missing: %+v", hba)
	}
	in := hbaInstance("15")
	in.DataDir = ""
	if hba := postgres.ReadHBA(hosttest.Tree(t, nil), in); !strings.Contains(hba.Err, "unknown") {
		t.Errorf("no data directory: %q", hba.Err)
	}
}

// TestHBAUntrusted: a file or link owned by another user is not read or
// followed: that user could point root at any file.
func TestHBAUntrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	root := t.TempDir()
	write := func(name, content string, uid int) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	write("data/pg_hba.conf", "include_if_exists evil.conf\nlocal all all peer\n", 0)
	write("data/evil.conf", "host all all 0.0.0.0/0 trust\n", 65534)
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	hba := postgres.ReadHBA(h, hbaInstance("16"))
	wantRecords(t, hba, "pg_hba.conf:2 local all all peer")
	if len(hba.Errors) != 1 || !strings.Contains(hba.Errors[0], "owned by uid 65534") {
		t.Errorf("errors %v", hba.Errors)
	}
	write("data/pg_hba.conf", "local all all peer\n", 65534)
	if hba := postgres.ReadHBA(h, hbaInstance("16")); !strings.Contains(hba.Err, "owned by uid 65534") {
		t.Errorf("main file: %q", hba.Err)
	}
}

func TestHBALocalOnly(t *testing.T) {
	for addr, local := range map[string]bool{
		"127.0.0.1/32": true, "127.0.0.0/8": true, "::1/128": true, "samehost": true, "localhost": true,
		"0.0.0.0/0": false, "::/0": false, "all": false, "samenet": false, "10.0.0.0/8": false,
		"db.example.com": false, "::/127": false, "0.0.0.0/1": false,
	} {
		if got := postgres.HBALocalOnly(engine.HBALine{Type: "host", Address: addr}); got != local {
			t.Errorf("%s: local %v", addr, got)
		}
	}
	if !postgres.HBALocalOnly(engine.HBALine{Type: "local"}) {
		t.Error("local records are local")
	}
}

// TestHBASnapshot: collect records pg_hba.conf and its includes; the
// snapshot reads the same records.
func TestHBASnapshot(t *testing.T) {
	for _, name := range []string{"pg-hba-open", "pg-hba-hardened"} {
		h := openFixture(t, name)
		ins, _ := discover(t, h, engine.Options{})
		var private *engine.Instance
		for _, in := range ins {
			if in.Port != 5432 {
				private = in
			}
		}
		if private == nil || private.Postgres.HBA == nil || private.Postgres.HBA.Err != "" || len(private.Postgres.HBA.Lines) < 5 {
			t.Fatalf("%s: hba %+v", name, private)
		}
		if private.Postgres.Security == nil || private.Postgres.Security.RolesErr != "" {
			t.Errorf("%s: security %+v", name, private.Postgres.Security)
		}
	}
	h := openFixture(t, "pg-hba-hardened")
	ins, _ := discover(t, h, engine.Options{})
	for _, in := range ins {
		if in.Port == 5432 {
			continue
		}
		hba := in.Postgres.HBA
		if len(hba.Files) != 2 || !strings.HasSuffix(hba.Files[1], "/approles") {
			t.Errorf("files %v", hba.Files)
		}
		if u := hba.Lines[5].Users; len(u) != 2 || u[0].Text != "app" || u[1].Text != "reporting" {
			t.Errorf("@approles %+v", u)
		}
	}
}

// TestIdentFile: pg_ident.conf is read with the same grammar and includes
// (ident_file, default $PGDATA/pg_ident.conf); lines without three fields
// are reported.
func TestIdentFile(t *testing.T) {
	hba := readHBA(t, "16", map[string]string{
		"data/pg_hba.conf":   "local all all peer map=admins\n",
		"data/pg_ident.conf": "admins root postgres\nadmins \"/^(.*)@corp$\" \\1\ninclude more.ident\nbroken line\n",
		"data/more.ident":    "admins alice app\n",
	})
	if hba.IdentFile != "/data/pg_ident.conf" || hba.IdentMaps != 3 {
		t.Errorf("ident %q maps %d", hba.IdentFile, hba.IdentMaps)
	}
	if len(hba.IdentErr) != 1 || !strings.Contains(hba.IdentErr[0], "pg_ident.conf:4: a user name map line needs 3 fields") {
		t.Errorf("ident errors %v", hba.IdentErr)
	}
	// A missing pg_ident.conf is normal.
	if hba := readHBA(t, "16", map[string]string{"data/pg_hba.conf": "local all all peer\n"}); len(hba.IdentErr) != 0 {
		t.Errorf("missing ident file: %v", hba.IdentErr)
	}
}
