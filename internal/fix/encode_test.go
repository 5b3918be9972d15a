package fix

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbhost/dbhost/internal/conftext"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mongo"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/engine/redis"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/unitfile"
)

// hostStrings are what a host controls in one rendering: a name (of an
// instance, unit, user, device, mount point, TuneD profile, and the
// finding's subject), a key and a value.
type hostStrings struct{ name, key, value string }

// nasty are strings a host user can plant: line ends, NUL, terminal
// escapes, a trailing backslash, quotes, specifiers, substitutions,
// invalid UTF-8, very long text, and lines of each format.
var nasty = []string{
	"/tmp/x/b\nkernel.core_pattern = |/tmp/x/pwn %p\n#",
	"|/tmp/x/pwn %p\nvm.x = 1",
	"a\rb", "v\rkernel.x = 1", "a\x00b", "\x1b[2J\x1b]0;t\x07",
	"trail\\", `a"b'c`, "%n%%", "100%", "$(touch /tmp/p)", "`id`", "${f:exec:/tmp/p}",
	"\xff\xfe", "v\x80", strings.Repeat("n", 1200), strings.Repeat("v ", 600),
	"32000 1024000000 500 32000", "* hard nproc unlimited", "none\", RUN+=\"/tmp/p",
	"x.service\n[Service]\nExecStartPre=/tmp/p", "Service]\n[Unit", "quiet\" init=/tmp/p \"",
	"include", "- a", "#v", "", " both ", "\u2028\u202e", "k\u0085", "3306 # x", "null", "-n", "-e \\c",
	"'", "\\'", "a\tb", "noatime\n/dev/sda1 / ext4 defaults 0 0",
}

// nastyCases put each nasty string in every place at once, and alone as
// the name, the key and the value beside ordinary strings (so that one
// refused string does not hide the others' encoding).
func nastyCases() []hostStrings {
	var out []hostStrings
	for _, s := range nasty {
		out = append(out, hostStrings{s, s, s}, hostStrings{s, "vm.dirty_ratio", "10"},
			hostStrings{"pg.service", s, "10"}, hostStrings{"pg.service", "vm.dirty_ratio", s})
	}
	return out
}

// engines are the configuration snippet formats, with a setting each
// engine has and the directory or file the instance reads.
var engines = []struct {
	engine, key, value string
	info               InstanceInfo
}{
	{"postgres", "shared_buffers", "128MB", InstanceInfo{Engine: "postgres", ConfDir: "/etc/postgresql/15/main/conf.d", ConfFile: "/etc/postgresql/15/main/postgresql.conf"}},
	{"mysql", "innodb_io_capacity", "1000", InstanceInfo{Engine: "mysql", ConfFile: "/etc/mysql/my.cnf"}},
	{"redis", "maxmemory", "1mb", InstanceInfo{Engine: "redis", ConfFile: "/etc/redis/redis.conf"}},
	{"mongodb", "storage.wiredTiger.engineConfig.cacheSizeGB", "0.25", InstanceInfo{Engine: "mongodb", ConfFile: "/etc/mongod.conf"}},
}

// hostile puts the host strings everywhere a host string reaches a
// rendered file or command, beside ordinary settings that must come out as
// before. A setting that would repeat an earlier one's identity is left
// out, so that each identity means one intended value.
func hostile(h hostStrings) (Context, *Fix) {
	ctx := Context{TunedProfile: "virtual-guest", TunedInclude: h.name, TunedReapplySysctl: true, Systemd: true,
		Fstab: host.Reading{Source: "/etc/fstab", Value: "/dev/vda1 / ext4 defaults 0 1\n/dev/vdb1\t" + octal(h.name) +
			"\text4\tdefaults\t0\t2\n/dev/vdc1 /srv/raw ext4 " + h.value + " 0 2\n"},
		Instances: map[string]InstanceInfo{}}
	f := &Fix{
		Sysctl:    uniq([]KV{{"vm.swappiness", "1"}, {h.key, h.value}, {"kernel.sem", h.value}}, kvID),
		Udev:      uniq([]UdevAttr{{"vda", "queue/read_ahead_kb", "128"}, {h.name, "queue/scheduler", h.value}, {"vdb", h.key, "none"}}, func(u UdevAttr) string { return u.Device + "\x00" + u.Attr }),
		Limits:    uniq([]LimitLine{{"postgres", "soft", "nofile", "65536"}, {h.name, "hard", "nproc", h.value}, {"mysql", h.key, "nofile", "1024"}, {"redis", "soft", h.key, "1"}}, limitID),
		Dropins:   uniq([]Dropin{{"postgresql@15-main.service", "Service", "LimitNOFILE", "65536"}, {h.name, "Service", "LimitNPROC", h.value}, {"mysql.service", h.key, "TasksMax", "100"}, {"mysql.service", "Service", h.key, h.value}, {"mariadb.service", "Service", "Environment", h.value}}, dropinID),
		Sysfs:     uniq([]KV{{"/sys/kernel/mm/transparent_hugepage/defrag", "never"}, {h.key, "1"}, {"/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none", h.value}, {thpEnabled, h.value}}, kvID),
		Cmdline:   uniq([]string{"transparent_hugepage=never", h.value}, func(s string) string { return s }),
		TunedDisk: uniq([]KV{{"readahead", "128"}, {h.key, h.value}}, kvID),
		Mount:     uniq([]MountChange{{MountPoint: h.name, Source: "/dev/vdb1", Add: []string{"noatime"}}, {MountPoint: "/srv/raw", Source: "/dev/vdc1", Add: []string{"noatime"}}}, func(m MountChange) string { return m.MountPoint }),
		Runtime:   []string{"true", h.value},
		Manual:    "Run:\n" + h.value,
	}
	for _, e := range engines {
		inst := e.engine + ":" + h.name
		ctx.Instances[inst] = e.info
		f.Config = append(f.Config, uniq([]ConfigChange{{Instance: inst, Engine: e.engine, Key: e.key, Value: e.value},
			{Instance: inst, Engine: e.engine, Key: h.key, Value: h.value}, {Instance: inst, Engine: e.engine, Key: e.key + "x", Value: h.value}},
			func(c ConfigChange) string { return strings.ToLower(c.Key) })...)
	}
	return ctx, f
}

const thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

func kvID(kv KV) string          { return kv.Key }
func limitID(l LimitLine) string { return l.Domain + "\x00" + l.Type + "\x00" + l.Item }
func dropinID(d Dropin) string   { return d.Unit + "\x00" + d.Section + "\x00" + d.Key }
func octal(s string) string {
	return strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`).Replace(s)
}
func uniq[T any](s []T, id func(T) string) []T {
	seen := map[string]bool{}
	var out []T
	for _, v := range s {
		if !seen[id(v)] {
			seen[id(v)] = true
			out = append(out, v)
		}
	}
	return out
}

// checkHostile renders every file and command of a fix full of host
// strings and reads each back with a parser for its format: each file
// holds exactly the intended settings, or fewer with each missing one
// reported as refused, and nothing else.
func checkHostile(t *testing.T, h hostStrings) {
	t.Helper()
	ctx, f := hostile(h)
	items := []Item{{ID: "fuzz.finding", Subject: h.name, Fix: f}}
	files := Render(ctx, items)
	refused := Refused(ctx, items)
	byPath := map[string]File{}
	for _, file := range files {
		checkBytes(t, file)
		byPath[file.Path] = file
	}
	seen := map[string]bool{}
	check := func(p string, intended int, parse func(string) (int, error)) {
		seen[p] = true
		n, err := 0, error(nil)
		if file, ok := byPath[p]; ok {
			n, err = parse(file.Content)
		}
		if err != nil {
			t.Errorf("%s does not read back: %v\n%s", p, err, clip(byPath[p].Content))
			return
		}
		if left := countIn(refused, p); n+left != intended {
			t.Errorf("%s: %d settings read back and %d refused, want %d in all\n%s", p, n, left, intended, clip(byPath[p].Content))
		}
	}
	check("/etc/sysctl.d/60-dbhost.conf", len(f.Sysctl), readsBack(parseSysctlD, f.Sysctl))
	check("/etc/security/limits.d/60-dbhost.conf", len(f.Limits), readsBack(parseLimits, f.Limits))
	check("/etc/udev/rules.d/60-dbhost.rules", len(f.Udev), readsBack(parseUdev, f.Udev))
	check("/etc/tmpfiles.d/60-dbhost.conf", len(f.Sysfs), readsBack(parseTmpfiles, f.Sysfs))
	check("/etc/default/grub.d/60-dbhost.cfg", len(f.Cmdline), readsBack(parseGrub, f.Cmdline))
	checkTuned(t, ctx, f, byPath, refused)
	seen["/etc/tuned/dbhost/tuned.conf"] = true
	checkDropins(t, f, files, refused, seen)
	checkSnippets(t, ctx, f, files, refused, seen)
	checkFstab(t, ctx, f, byPath)
	seen["fstab-changes.txt"] = true
	for _, file := range files {
		if !seen[file.Path] {
			t.Errorf("unexpected file %q", file.Path)
		}
	}
	checkCommands(t, ctx, f)
	checkReadme(t, ctx, items, files)
}

// checkBytes: a rendered file is UTF-8 with no line end but '\n' and no
// control character (tabs only where fstab lines are quoted).
func checkBytes(t *testing.T, f File) {
	t.Helper()
	if !utf8.ValidString(f.Content) {
		t.Errorf("%s: invalid UTF-8", f.Path)
	}
	for _, r := range f.Content {
		if r < 0x20 && r != '\n' && !(r == '\t' && f.Path == "fstab-changes.txt") || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0x2028 || r == 0x2029 {
			t.Errorf("%s: holds %U:\n%s", f.Path, r, clip(f.Content))
			return
		}
	}
	if f.Path != "fstab-changes.txt" && (!path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path) {
		t.Errorf("path %q is not clean", f.Path)
	}
}

// readsBack parses a file and counts its settings, all of which must be
// intended.
func readsBack[T comparable](parse func(string) ([]T, error), intended []T) func(string) (int, error) {
	return func(s string) (int, error) {
		got, err := parse(s)
		return len(got), within(got, intended, err)
	}
}

// within: every setting read back is one intended (an error passes on).
func within[T comparable](got, intended []T, err error) error {
	if err != nil {
		return err
	}
	for _, g := range got {
		if !slices.Contains(intended, g) {
			return fmt.Errorf("unintended setting %q", fmt.Sprint(g))
		}
	}
	return nil
}

// clip keeps a failure's text readable.
func clip(s string) string {
	if len(s) > 1500 {
		return s[:1500] + "..."
	}
	return s
}

func countIn(rs []Refusal, in string) int {
	n := 0
	for _, r := range rs {
		if r.In == in {
			n++
		}
	}
	return n
}

// checkTuned: the profile includes the intended profile, and its sections
// hold only intended settings; a profile it cannot include safely leaves
// the whole file out, refused.
func checkTuned(t *testing.T, ctx Context, f *Fix, byPath map[string]File, refused []Refusal) {
	t.Helper()
	const p = "/etc/tuned/dbhost/tuned.conf"
	var intended []iniKV
	for _, kv := range f.Sysctl {
		intended = append(intended, iniKV{"sysctl", kv.Key, kv.Value})
	}
	for _, kv := range f.TunedDisk {
		intended = append(intended, iniKV{"disk", kv.Key, kv.Value})
	}
	for _, kv := range f.Sysfs {
		if kv.Key == thpEnabled {
			intended = append(intended, iniKV{"vm", "transparent_hugepages", kv.Value})
		}
	}
	include := ctx.TunedInclude
	if include == "" {
		include = ctx.TunedProfile
	}
	main := []iniKV{{"main", "summary", include + " with dbhost's database fixes"}, {"main", "include", include}}
	file, ok := byPath[p]
	if !ok {
		if countIn(refused, p) == 0 {
			t.Errorf("no TuneD profile, and nothing refused")
		}
		return
	}
	got, err := parseTuned(file.Content)
	if err := within(got, append(intended, main...), err); err != nil {
		t.Errorf("%s does not read back: %v\n%s", p, err, clip(file.Content))
		return
	}
	n := 0
	for _, kv := range got {
		if kv.section != "main" {
			n++
		}
	}
	if n+countIn(refused, p) != len(intended) {
		t.Errorf("%s: %d settings read back and %d refused, want %d\n%s", p, n, countIn(refused, p), len(intended), clip(file.Content))
	}
}

// checkDropins reads each drop-in with the project's unit file parser:
// it sits in the directory of an intended unit and holds only intended
// settings, specifiers resolved.
func checkDropins(t *testing.T, f *Fix, files []File, refused []Refusal, seen map[string]bool) {
	t.Helper()
	n := 0
	for _, file := range files {
		dir, ok := strings.CutPrefix(file.Path, "/etc/systemd/system/")
		if !ok {
			continue
		}
		seen[file.Path] = true
		unit, ok := strings.CutSuffix(dir, ".d/60-dbhost.conf")
		if !ok || strings.Contains(unit, "/") {
			t.Errorf("drop-in outside a unit's directory: %q", file.Path)
			continue
		}
		var got []Dropin
		for _, a := range unitfile.Parse([]byte(file.Content)) {
			got = append(got, Dropin{unit, a.Section, a.Key, unspecify(a.Value)})
		}
		if err := within(got, f.Dropins, nil); err != nil {
			t.Errorf("%s: %v\n%s", file.Path, err, clip(file.Content))
		}
		n += len(got)
	}
	left := 0
	for _, r := range refused {
		if strings.HasPrefix(r.In, "/etc/systemd/system/") {
			left++
		}
	}
	if n+left != len(f.Dropins) {
		t.Errorf("drop-ins: %d settings read back and %d refused, want %d", n, left, len(f.Dropins))
	}
}

// checkSnippets reads each database snippet with the engine's own parser.
func checkSnippets(t *testing.T, ctx Context, f *Fix, files []File, refused []Refusal, seen map[string]bool) {
	t.Helper()
	for _, e := range engines {
		var intended []KV
		inst := ""
		for _, c := range f.Config {
			if c.Engine == e.engine {
				intended, inst = append(intended, KV{strings.ToLower(c.Key), c.Value}), c.Instance
			}
		}
		p, _ := engine.ProfileOf(engine.Engine(e.engine)).ConfigSnippet(engine.Snippet{Instance: inst, Dir: e.info.ConfDir, File: e.info.ConfFile, Name: ConfigName})
		if want := path.Dir(e.info.ConfFile); e.info.ConfDir == "" && path.Dir(p) != want || e.info.ConfDir != "" && path.Dir(p) != e.info.ConfDir {
			t.Errorf("%s snippet at %q", e.engine, clip(p))
		}
		seen[p] = true
		var text string
		for _, file := range files {
			if file.Path == p {
				text = file.Content
			}
		}
		got, err := readSnippet(e.engine, text)
		if err = within(got, intended, err); err != nil {
			t.Errorf("%s: %v\n%s", p, err, clip(text))
			continue
		}
		if left := countIn(refused, p); len(got)+left != len(intended) {
			t.Errorf("%s: %d settings read back and %d refused, want %d\n%s", p, len(got), left, len(intended), clip(text))
		}
	}
}

// readSnippet parses a snippet as its server (or the person merging it)
// reads it; errors are the parser's.
func readSnippet(eng, text string) ([]KV, error) {
	var out []KV
	switch eng {
	case "postgres":
		errs, _ := postgres.ParseConf([]byte(text), func(d postgres.Directive) { out = append(out, KV{d.Name, d.Value}) })
		if len(errs) > 0 {
			return nil, fmt.Errorf("%v", errs)
		}
	case "mysql":
		es, errs := mysql.ParseOptions([]byte(text))
		if len(errs) > 0 {
			return nil, fmt.Errorf("%v", errs)
		}
		for _, e := range es {
			if e.Kind != mysql.EntryOption || e.Group != "mysqld" || !e.HasValue {
				return nil, fmt.Errorf("not a [mysqld] option: %+v", e)
			}
			out = append(out, KV{strings.ToLower(e.Name), e.Value})
		}
	case "redis":
		c := redis.ParseConfString(noFS{}, text, "/etc/redis/snippet.conf", "/etc/redis")
		if len(c.Errors) > 0 || len(c.Files) != 1 {
			return nil, fmt.Errorf("%v, files %v", c.Errors, c.Files)
		}
		for _, d := range c.Directives {
			out = append(out, KV{d.Name, d.Value()})
		}
	case "mongodb":
		// "name value" lines are merged into the YAML as "name: value".
		var y []string
		for _, ln := range contentLines(text) {
			if !isComment(ln) {
				k, v, _ := strings.Cut(ln, " ")
				y = append(y, k+": "+v)
			}
		}
		c := mongo.ParseConf([]byte(strings.Join(y, "\n")), "snippet")
		if c.Invalid {
			return nil, fmt.Errorf("%v", c.Errors)
		}
		for _, o := range c.Options {
			out = append(out, KV{strings.ToLower(o.Name), o.Value})
		}
	}
	return out, nil
}

// noFS fails every read: a snippet includes nothing.
type noFS struct{}

func (noFS) ReadFile(p string) ([]byte, error) { return nil, fmt.Errorf("snippet read %s", p) }
func (noFS) ReadDir(p string) ([]string, error) {
	return nil, fmt.Errorf("snippet read directory %s", p)
}

// checkFstab: the only lines that are not comments are fstab lines of the
// host's file with noatime added to their options, one per mount at most.
func checkFstab(t *testing.T, ctx Context, f *Fix, byPath map[string]File) {
	t.Helper()
	file, ok := byPath["fstab-changes.txt"]
	if !ok {
		t.Errorf("no fstab-changes.txt")
		return
	}
	var host [][]string
	for _, ln := range strings.Split(ctx.Fstab.Value, "\n") {
		host = append(host, blankFields(strings.TrimRight(ln, "\r")))
	}
	n := 0
	for _, ln := range contentLines(file.Content) {
		if isComment(ln) {
			continue
		}
		n++
		got := blankFields(ln)
		if !slices.ContainsFunc(host, func(h []string) bool { return fstabChanged(h, got) }) {
			t.Errorf("fstab-changes.txt: %q is no host line with noatime added\n%s", clip(ln), clip(file.Content))
		}
	}
	if n > len(f.Mount) {
		t.Errorf("fstab-changes.txt: %d lines for %d mounts\n%s", n, len(f.Mount), clip(file.Content))
	}
}

func blankFields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
}

func fstabChanged(before, after []string) bool {
	if len(before) != len(after) || len(after) < 4 || !slices.Contains(strings.Split(after[3], ","), "noatime") {
		return false
	}
	return slices.Equal(before[:3], after[:3]) && slices.Equal(before[4:], after[4:])
}

// checkCommands reads each derived command as the shell would: every one
// does an intended thing with intended words, and each intended thing is
// shown or refused.
func checkCommands(t *testing.T, ctx Context, f *Fix) {
	t.Helper()
	var want [][]string
	for _, kv := range f.Sysctl {
		want = append(want, []string{"sysctl", "-w", kv.Key + "=" + kv.Value})
	}
	for _, kv := range f.Sysfs {
		want = append(want, []string{"write", kv.Value, kv.Key})
	}
	for _, u := range f.Udev {
		want = append(want, []string{"write", u.Value, "/sys/block/" + u.Device + "/" + u.Attr})
	}
	for _, m := range f.Mount {
		want = append(want, []string{"mount", "-o", "remount,noatime", m.MountPoint})
	}
	cmds, refused := runtimeCommands(f, ctx)
	n, left := 0, 0
	for _, c := range cmds {
		if c == "true" || c == "systemctl daemon-reload" || c == f.Runtime[1] {
			continue
		}
		args, err := shellArgs(c)
		if err != nil {
			t.Errorf("command %q: %v", c, err)
			continue
		}
		if !slices.ContainsFunc(want, func(w []string) bool { return slices.Equal(w, shellEffect(args)) }) {
			t.Errorf("command %q does %q, nothing intended", c, shellEffect(args))
		}
		n++
	}
	if conftext.HasControl(f.Runtime[1]) && slices.Contains(cmds, f.Runtime[1]) {
		t.Errorf("the check's command %q is shown", f.Runtime[1])
	}
	for _, r := range refused {
		if !strings.HasPrefix(r.What, "the command ") {
			left++
		}
	}
	if n+left != len(want) {
		t.Errorf("%d derived commands and %d refused, want %d: %q", n, left, len(want), cmds)
	}
}

// shellEffect names what a command does: echo and printf '%s\n' writing
// a value to a file are both "write" (echo only where it prints the value
// as it is).
func shellEffect(args []string) []string {
	switch {
	case len(args) == 4 && args[0] == "echo" && args[2] == ">" && args[1] != "" && args[1][0] != '-' && !strings.Contains(args[1], `\`):
		return []string{"write", args[1], args[3]}
	case len(args) == 5 && args[0] == "printf" && args[1] == `%s\n` && args[3] == ">":
		return []string{"write", args[2], args[4]}
	}
	return args
}

// checkReadme: host strings cannot add an item or a line at the margin to
// the README.
func checkReadme(t *testing.T, ctx Context, items []Item, files []File) {
	t.Helper()
	notes, seq := append(Notes(items), StepNotes(ctx, items)...), Lines(Runbook(ctx, items))
	text := readmeText(files, notes, seq)
	checkBytes(t, File{Path: "/README.txt", Content: text})
	items_ := 0
	for _, ln := range contentLines(text) {
		switch {
		case strings.HasPrefix(ln, "  - "):
			items_++
		case ln == "" || strings.HasPrefix(ln, "  "):
		case slices.Contains(readmeHeads, ln):
		default:
			t.Errorf("README line at the margin: %q", ln)
		}
	}
	if items_ != len(notes)+len(seq) {
		t.Errorf("README: %d items for %d notes and %d sequences:\n%s", items_, len(notes), len(seq), clip(text))
	}
}

var readmeHeads = []string{"Files rendered by `dbhost fix`. Nothing on the host was changed.",
	"Each path below mirrors where the file belongs on the host; every", "setting inside names the finding it fixes. Review, then install.",
	"No finding needs a persistent file.", "After installing the files, apply all fixes now: run these top to bottom (one",
	"command per setting, with the value the files keep; restarts last):",
	"Steps no file can do:"}

// TestRenderHostileStrings renders every format with strings a host user
// controls: newlines, CR, NUL, escapes, trailing backslashes, quotes,
// specifiers, command substitutions, invalid UTF-8, very long.
func TestRenderHostileStrings(t *testing.T) {
	for _, h := range nastyCases() {
		t.Run(fmt.Sprintf("%.20q", h.name+"|"+h.key+"|"+h.value), func(t *testing.T) { checkHostile(t, h) })
	}
}

// FuzzRenderFiles: whatever the host's strings, every rendered file and
// command reads back as exactly the intended settings, or fewer with the
// rest refused.
func FuzzRenderFiles(f *testing.F) {
	for _, h := range nastyCases() {
		f.Add(h.name, h.key, h.value)
	}
	f.Fuzz(func(t *testing.T, name, key, value string) { checkHostile(t, hostStrings{name, key, value}) })
}

// TestEncodedForms: what each encoder writes for values that need it, and
// that ordinary values are written as they always were.
func TestEncodedForms(t *testing.T) {
	exploit := "/tmp/x/b\nkernel.core_pattern = |/tmp/x/pwn %p\n#"
	ctx := Context{Systemd: true, Instances: map[string]InstanceInfo{}}
	for _, e := range engines {
		ctx.Instances[e.engine+":1"] = e.info
	}
	f := &Fix{
		Sysctl:  []KV{{"kernel.sem", "32000 1024000000 500 32000"}, {"vm.swappiness", "1"}},
		Sysfs:   []KV{{"/sys/kernel/mm/transparent_hugepage/defrag", "defer+madvise"}, {"/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none", "-1"}},
		Udev:    []UdevAttr{{"vda", "queue/scheduler", "mq-deadline"}},
		Dropins: []Dropin{{"mariadb.service", "Service", "Environment", "A=50%"}},
		Mount:   []MountChange{{MountPoint: "/srv/my db", Add: []string{"noatime"}}},
	}
	for _, e := range engines {
		f.Config = append(f.Config, ConfigChange{Instance: e.engine + ":1", Engine: e.engine, Key: e.key, Value: e.value},
			ConfigChange{Instance: e.engine + ":1", Engine: e.engine, Key: e.key + "_q", Value: `it's "a" #1\`})
	}
	files := Render(ctx, []Item{{ID: "t.x", Subject: exploit, Fix: f}})
	want := map[string][]string{
		"/etc/sysctl.d/60-dbhost.conf":                         {"\n# t.x (/tmp/x/b\\nkernel.core_pattern = |/tmp/x/pwn %p\\n#)\nkernel.sem = 32000 1024000000 500 32000\n"},
		"/etc/tmpfiles.d/60-dbhost.conf":                       {"w /sys/kernel/mm/transparent_hugepage/defrag - - - - defer+madvise\n"},
		"/etc/udev/rules.d/60-dbhost.rules":                    {`KERNEL=="vda", ATTR{queue/scheduler}="mq-deadline"` + "\n"},
		"/etc/systemd/system/mariadb.service.d/60-dbhost.conf": {"Environment=A=50%%\n"},
		"/etc/postgresql/15/main/conf.d/zz-dbhost.conf":        {"shared_buffers = '128MB'\n", `shared_buffers_q = 'it''s "a" #1\\'` + "\n"},
		"/etc/mysql/zz-dbhost.cnf":                             {"innodb_io_capacity = 1000\n", `innodb_io_capacity_q = "it's \"a\" #1\\"` + "\n"},
		"/etc/redis/zz-dbhost-redis-1.conf":                    {"maxmemory 1mb\n", `maxmemory_q "it's" "\"a\"" "#1\\"` + "\n"},
		"/etc/zz-dbhost-mongodb-1.conf":                        {"storage.wiredTiger.engineConfig.cacheSizeGB 0.25\n", `storage.wiredTiger.engineConfig.cacheSizeGB_q "it's \"a\" #1\\"` + "\n"},
	}
	for _, file := range files {
		for _, w := range want[file.Path] {
			if !strings.Contains(file.Content, w) {
				t.Errorf("%s lacks %q:\n%s", file.Path, w, file.Content)
			}
		}
		delete(want, file.Path)
	}
	for p := range want {
		t.Errorf("no %s", p)
	}
	cmds := RuntimeCommands(f, ctx)
	for _, w := range []string{"sysctl -w 'kernel.sem=32000 1024000000 500 32000'", "sysctl -w vm.swappiness=1",
		"echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag",
		`printf '%s\n' -1 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none`,
		"echo mq-deadline > /sys/block/vda/queue/scheduler", "mount -o remount,noatime '/srv/my db'"} {
		if !slices.Contains(cmds, w) {
			t.Errorf("no command %q in %q", w, cmds)
		}
	}
}

// TestRefusedIsReported: a value no format can hold is left out of the
// file and the commands, and the steps say so with the value escaped.
func TestRefusedIsReported(t *testing.T) {
	f := &Fix{Sysctl: []KV{{"vm.swappiness", "1"}, {"kernel.x\nkernel.core_pattern", "|/tmp/p"}},
		Runtime: []string{"redis-cli CONFIG SET dir /tmp\nrm -rf /"}}
	files := Render(Context{}, []Item{{ID: "t.x", Fix: f}})
	if len(files) != 1 || strings.Contains(files[0].Content, "core_pattern") || !strings.Contains(files[0].Content, "vm.swappiness = 1") {
		t.Errorf("files %+v", files)
	}
	if cmds := RuntimeCommands(f, Context{}); !slices.Equal(cmds, []string{"sysctl -w vm.swappiness=1"}) {
		t.Errorf("commands %q", cmds)
	}
	want := []string{
		`Left out of /etc/sysctl.d/60-dbhost.conf and the commands to run now as unsafe to write: sysctl "kernel.x\nkernel.core_pattern" = "|/tmp/p" (not a sysctl name).`,
		`Left out of the commands to run now as unsafe to write: the command "redis-cli CONFIG SET dir /tmp\nrm -rf /" (holds a control character or invalid UTF-8).`,
	}
	if s := Steps(f, Context{}); s != strings.Join(want, " ") {
		t.Errorf("steps %q", s)
	}
	seq := Lines(Runbook(Context{}, []Item{{ID: "t.x", Subject: "a\nb", Fix: f}}))
	if len(seq) != 1 || strings.Contains(seq[0], "\n") || seq[0] != `sysctl -w vm.swappiness=1  # t.x (a\nb)` {
		t.Errorf("runbook %q", seq)
	}
}

// TestReadmeNotes: a note of several lines stays one item, its further
// lines indented.
func TestReadmeNotes(t *testing.T) {
	got := readmeText(nil, []string{"mysql.x (mysql:3306): Run:\nDROP DATABASE test;\x1b[2J"}, nil)
	if want := "  - mysql.x (mysql:3306): Run:\n    DROP DATABASE test;\\x1b[2J\n"; !strings.HasSuffix(got, want) {
		t.Errorf("README ends %q, want %q", got[strings.LastIndex(got, "Steps"):], want)
	}
}
