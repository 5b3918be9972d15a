package mysql

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    []Entry
		errs    int
		errLike string
	}{
		{
			name: "groups, values, bare names",
			in:   "[mysqld]\nport = 3306\nskip-name-resolve\n\n[Client]\nuser=app\n",
			want: []Entry{
				{Kind: EntryOption, Group: "mysqld", Name: "port", Value: "3306", HasValue: true, Line: 2},
				{Kind: EntryOption, Group: "mysqld", Name: "skip-name-resolve", Line: 3},
				{Kind: EntryOption, Group: "client", Name: "user", Value: "app", HasValue: true, Line: 6},
			},
		},
		{
			name: "comments: # and ; at line start, # after a value, not inside quotes",
			in:   "# top\n[mysqld]\n; semi\n  # indented\nport=3307 # trailing\ninit_connect='SET x=1 # not a comment'\nsql_mode = \"A,B\"   # c\nfoo=a;b\n",
			want: []Entry{
				{Kind: EntryOption, Group: "mysqld", Name: "port", Value: "3307", HasValue: true, Line: 5},
				{Kind: EntryOption, Group: "mysqld", Name: "init_connect", Value: "SET x=1 # not a comment", HasValue: true, Line: 6},
				{Kind: EntryOption, Group: "mysqld", Name: "sql_mode", Value: "A,B", HasValue: true, Line: 7},
				{Kind: EntryOption, Group: "mysqld", Name: "foo", Value: "a;b", HasValue: true, Line: 8},
			},
		},
		{
			name: "quotes and escapes",
			in:   "[mysqld]\na=\"x\\ty\"\nb='it\\'s'\nc=C:\\\\dir\nd=\\s lead\ne=\\q\nf=\"unbalanced\ng=\"\"\nh=='v'\n",
			want: []Entry{
				{Kind: EntryOption, Group: "mysqld", Name: "a", Value: "x\ty", HasValue: true, Line: 2},
				{Kind: EntryOption, Group: "mysqld", Name: "b", Value: "it's", HasValue: true, Line: 3},
				{Kind: EntryOption, Group: "mysqld", Name: "c", Value: `C:\dir`, HasValue: true, Line: 4},
				{Kind: EntryOption, Group: "mysqld", Name: "d", Value: "  lead", HasValue: true, Line: 5},
				{Kind: EntryOption, Group: "mysqld", Name: "e", Value: `\q`, HasValue: true, Line: 6},
				{Kind: EntryOption, Group: "mysqld", Name: "f", Value: `"unbalanced`, HasValue: true, Line: 7},
				{Kind: EntryOption, Group: "mysqld", Name: "g", Value: "", HasValue: true, Line: 8},
				{Kind: EntryOption, Group: "mysqld", Name: "h", Value: "='v'", HasValue: true, Line: 9},
			},
		},
		{
			name: "dashes tolerated, CRLF, spaces around =",
			in:   "[mysqld]\r\n--port = 1\r\n\t innodb-buffer-pool-size\t=\t1G \r\n",
			want: []Entry{
				{Kind: EntryOption, Group: "mysqld", Name: "port", Value: "1", HasValue: true, Line: 2},
				{Kind: EntryOption, Group: "mysqld", Name: "innodb-buffer-pool-size", Value: "1G", HasValue: true, Line: 3},
			},
		},
		{
			name: "directives anywhere, even before a group",
			in:   "!include /etc/a.cnf\n[mysqld]\n!includedir   /etc/mysql/conf.d/  \n!includes x\n",
			want: []Entry{
				{Kind: EntryInclude, Path: "/etc/a.cnf", Line: 1},
				{Kind: EntryIncludeDir, Group: "mysqld", Path: "/etc/mysql/conf.d/", Line: 3},
			},
			errs: 1, errLike: "unknown directive",
		},
		{
			name: "errors: option before group, unclosed group, no name, space in name, empty include",
			in:   "port=1\n[mysqld\n[mysqld]\n=3\nport 3306\n!include\n",
			errs: 5,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParseOptions([]byte(tc.in))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("entries:\n got %+v\nwant %+v", got, tc.want)
			}
			if len(errs) != tc.errs {
				t.Errorf("errors: got %d %v, want %d", len(errs), errs, tc.errs)
			}
			if tc.errLike != "" && (len(errs) == 0 || !strings.Contains(errs[0].Msg, tc.errLike)) {
				t.Errorf("error %v does not mention %q", errs, tc.errLike)
			}
		})
	}
}

func TestResolveOption(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		has         bool
		want        string // "setting=value" or "" when nothing is set
	}{
		{"skip-name-resolve", "", false, "skip_name_resolve=ON"},
		{"skip_name_resolve", "0", true, "skip_name_resolve=0"},
		{"skip-symbolic-links", "", false, "symbolic_links=OFF"},
		{"skip-log-bin", "", false, "log_bin=OFF"},
		{"disable-log-bin", "", false, "log_bin=OFF"},
		{"enable-named-pipe", "", false, "named_pipe=ON"},
		{"loose-innodb-numa-interleave", "1", true, "innodb_numa_interleave=1"},
		{"loose-skip-grant-tables", "", false, "skip_grant_tables=ON"},
		{"disable-skip-name-resolve", "", false, "skip_name_resolve=OFF"},
		{"symbolic-links", "0", true, "symbolic_links=0"},
		{"Innodb_Buffer_Pool_Size", "1G", true, "innodb_buffer_pool_size=1G"},
		{"log-bin", "", false, "log_bin=ON"},
		{"maximum-max_connections", "10", true, ""},
	} {
		n, v, ok := ResolveOption(tc.name, tc.value, tc.has)
		got := ""
		if ok {
			got = n + "=" + v
		}
		if got != tc.want {
			t.Errorf("ResolveOption(%q, %q, %v) = %q, want %q", tc.name, tc.value, tc.has, got, tc.want)
		}
	}
}

// mapFS is an option-file tree in memory.
type mapFS map[string]string

func (m mapFS) ReadConfig(p string) ([]byte, error) {
	if p == "/denied.cnf" {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrPermission}
	}
	if c, ok := m[p]; ok {
		return []byte(c), nil
	}
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}

func (m mapFS) ReadDir(p string) ([]string, error) {
	var out []string
	prefix := strings.TrimSuffix(p, "/") + "/"
	for k := range m {
		if rest, ok := strings.CutPrefix(k, prefix); ok && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	if len(out) == 0 {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	// Unsorted on purpose: the loader must sort.
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out, nil
}

func settingsOf(t *testing.T, l *Loaded, groups []string, cmd []Option) *engine.Instance {
	t.Helper()
	in := &engine.Instance{}
	applyOptions(in, l.Options, groups)
	applyOptions(in, cmd, nil)
	return in
}

func TestLoaderIncludesAndPrecedence(t *testing.T) {
	fsys := mapFS{
		"/etc/mysql/my.cnf": "[mysqld]\nport=3306\nmax_connections=100\n!includedir /etc/mysql/conf.d/\n!include /etc/mysql/extra.cnf\n[mysqld]\nbind-address = 10.0.0.1\n",
		// Read in name order: 10-a before 20-b before zz.
		"/etc/mysql/conf.d/20-b.cnf":   "[mysqld]\nmax_connections=300\n",
		"/etc/mysql/conf.d/10-a.cnf":   "[mysqld]\nmax_connections=200\nbind-address=0.0.0.0\n[client]\nport=9999\n",
		"/etc/mysql/conf.d/zz.cnf":     "[mariadb]\ninnodb_flush_method=fsync\n",
		"/etc/mysql/conf.d/notes.txt":  "[mysqld]\nport=1\n",
		"/etc/mysql/conf.d/backup.bak": "[mysqld]\nport=2\n",
		"/etc/mysql/extra.cnf":         "[mysqld-10.11]\ninnodb_flush_method=O_DIRECT\n",
	}
	l := NewLoader(fsys, nil)
	l.Load("/etc/my.cnf", false) // missing default file: silently skipped
	l.Load("/etc/mysql/my.cnf", false)
	l.Finish()
	wantFiles := []string{"/etc/mysql/my.cnf", "/etc/mysql/conf.d/10-a.cnf", "/etc/mysql/conf.d/20-b.cnf", "/etc/mysql/conf.d/zz.cnf", "/etc/mysql/extra.cnf"}
	if !reflect.DeepEqual(l.Files, wantFiles) {
		t.Errorf("files %v, want %v", l.Files, wantFiles)
	}
	if len(l.Errors) != 0 {
		t.Errorf("unexpected errors %v", l.Errors)
	}
	if !reflect.DeepEqual(l.IncludeDirs, []string{"/etc/mysql/conf.d"}) {
		t.Errorf("include dirs %v", l.IncludeDirs)
	}

	in := settingsOf(t, l, ServerGroups(FlavorMariaDB, "10.11.6-MariaDB", ""), []Option{{Name: "port", Value: "3310", HasValue: true}})
	for name, want := range map[string]Setting{
		"port":                {Value: "3310", Source: "cmdline"},
		"max_connections":     {Value: "300", Source: "file:/etc/mysql/conf.d/20-b.cnf:2"},
		"bind_address":        {Value: "10.0.0.1", Source: "file:/etc/mysql/my.cnf:7"},
		"innodb_flush_method": {Value: "O_DIRECT", Source: "file:/etc/mysql/extra.cnf:2"},
	} {
		s, _ := in.Setting(name)
		if s.Value != want.Value || s.Source != want.Source {
			t.Errorf("%s = %+v, want %+v", name, s, want)
		}
	}
	// MySQL reads neither [mariadb] nor [mysqld-10.11] for version 8.0.
	in = settingsOf(t, l, ServerGroups(FlavorMySQL, "8.0.36", ""), nil)
	if v := in.SettingValue("innodb_flush_method"); v != "" {
		t.Errorf("MySQL picked up MariaDB-only groups: innodb_flush_method=%q", v)
	}
	if v := in.SettingValue("port"); v != "3306" {
		t.Errorf("[client] port leaked into the server: %q", v)
	}
}

// Setting is a short alias for test tables.
type Setting = engine.Setting

func TestLoaderLoopsDepthAndErrors(t *testing.T) {
	fsys := mapFS{
		"/a.cnf":        "[mysqld]\n!include /b.cnf\nport=1\n",
		"/b.cnf":        "[mysqld]\n!include /a.cnf\n!include /missing.cnf\n!include /denied.cnf\n",
		"/dir/self.cnf": "[mysqld]\n!includedir /dir\n",
	}
	// A chain deeper than the server follows.
	for i := 0; i < 15; i++ {
		fsys["/chain/"+string(rune('a'+i))+".cnf"] = "[mysqld]\nlevel=" + string(rune('a'+i)) + "\n!include /chain/" + string(rune('a'+i+1)) + ".cnf\n"
	}
	done := make(chan *Loaded)
	go func() {
		l := NewLoader(fsys, nil)
		l.Load("/a.cnf", false)
		l.Load("/dir/self.cnf", false)
		l.Load("/chain/a.cnf", false)
		l.Finish()
		done <- l
	}()
	var l *Loaded
	select {
	case l = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("loader hangs on include loops")
	}
	all := strings.Join(l.Errors, "\n")
	for _, want := range []string{"include loop: /a.cnf -> /b.cnf includes /a.cnf", "/missing.cnf: not present", "/denied.cnf: permission denied", "include loop: /dir/self.cnf", "include depth 10"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	in := settingsOf(t, l, []string{"mysqld"}, nil)
	if v := in.SettingValue("level"); v != "j" {
		t.Errorf("deepest level read = %q, want j (10 files deep)", v)
	}
	if v := in.SettingValue("port"); v != "1" {
		t.Errorf("port after a loop = %q", v)
	}
}

func TestLoaderIgnoresWorldWritable(t *testing.T) {
	l := NewLoader(mapFS{"/etc/my.cnf": "[mysqld]\nport=1\n"}, func(p string) string { return "it is world-writable" })
	l.Load("/etc/my.cnf", false)
	if len(l.Files) != 0 || len(l.Options) != 0 || !strings.Contains(strings.Join(l.Errors, ""), "world-writable") {
		t.Errorf("world-writable file read: %+v", l)
	}
}

func TestParseCmdline(t *testing.T) {
	c := parseCmdline([]string{"/usr/sbin/mysqld", "--defaults-file=/etc/my.cnf", "--defaults-group-suffix=.a",
		"--basedir=/usr", "--datadir", "/data", "-P3307", "-u", "mysql", "--skip-grant-tables", "--no-defaults", "--log-bin=/binlog/x"})
	if c.defaultsFile != "/etc/my.cnf" || c.groupSuffix != ".a" || c.noDefaults {
		t.Errorf("leading options: %+v", c)
	}
	in := &engine.Instance{}
	applyOptions(in, c.options, nil)
	for k, v := range map[string]string{"datadir": "/data", "port": "3307", "user": "mysql", "skip_grant_tables": "ON", "log_bin": "/binlog/x", "basedir": "/usr"} {
		if s, _ := in.Setting(k); s.Value != v || s.Source != "cmdline" {
			t.Errorf("%s = %+v, want %s from cmdline", k, s, v)
		}
	}
	if c := parseCmdline([]string{"mariadbd", "--no-defaults", "--port=1"}); !c.noDefaults {
		t.Error("--no-defaults not seen")
	}
}

func TestServerGroups(t *testing.T) {
	got := ServerGroups(FlavorMariaDB, "10.11.6-MariaDB-0+deb12u1", "")
	want := []string{"mysqld", "mysqld-10.11", "server", "mariadb", "mariadb-10.11", "mariadbd", "mariadbd-10.11", "client-server", "galera"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MariaDB groups %v, want %v", got, want)
	}
	got = ServerGroups(FlavorMySQL, "8.0.36", ".node1")
	want = []string{"mysqld", "mysqld-8.0", "server", "mysqld.node1", "mysqld-8.0.node1", "server.node1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MySQL groups %v, want %v", got, want)
	}
}

func TestParseVersionOutput(t *testing.T) {
	for _, tc := range []struct{ out, version, flavor string }{
		{"mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n", "10.11.19-MariaDB-0+deb12u1", FlavorMariaDB},
		{"/usr/sbin/mysqld  Ver 8.0.36-0ubuntu0.22.04.1 for Linux on x86_64 ((Ubuntu))", "8.0.36-0ubuntu0.22.04.1", FlavorMySQL},
		{"/usr/sbin/mysqld  Ver 8.0.35-27 for Linux on x86_64 (Percona Server (GPL), Release '27', Revision '2f8eeab2'$)", "8.0.35-27", FlavorPercona},
		{"/usr/sbin/mysqld  Ver 8.0.35-27.1 for Linux on x86_64 (Percona XtraDB Cluster (GPL), Release rel27, Revision 84d9464, WSREP version 26.1.4.3)", "8.0.35-27.1", FlavorPXC},
		{"garbage", "", FlavorMySQL},
	} {
		v, rest := parseVersionOutput(tc.out)
		if v != tc.version || FlavorOf(v, rest) != tc.flavor {
			t.Errorf("%q: version %q flavor %q, want %q %q", tc.out, v, FlavorOf(v, rest), tc.version, tc.flavor)
		}
	}
}

func TestBinlogDir(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		want     string
	}{
		{map[string]string{"log_bin": "OFF"}, ""},
		{map[string]string{"log_bin": "ON"}, "/data"},
		{map[string]string{"log_bin": "ON", "log_bin_basename": "/var/log/mysql/mysql-bin"}, "/var/log/mysql"},
		{map[string]string{"log_bin": "/binlog/mysql-bin"}, "/binlog"},
		{map[string]string{"log_bin": "logs/mysql-bin"}, "/data/logs"},
		{map[string]string{"log_bin": "mysql-bin"}, "/data"},
	} {
		in := &engine.Instance{}
		for k, v := range tc.settings {
			in.Set(k, v, "test")
		}
		if got := binlogDir(in, "/data"); got != tc.want {
			t.Errorf("%v: binlog dir %q, want %q", tc.settings, got, tc.want)
		}
	}
}

// A 50 MB option file parses in linear time.
func TestParseLargeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	var b bytes.Buffer
	b.WriteString("[mysqld]\n")
	for b.Len() < 50<<20 {
		b.WriteString("innodb_buffer_pool_size = 1G # a comment that is fairly long\n")
	}
	start := time.Now()
	entries, errs := ParseOptions(b.Bytes())
	if len(errs) != 0 || len(entries) < 100000 {
		t.Fatalf("entries %d errors %d", len(entries), len(errs))
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("50 MB took %v", d)
	}
}

func TestExplainPath(t *testing.T) {
	err := &fs.PathError{Op: "open", Path: "/x.cnf", Err: fs.ErrPermission}
	if got := explainPath("/x.cnf", err); got != "/x.cnf: permission denied (run dbhost as root)" {
		t.Errorf("explainPath = %q", got)
	}
	if got := explainPath("/y.cnf", errors.New("boom")); got != "/y.cnf: boom" {
		t.Errorf("explainPath = %q", got)
	}
	_ = path.Clean
}

func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{
		"[mysqld]\nport=3306\n",
		"[mysqld]\nskip-name-resolve\n# c\n; c\n",
		"!include /etc/a.cnf\n!includedir /etc/mysql/conf.d/\n",
		"[mysqld]\na='x # y' # z\nb=\"q\\\"\\n\"\n",
		"[client]\npassword = \"p#ss\\\\\"\n",
		"[mysqld\nx\n=\n",
		"\r\n[a]\r\nb = c\r\n",
		"[mysqld]\nloose-skip-grant-tables\ndisable-log-bin\nenable-x=1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, errs := ParseOptions(data)
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, e := range entries {
			if e.Line < 1 || e.Line > lines {
				t.Fatalf("line %d out of range 1..%d", e.Line, lines)
			}
			switch e.Kind {
			case EntryOption:
				if e.Name == "" || strings.ContainsAny(e.Name, " \t\n") {
					t.Fatalf("bad option name %q", e.Name)
				}
				if !e.HasValue && e.Value != "" {
					t.Fatalf("value without '=': %+v", e)
				}
				ResolveOption(e.Name, e.Value, e.HasValue)
			case EntryInclude, EntryIncludeDir:
				if e.Path == "" {
					t.Fatal("directive without path")
				}
			default:
				t.Fatalf("unknown kind %d", e.Kind)
			}
		}
		for _, pe := range errs {
			if pe.Line < 1 || pe.Line > lines {
				t.Fatalf("error line %d out of range", pe.Line)
			}
		}
	})
}

// Debian's packaged layout, read through a host rooted at testdata: two
// include directories, files in name order, only the server's groups.
func TestLoaderDebianLayout(t *testing.T) {
	h, err := host.Open("testdata/debian")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLoader(h, nil)
	for _, f := range []string{"/etc/my.cnf", "/etc/mysql/my.cnf", "/nonexistent/.my.cnf"} {
		l.Load(f, false)
	}
	l.Finish()
	want := []string{
		"/etc/mysql/my.cnf",
		"/etc/mysql/conf.d/mysql.cnf", "/etc/mysql/conf.d/mysqldump.cnf",
		"/etc/mysql/mariadb.conf.d/50-client.cnf", "/etc/mysql/mariadb.conf.d/50-mysqld_safe.cnf",
		"/etc/mysql/mariadb.conf.d/50-server.cnf", "/etc/mysql/mariadb.conf.d/60-galera.cnf",
	}
	if !reflect.DeepEqual(l.Files, want) || len(l.Errors) != 0 {
		t.Errorf("files %v errors %v", l.Files, l.Errors)
	}
	if !reflect.DeepEqual(l.IncludeDirs, []string{"/etc/mysql/conf.d", "/etc/mysql/mariadb.conf.d"}) {
		t.Errorf("include dirs %v", l.IncludeDirs)
	}
	in := settingsOf(t, l, ServerGroups(FlavorMariaDB, "10.11.6-MariaDB-0+deb12u1", ""), nil)
	for name, want := range map[string]string{
		"socket":                  "/run/mysqld/mysqld.sock", // [client-server]
		"bind_address":            "127.0.0.1",
		"innodb_buffer_pool_size": "1G", // [mariadb-10.11]
		"binlog_format":           "row",
		"max_allowed_packet":      "", // [mysqldump] is not the server's
		"nice":                    "", // nor [mysqld_safe]
		"port":                    "", // README is not a .cnf file
		"default_character_set":   "", // [client]
	} {
		if got := in.SettingValue(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if s, _ := in.Setting("bind_address"); s.Source != "file:/etc/mysql/mariadb.conf.d/50-server.cnf:8" {
		t.Errorf("bind_address source %q", s.Source)
	}
	// Another major version does not read [mariadb-10.11].
	if v := settingsOf(t, l, ServerGroups(FlavorMariaDB, "11.4.2-MariaDB", ""), nil).SettingValue("innodb_buffer_pool_size"); v != "" {
		t.Errorf("[mariadb-10.11] read by 11.4: %q", v)
	}
}
