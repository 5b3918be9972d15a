package postgres

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

func parseAll(s string) ([]Directive, []SyntaxError) {
	var ds []Directive
	errs, _ := ParseConf([]byte(s), func(d Directive) { ds = append(ds, d) })
	return ds, errs
}

func TestParseConf(t *testing.T) {
	type d = Directive
	tests := []struct {
		name string
		in   string
		want []Directive
		errs []int // lines with syntax errors
	}{
		{"equals and spaces", "shared_buffers = 128MB\n", []d{{"shared_buffers", "128MB", 1}}, nil},
		{"no equals", "max_connections 200", []d{{"max_connections", "200", 1}}, nil},
		{"no spaces", "port=5433", []d{{"port", "5433", 1}}, nil},
		{"comment and blank lines", "# c\n\n   \t\nwork_mem = 4MB # per sort\n", []d{{"work_mem", "4MB", 4}}, nil},
		{"case folded name", "Shared_Buffers = 1GB", []d{{"shared_buffers", "1GB", 1}}, nil},
		{"qualified name", "pg_stat_statements.max = 10000", []d{{"pg_stat_statements.max", "10000", 1}}, nil},
		{"quoted with doubled quote", "a = 'it''s'", []d{{"a", "it's", 1}}, nil},
		{"backslash escapes", `a = 'x\ty\n\'z\\'`, []d{{"a", "x\ty\n'z\\", 1}}, nil},
		{"octal escape", `a = '\101\0618'`, []d{{"a", "A18", 1}}, nil},
		{"hash inside quotes", "log_line_prefix = '%m # %p'  # real comment", []d{{"log_line_prefix", "%m # %p", 1}}, nil},
		{"empty string", "listen_addresses = ''", []d{{"listen_addresses", "", 1}}, nil},
		{"real and exponent", "random_page_cost = 1.1\nx = .5e-3\ny = -2.", []d{{"random_page_cost", "1.1", 1}, {"x", ".5e-3", 2}, {"y", "-2.", 3}}, nil},
		{"hex integer", "a = 0x1F", []d{{"a", "0x1F", 1}}, nil},
		{"negative integer", "wal_buffers = -1", []d{{"wal_buffers", "-1", 1}}, nil},
		{"unquoted word with punctuation", "timezone = Europe/Berlin\nd = a-b.c:d", []d{{"timezone", "Europe/Berlin", 1}, {"d", "a-b.c:d", 2}}, nil},
		{"crlf", "port = 1\r\nwork_mem = 2\r\n", []d{{"port", "1", 1}, {"work_mem", "2", 2}}, nil},
		{"no final newline", "a = 1\nb = 2", []d{{"a", "1", 1}, {"b", "2", 2}}, nil},
		{"later wins is the loader's job", "a = 1\na = 2", []d{{"a", "1", 1}, {"a", "2", 2}}, nil},
		{"utf-8 letters", "ä = 'ö'", []d{{"ä", "ö", 1}}, nil},
		{"redacted secret from a snapshot", "ssl_passphrase_command = <redacted>", []d{{"ssl_passphrase_command", "<redacted>", 1}}, nil},
		{"include directives are directives", "include 'x.conf'\ninclude_dir = 'conf.d'", []d{{"include", "x.conf", 1}, {"include_dir", "conf.d", 2}}, nil},
		// Lines the server rejects.
		{"unquoted path", "log_directory = /var/log/pg\nport = 1", []d{{"port", "1", 2}}, []int{1}},
		{"value with space", "shared_buffers = 128 MB", nil, []int{1}},
		{"unterminated string", "a = 'abc\nb = 1", []d{{"b", "1", 2}}, []int{1}},
		{"missing value", "a =\n", nil, []int{1}},
		{"star unquoted", "listen_addresses = *", nil, []int{1}},
		{"number as name", "1 = 2", nil, []int{1}},
		{"exponent without dot", "a = 1e5", nil, []int{1}},
		{"two dots in name", "a.b.c = 1", nil, []int{1}},
		{"trailing backslash", `a = 'x\`, nil, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := parseAll(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("directives = %+v, want %+v", got, tt.want)
			}
			var lines []int
			for _, e := range errs {
				lines = append(lines, e.Line)
			}
			if !reflect.DeepEqual(lines, tt.errs) {
				t.Errorf("error lines = %v (%v), want %v", lines, errs, tt.errs)
			}
		})
	}
}

func TestParseConfGivesUpAfter100Errors(t *testing.T) {
	in := strings.Repeat("bad line here\n", 150) + "port = 1\n"
	got, errs := parseAll(in)
	_, truncated := ParseConf([]byte(in), func(Directive) {})
	if len(errs) != MaxSyntaxErrors || !truncated || len(got) != 0 {
		t.Fatalf("errors %d truncated %v directives %v", len(errs), truncated, got)
	}
}

// confHost writes files below a temporary root and opens a Host on it.
func confHost(t *testing.T, files map[string]string) *host.Host {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func load(h *host.Host, main, data string) *Config {
	c := NewConfig(h)
	c.ReadMain(main)
	if data != "" {
		c.ReadAuto(data)
	}
	return c
}

func TestLoadIncludes(t *testing.T) {
	h := confHost(t, map[string]string{
		"/etc/pg/postgresql.conf": "shared_buffers = 1GB\n" +
			"include 'extra.conf'\n" + // relative to /etc/pg
			"include_if_exists = 'missing.conf'\n" +
			"include_if_exists '/etc/pg/present.conf'\n" +
			"include_dir 'conf.d'\n" +
			"work_mem = 8MB\n",
		"/etc/pg/extra.conf":          "work_mem = 4MB\nmax_connections = 50\ninclude 'sub/deeper.conf'\n",
		"/etc/pg/sub/deeper.conf":     "random_page_cost = 1.1\n",
		"/etc/pg/present.conf":        "port = 5433\n",
		"/etc/pg/conf.d/10-a.conf":    "max_connections = 60\n",
		"/etc/pg/conf.d/9-b.conf":     "max_connections = 70\n", // "9" sorts after "1": read later
		"/etc/pg/conf.d/B.conf":       "huge_pages = on\n",
		"/etc/pg/conf.d/a.conf":       "huge_pages = off\n", // lower case sorts after upper case
		"/etc/pg/conf.d/.hidden.conf": "port = 1\n",
		"/etc/pg/conf.d/notes.txt":    "port = 2\n",
		"/etc/pg/conf.d/x.conf.bak":   "port = 3\n",
		"/etc/pg/conf.d/dir.conf/":    "",
		"/data/postgresql.auto.conf":  "# ALTER SYSTEM\nshared_buffers = '2GB'\n",
	})
	c := load(h, "/etc/pg/postgresql.conf", "/data")
	if len(c.Errors) != 0 {
		t.Fatalf("errors: %v", c.Errors)
	}
	wantFiles := []string{"/etc/pg/postgresql.conf", "/etc/pg/extra.conf", "/etc/pg/sub/deeper.conf", "/etc/pg/present.conf",
		"/etc/pg/conf.d/10-a.conf", "/etc/pg/conf.d/9-b.conf", "/etc/pg/conf.d/B.conf", "/etc/pg/conf.d/a.conf", "/data/postgresql.auto.conf"}
	if !reflect.DeepEqual(c.Files, wantFiles) {
		t.Errorf("files = %v\nwant %v", c.Files, wantFiles)
	}
	if !reflect.DeepEqual(c.IncludeDirs, []string{"/etc/pg/conf.d"}) {
		t.Errorf("include dirs = %v", c.IncludeDirs)
	}
	s := c.Settings()
	want := map[string][2]string{
		"shared_buffers":   {"2GB", "file:/data/postgresql.auto.conf:2"}, // auto.conf is read last
		"work_mem":         {"8MB", "file:/etc/pg/postgresql.conf:6"},    // later line wins over the include
		"max_connections":  {"70", "file:/etc/pg/conf.d/9-b.conf:1"},
		"random_page_cost": {"1.1", "file:/etc/pg/sub/deeper.conf:1"},
		"port":             {"5433", "file:/etc/pg/present.conf:1"},
		"huge_pages":       {"off", "file:/etc/pg/conf.d/a.conf:1"},
	}
	for name, w := range want {
		if got := s[name]; got.Value != w[0] || got.Source != w[1] {
			t.Errorf("%s = %+v, want %v", name, got, w)
		}
	}
	if len(s) != len(want) {
		t.Errorf("settings = %v", s)
	}
}

func TestLoadErrors(t *testing.T) {
	h := confHost(t, map[string]string{
		"/c/main.conf":  "include 'gone.conf'\ninclude_dir 'nodir'\ninclude 'a.conf'\ninclude 'self.conf'\nport = 1\n",
		"/c/a.conf":     "include 'b.conf'\nwork_mem = 1MB\n",
		"/c/b.conf":     "include 'a.conf'\nbad value here\n",
		"/c/self.conf":  "include 'self.conf'\n",
		"/c/empty.conf": "",
	})
	c := load(h, "/c/main.conf", "/nodata")
	want := []string{
		`/c/main.conf:1: include "/c/gone.conf": not present on this host`,
		`/c/main.conf:2: include_dir "/c/nodir": not present on this host`,
		`/c/b.conf:1: include loop: /c/b.conf includes /c/a.conf, which is already being read`,
		`/c/b.conf:2: syntax error near "here"`,
		`/c/self.conf:1: include loop: /c/self.conf includes /c/self.conf, which is already being read`,
	}
	if len(c.Errors) != len(want) {
		t.Fatalf("errors:\n%s", strings.Join(c.Errors, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(c.Errors[i], w) {
			t.Errorf("error %d = %q\nwant prefix %q", i, c.Errors[i], w)
		}
	}
	if v, _ := c.Value("port"); v != "1" {
		t.Errorf("port = %q: settings after a broken include must still count", v)
	}
	if v, _ := c.Value("work_mem"); v != "1MB" {
		t.Errorf("work_mem = %q", v)
	}
}

func TestLoadMainMissing(t *testing.T) {
	h := confHost(t, map[string]string{"/x": ""})
	c := load(h, "/etc/none/postgresql.conf", "/none")
	if len(c.Errors) != 1 || !strings.Contains(c.Errors[0], "cannot read configuration file") {
		t.Fatalf("errors = %v", c.Errors)
	}
	if len(c.Files) != 0 {
		t.Fatalf("files = %v", c.Files)
	}
}

func TestLoadDepthLimit(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 15; i++ {
		files[fmt.Sprintf("/c/%d.conf", i)] = fmt.Sprintf("include '%d.conf'\nlevel = %d\n", i+1, i)
	}
	h := confHost(t, files)
	c := load(h, "/c/0.conf", "")
	if len(c.Files) != maxDepth+1 {
		t.Errorf("read %d files, want %d", len(c.Files), maxDepth+1)
	}
	if len(c.Errors) != 1 || !strings.Contains(c.Errors[0], "nested more than 10 levels") {
		t.Errorf("errors = %v", c.Errors)
	}
	if v, _ := c.Value("level"); v != "0" {
		t.Errorf("level = %q: the main file's line comes last", v)
	}
}

func TestLoadIncludeDirLoop(t *testing.T) {
	// conf.d/x.conf includes the directory it lives in.
	h := confHost(t, map[string]string{
		"/c/main.conf":     "include_dir 'conf.d'\n",
		"/c/conf.d/x.conf": "include_dir '.'\nport = 7\n",
	})
	done := make(chan *Config)
	go func() { done <- load(h, "/c/main.conf", "") }()
	select {
	case c := <-done:
		if len(c.Errors) == 0 || !strings.Contains(strings.Join(c.Errors, "\n"), "include loop") {
			t.Errorf("errors = %v", c.Errors)
		}
		if v, _ := c.Value("port"); v != "7" {
			t.Errorf("port = %q", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("include_dir loop hangs")
	}
}

// TestLoadHugeFile: a configuration file just under the 4 MiB cap is read
// whole; a 50 MB one (which cost 550 MB to parse) is refused, saying why.
func TestLoadHugeFile(t *testing.T) {
	line := "shared_buffers = '128MB'   # a comment that makes the line longer than usual\n"
	write := func(size int) *host.Host {
		var b bytes.Buffer
		for b.Len() < size-len(line) {
			b.WriteString(line)
		}
		b.WriteString("port = 6543\n")
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "big.conf"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := host.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	start := time.Now()
	c := load(write(host.MaxConfigSize-1024), "/big.conf", "")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("4 MB took %v", d)
	}
	if v, _ := c.Value("port"); v != "6543" || len(c.Errors) != 0 {
		t.Errorf("port = %q errors %v", v, c.Errors)
	}
	c = load(write(50<<20), "/big.conf", "")
	if len(c.Errors) != 1 || !strings.Contains(c.Errors[0], "larger than 4 MiB") {
		t.Errorf("a 50 MB file: errors %v", c.Errors)
	}
}

func TestLoadManyDistinctNames(t *testing.T) {
	var b bytes.Buffer
	for i := 0; i < maxSettings+10; i++ {
		fmt.Fprintf(&b, "x%d = 1\n", i)
	}
	h := confHost(t, map[string]string{"/m.conf": b.String()})
	c := load(h, "/m.conf", "")
	if len(c.settings) != maxSettings || len(c.Errors) != 1 {
		t.Fatalf("kept %d settings, errors %v", len(c.settings), c.Errors)
	}
}

func TestLoadRedactsSecrets(t *testing.T) {
	h := confHost(t, map[string]string{
		"/p.conf": "ssl_passphrase_command = 'echo hunter2'\nprimary_conninfo = 'host=a password=hunter2 user=r'\n",
	})
	c := load(h, "/p.conf", "")
	for name, s := range c.Settings() {
		if strings.Contains(s.Value, "hunter2") {
			t.Errorf("%s keeps a secret: %q", name, s.Value)
		}
	}
}

func TestParseArgs(t *testing.T) {
	a := ParseArgs(strings.Fields("-D /var/lib/pg -c config_file=/etc/pg/postgresql.conf -p5433 -B 1000 -i -cwork_mem=4MB --max-connections=7 -k /tmp -c bogus --shared_buffers=64MB -F"))
	if a.ConfigDir != "/var/lib/pg" {
		t.Errorf("ConfigDir = %q", a.ConfigDir)
	}
	want := map[string]string{
		"config_file": "/etc/pg/postgresql.conf", "port": "5433", "shared_buffers": "64MB", "listen_addresses": "*",
		"work_mem": "4MB", "max_connections": "7", "unix_socket_directories": "/tmp", "fsync": "off",
	}
	for k, w := range want {
		if v, ok := a.Value(k); !ok || v != w {
			t.Errorf("%s = %q, want %q", k, v, w)
		}
	}
	if _, ok := a.Value("bogus"); ok {
		t.Error("-c without = must be ignored")
	}
}

func TestPgpassLookup(t *testing.T) {
	pass := []byte("# comment\nother:5432:*:postgres:no\nlocalhost:5432:*:postgres:pw\\:1\n*:*:*:*:fallback\n")
	if got := PgpassLookup(pass, "localhost", "5432", "postgres", "postgres"); got != "pw:1" {
		t.Errorf("got %q", got)
	}
	if got := PgpassLookup(pass, "localhost", "5433", "db", "me"); got != "fallback" {
		t.Errorf("got %q", got)
	}
	if got := PgpassLookup([]byte("a:b"), "a", "b", "c", "d"); got != "" {
		t.Errorf("got %q", got)
	}
}

func TestDefaultsFor(t *testing.T) {
	if d := defaultsFor(15); d["log_directory"] != "log" || d["wal_level"] != "replica" || d["effective_io_concurrency"] != "1" {
		t.Errorf("15: %v", d)
	}
	if d := defaultsFor(9); d["log_directory"] != "pg_log" || d["wal_level"] != "minimal" {
		t.Errorf("9: %v", d)
	}
	if d := defaultsFor(18); d["effective_io_concurrency"] != "16" {
		t.Errorf("18: %v", d)
	}
	if d := defaultsFor(0); d["effective_io_concurrency"] != "1" || d["shared_buffers"] != "128MB" {
		t.Errorf("unknown: %v", d)
	}
}

func FuzzParseConf(f *testing.F) {
	for _, s := range []string{
		"shared_buffers = 128MB\n",
		"a = 'it''s \\n \\101'\n# comment\n",
		"include_dir 'conf.d'\ninclude_if_exists = '/x'\n",
		"pg_stat_statements.track = all\n",
		"x = 0x1Fkb\ny = -.5E+3\nz = /bad\n",
		"a = 'unterminated\n",
		"a = <redacted>\n",
		"\r\n\t# only whitespace\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		errs, _ := ParseConf(b, func(d Directive) {
			n++
			if d.Name == "" || d.Line < 1 {
				t.Fatalf("bad directive %+v", d)
			}
			if d.Name != strings.ToLower(d.Name) {
				t.Fatalf("name not lower-cased: %q", d.Name)
			}
		})
		lines := bytes.Count(b, []byte("\n")) + 1
		if n+len(errs) > lines {
			t.Fatalf("%d directives + %d errors from %d lines", n, len(errs), lines)
		}
		if len(errs) > MaxSyntaxErrors {
			t.Fatalf("%d errors", len(errs))
		}
	})
}

func TestSnippetOverridden(t *testing.T) {
	in := &engine.Instance{ConfigFiles: []string{"/etc/pg/postgresql.conf", "/etc/pg/conf.d/10-a.conf", "/etc/pg/conf.d/zz.conf", "/etc/pg/late.conf", "/data/postgresql.auto.conf"}}
	in.Set("a", "1", "file:/etc/pg/postgresql.conf:3")
	in.Set("b", "1", "live:/etc/pg/conf.d/10-a.conf:1")
	in.Set("c", "1", "file:/etc/pg/conf.d/zz.conf:2")
	in.Set("d", "1", "live:/data/postgresql.auto.conf:3")
	in.Set("e", "1", "cmdline")
	in.Set("f", "1", "file:/etc/pg/late.conf:1")
	in.Set("g", "1", "default")
	in.Set("h", "1", "live")
	snippet := "/etc/pg/conf.d/dbhost.conf"
	want := map[string]bool{"a": false, "b": false, "c": true, "d": true, "e": true, "f": true, "g": false, "h": false, "missing": false}
	for name, w := range want {
		by, got := SnippetOverridden(in, name, snippet)
		if got != w {
			t.Errorf("%s: overridden=%v (%s), want %v", name, got, by, w)
		}
	}
	if k, f, l := Origin(engine.Setting{Source: "live:/x/y.conf:12"}); k != "live" || f != "/x/y.conf" || l != 12 {
		t.Errorf("origin %s %s %d", k, f, l)
	}
}

func TestBool(t *testing.T) {
	in := &engine.Instance{}
	for v, want := range map[string][2]bool{"on": {true, true}, "TRUE": {true, true}, "ye": {true, true}, "1": {true, true},
		"off": {false, true}, "of": {false, true}, "n": {false, true}, "0": {false, true}, "try": {false, false}, "o": {false, false}} {
		in.Set("x", v, "file:/x:1")
		if got, ok := Bool(in, "x"); got != want[0] || ok != want[1] {
			t.Errorf("%q = %v %v, want %v", v, got, ok, want)
		}
	}
}
