package redis

import (
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// mapFS is an in-memory file tree for the parser.
type mapFS map[string]string

func (m mapFS) ReadFile(p string) ([]byte, error) {
	if s, ok := m[p]; ok {
		return []byte(s), nil
	}
	if p == "/etc/redis/secret.conf" {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrPermission}
	}
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}

func (m mapFS) ReadDir(dir string) ([]string, error) {
	var out []string
	for k := range m {
		if path.Dir(k) == path.Clean(dir) {
			out = append(out, path.Base(k))
		}
	}
	if len(out) == 0 {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	sort.Strings(out)
	return out, nil
}

func TestSplitArgs(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  bool
	}{
		{`bind 127.0.0.1 -::1`, []string{"bind", "127.0.0.1", "-::1"}, false},
		{`save ""`, []string{"save", ""}, false},
		{`logfile "/var/log/redis server.log"`, []string{"logfile", "/var/log/redis server.log"}, false},
		{`notify-keyspace-events "\x41\n"`, []string{"notify-keyspace-events", "A\n"}, false},
		{`requirepass 'it\'s'`, []string{"requirepass", "it's"}, false},
		{`a "b"c`, nil, true},
		{`a "unterminated`, nil, true},
		{`a 'x`, nil, true},
		{`  spaced	tabs  `, []string{"spaced", "tabs"}, false},
		{`mid"dle quoted"`, []string{"middle quoted"}, false},
		{``, nil, false},
	}
	for _, c := range cases {
		got, err := SplitArgs(c.in)
		if (err != nil) != c.err {
			t.Errorf("SplitArgs(%q) error = %v, want error %v", c.in, err, c.err)
			continue
		}
		if !c.err && !reflect.DeepEqual(got, c.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func settingsOf(t *testing.T, fsys mapFS, file, cwd string, argv []string, version string) (*engine.Instance, *Conf) {
	t.Helper()
	in := &engine.Instance{Engine: engine.Redis, Version: version, Redis: &engine.RedisInfo{}}
	defaults(in)
	s := newSettings(in)
	c := ParseConf(fsys, file, cwd)
	for _, d := range c.Directives {
		s.apply(d)
	}
	for _, d := range ParseCmdline(argv).Options {
		s.apply(d)
	}
	in.Redis.AuthConfigured, in.Redis.AuthSource = s.auth()
	return in, c
}

func TestParseConfIncludesAndOverrides(t *testing.T) {
	fsys := mapFS{
		"/etc/redis/redis.conf": `# main
bind 127.0.0.1 -::1
port 6379
save 900 1
save 300 10
include /etc/redis/conf.d/*.conf
include local.conf
tcp-backlog 511
`,
		"/etc/redis/conf.d/10-a.conf": "maxmemory 1gb\n",
		"/etc/redis/conf.d/20-b.conf": "maxmemory 2gb\nappendonly yes\n",
		"/etc/redis/conf.d/.hidden":   "maxmemory 9gb\n",
		"/var/lib/redis/local.conf":   "tcp-backlog 1024\nSlaveOf 10.0.0.1 6379\n",
	}
	in, c := settingsOf(t, fsys, "/etc/redis/redis.conf", "/var/lib/redis",
		[]string{"redis-server", "/etc/redis/redis.conf", "--port", "7000", "--bind", "10.0.0.5", "-::1", "--save"}, "7.0.15")
	if len(c.Errors) != 0 {
		t.Fatalf("errors: %v", c.Errors)
	}
	wantFiles := []string{"/etc/redis/redis.conf", "/etc/redis/conf.d/10-a.conf", "/etc/redis/conf.d/20-b.conf", "/var/lib/redis/local.conf"}
	if !reflect.DeepEqual(c.Files, wantFiles) {
		t.Errorf("files = %v, want %v", c.Files, wantFiles)
	}
	want := map[string]engine.Setting{
		// The last line wins; the include after tcp-backlog 511 is read
		// before it (includes are read where they stand).
		"tcp_backlog": {Value: "511", Source: "file:/etc/redis/redis.conf:8"},
		"maxmemory":   {Value: "2gb", Source: "file:/etc/redis/conf.d/20-b.conf:1"},
		"appendonly":  {Value: "yes", Source: "file:/etc/redis/conf.d/20-b.conf:2"},
		"replicaof":   {Value: "10.0.0.1 6379", Source: "file:/var/lib/redis/local.conf:2"},
		"port":        {Value: "7000", Source: "cmdline"},
		"bind":        {Value: "10.0.0.5 -::1", Source: "cmdline"},
		// `--save` with nothing after it means save "".
		"save":           {Value: "", Source: "cmdline"},
		"protected_mode": {Value: "yes", Source: "default"},
	}
	for k, v := range want {
		if got := in.Settings[k]; got != v {
			t.Errorf("%s = %+v, want %+v", k, got, v)
		}
	}
}

func TestSaveAccumulatesWithinALoad(t *testing.T) {
	fsys := mapFS{"/r.conf": "save 900 1\nsave 300 10\n"}
	in, _ := settingsOf(t, fsys, "/r.conf", "/", []string{"redis-server", "/r.conf", "--save", "60 10000"}, "7.2.4")
	if got := in.SettingValue("save"); got != "900 1 300 10 60 10000" {
		t.Errorf("save = %q", got)
	}
	in, _ = settingsOf(t, mapFS{"/r.conf": "port 1\n"}, "/r.conf", "/", nil, "7.2.4")
	if got := in.Settings["save"]; got.Value != "3600 1 300 100 60 10000" || got.Source != "default" {
		t.Errorf("default save = %+v", got)
	}
	in, _ = settingsOf(t, mapFS{"/r.conf": "save 900 1\nsave \"\"\n"}, "/r.conf", "/", nil, "7.2.4")
	if got := in.SettingValue("save"); got != "" {
		t.Errorf(`save after save "" = %q`, got)
	}
}

func TestParseConfLoopsAndErrors(t *testing.T) {
	fsys := mapFS{
		"/etc/redis/redis.conf": "include /etc/redis/a.conf\nport 6380\nbind \"127.0.0.1\n",
		"/etc/redis/a.conf":     "include b.conf\nmaxmemory 1mb\n",
		"/etc/redis/b.conf":     "include /etc/redis/redis.conf\n",
	}
	// Relative includes resolve against the working directory.
	_, c := settingsOf(t, fsys, "/etc/redis/redis.conf", "/etc/redis", nil, "")
	joined := strings.Join(c.Errors, "\n")
	if !strings.Contains(joined, "include loop: /etc/redis/redis.conf -> /etc/redis/a.conf -> /etc/redis/b.conf -> /etc/redis/redis.conf") {
		t.Errorf("loop not reported: %s", joined)
	}
	if !strings.Contains(joined, "file:/etc/redis/redis.conf:3: unbalanced quotes") {
		t.Errorf("bad quotes not reported: %s", joined)
	}
	if c.Unreadable {
		t.Error("a loop is not an unreadable file")
	}
	// A file that includes itself.
	_, c = settingsOf(t, mapFS{"/s.conf": "include /s.conf\n"}, "/s.conf", "/", nil, "")
	if len(c.Errors) != 1 || !strings.Contains(c.Errors[0], "/s.conf -> /s.conf") {
		t.Errorf("self include: %v", c.Errors)
	}
	// An unreadable include makes the settings incomplete.
	_, c = settingsOf(t, mapFS{"/m.conf": "include /etc/redis/secret.conf\n"}, "/m.conf", "/", nil, "")
	if !c.Unreadable || !strings.Contains(strings.Join(c.Errors, ""), "permission denied") {
		t.Errorf("unreadable include: %+v", c)
	}
	// A wildcard that matches nothing is silently ignored, like glob(3).
	_, c = settingsOf(t, mapFS{"/m.conf": "include /nowhere/*.conf\n"}, "/m.conf", "/", nil, "")
	if len(c.Errors) != 0 || c.Unreadable {
		t.Errorf("empty wildcard: %+v", c)
	}
}

func TestDirChangesIncludeBase(t *testing.T) {
	fsys := mapFS{
		"/etc/r.conf":            "dir /data/redis\ninclude extra.conf\n",
		"/data/redis/extra.conf": "maxclients 5\n",
	}
	in, c := settingsOf(t, fsys, "/etc/r.conf", "/", nil, "")
	if len(c.Errors) != 0 || in.SettingValue("maxclients") != "5" {
		t.Errorf("include after dir: errors %v, maxclients %q", c.Errors, in.SettingValue("maxclients"))
	}
}

func TestParseCmdline(t *testing.T) {
	c := ParseCmdline([]string{"redis-server", "--port", "7000", "--bind", "127.0.0.1", "-::1", "--save", "--appendonly yes", "--sentinel"})
	if c.ConfigFile != "" || !c.Sentinel {
		t.Errorf("config %q sentinel %v", c.ConfigFile, c.Sentinel)
	}
	var got []string
	for _, d := range c.Options {
		got = append(got, d.Name+"="+strings.Join(d.Args, "|"))
	}
	want := []string{"port=7000", "bind=127.0.0.1|-::1", "save=", "appendonly=yes", "sentinel="}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("options = %q, want %q", got, want)
	}
	c = ParseCmdline([]string{"/usr/bin/redis-server", "redis.conf", "-"})
	if c.ConfigFile != "redis.conf" || !c.Stdin {
		t.Errorf("%+v", c)
	}
	c = ParseCmdline([]string{"redis-server", "--save", "--port", "1"})
	if len(c.Options) != 2 || c.Options[0].Value() != "" || c.Options[1].Value() != "1" {
		t.Errorf("--save before another option: %+v", c.Options)
	}
}

func TestParseTitle(t *testing.T) {
	cases := []struct {
		argv []string
		want title
		ok   bool
	}{
		{[]string{"redis-server 127.0.0.1:6379"}, title{addr: "127.0.0.1", port: 6379}, true},
		{[]string{"/usr/bin/redis-server *:7000 [cluster]"}, title{addr: "*", port: 7000, mode: "cluster"}, true},
		{[]string{"redis-server unixsocket:/run/redis.sock"}, title{unix: "/run/redis.sock"}, true},
		{[]string{"redis-server ::1:6380"}, title{addr: "::1", port: 6380}, true},
		{[]string{"redis-server", "/etc/redis.conf"}, title{}, false},
		{[]string{"redis-server"}, title{}, false},
	}
	for _, c := range cases {
		got, ok := parseTitle(c.argv)
		if ok != c.ok || got != c.want {
			t.Errorf("parseTitle(%q) = %+v %v, want %+v %v", c.argv, got, ok, c.want, c.ok)
		}
	}
}

func TestAuthFromConfig(t *testing.T) {
	cases := []struct {
		conf string
		want bool
		src  string
	}{
		{"port 1\n", false, "default"},
		{"requirepass s3cret\n", true, "file:/r.conf:1"},
		{"requirepass " + host.Redacted + "\n", true, "file:/r.conf:1"}, // as a snapshot stores it
		{"requirepass \"\"\n", false, "default"},
		{"user default on nopass ~* +@all\n", false, "file:/r.conf:1"},
		{"user default on >pw ~* +@all\n", true, "file:/r.conf:1"},
		{"user default on >pw nopass ~* +@all\n", false, "file:/r.conf:1"},
		{"user default off nopass\n", true, "file:/r.conf:1"},
		{"user default on ~* +@all\n", true, "file:/r.conf:1"}, // no password and no nopass: nobody logs in as default
		{"requirepass x\nuser default on nopass ~* +@all\n", false, "file:/r.conf:2"},
		{"user alice on >pw ~* +@all\n", false, "default"},
	}
	for _, c := range cases {
		in, _ := settingsOf(t, mapFS{"/r.conf": c.conf}, "/r.conf", "/", nil, "7.0.0")
		if in.Redis.AuthConfigured != c.want || in.Redis.AuthSource != c.src {
			t.Errorf("%q: auth %v from %q, want %v from %q", c.conf, in.Redis.AuthConfigured, in.Redis.AuthSource, c.want, c.src)
		}
		if v := in.SettingValue("requirepass"); v != "" && v != host.Redacted {
			t.Errorf("%q: requirepass kept in settings as %q", c.conf, v)
		}
	}
}

func TestDefaultsByVersion(t *testing.T) {
	in := &engine.Instance{Version: "6.2.14"}
	defaults(in)
	if got := in.Settings["bind"]; got.Value != "" || got.Source != "default" {
		t.Errorf("6.2 bind default = %+v", got)
	}
	in = &engine.Instance{Version: "7.2.4"}
	defaults(in)
	if in.SettingValue("bind") != "* -::*" || in.SettingValue("tcp_backlog") != "511" || in.SettingValue("protected-mode") != "yes" {
		t.Errorf("7.2 defaults: %+v", in.Settings)
	}
}

func TestUnitWords(t *testing.T) {
	got := unitWords(expandSpecifiers(`/usr/bin/redis-server /etc/redis/redis-%i.conf --supervised systemd "--daemonize no"`, "redis-server@cache.service"))
	want := []string{"/usr/bin/redis-server", "/etc/redis/redis-cache.conf", "--supervised", "systemd", "--daemonize no"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unitWords = %q, want %q", got, want)
	}
	c := ParseCmdline(got)
	if c.ConfigFile != "/etc/redis/redis-cache.conf" || len(c.Options) != 2 || c.Options[1].Value() != "no" {
		t.Errorf("%+v", c)
	}
}
