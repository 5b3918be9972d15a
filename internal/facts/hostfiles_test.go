package facts

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/host/hosttest"
)

// tree is hosttest.Tree, short for the many tables here.
func tree(t *testing.T, files map[string]string) *host.Host { return hosttest.Tree(t, files) }

func TestParseUnitLimit(t *testing.T) {
	for _, c := range []struct {
		in         string
		soft, hard uint64
		ok         bool
	}{
		{"65536", 65536, 65536, true},
		{"1024:524288", 1024, 524288, true},
		{"infinity", host.Unlimited, host.Unlimited, true},
		{"64K", 64 << 10, 64 << 10, true},
		{"8M:infinity", 8 << 20, host.Unlimited, true},
		{"", 0, 0, false},
		{"lots", 0, 0, false},
		{"1:x", 0, 0, false},
	} {
		s, h, ok := ParseUnitLimit(c.in)
		if s != c.soft || h != c.hard || ok != c.ok {
			t.Errorf("ParseUnitLimit(%q) = %d, %d, %v; want %d, %d, %v", c.in, s, h, ok, c.soft, c.hard, c.ok)
		}
	}
	if n, ok := ParseTasksMax("15%", 32768); !ok || n != 4915 {
		t.Errorf("ParseTasksMax(15%%, 32768) = %d, %v", n, ok)
	}
}

// TestLoadUnit follows systemd's search order: the unit file in /etc hides
// the packaged one, drop-ins come from every directory sorted by file name
// (a name in /etc hides the same name in /usr/lib), the template's drop-ins
// apply to its instances, service.d applies to every service, and an empty
// assignment resets.
func TestLoadUnit(t *testing.T) {
	h := tree(t, map[string]string{
		"usr/lib/systemd/system/postgresql@.service":                   "[Service]\nOOMScoreAdjust=-900\nLimitNOFILE=1000\n",
		"usr/lib/systemd/system/postgresql@.service.d/10-pkg.conf":     "[Service]\nLimitNOFILE=2000\nTasksMax=100\n",
		"etc/systemd/system/postgresql@.service.d/10-pkg.conf":         "[Service]\nLimitNOFILE=3000\n",
		"etc/systemd/system/postgresql@15-main.service.d/20-inst.conf": "[Service]\nLimitNOFILE=65536\nTasksMax=\n",
		"usr/lib/systemd/system/service.d/05-all.conf":                 "[Service]\nLimitNPROC=4096\n",
		"etc/systemd/system.conf":                                      "[Manager]\nDefaultLimitNOFILE=4096:8192\nDefaultTasksMax=80%\n",
	})
	u, ok := loadUnit(h, "postgresql@15-main.service")
	if !ok {
		t.Fatal("unit not found")
	}
	// 10-pkg.conf: the /etc copy hides the /usr/lib one.
	wantFiles := []string{
		"/usr/lib/systemd/system/postgresql@.service",
		"/usr/lib/systemd/system/service.d/05-all.conf",
		"/etc/systemd/system/postgresql@.service.d/10-pkg.conf",
		"/etc/systemd/system/postgresql@15-main.service.d/20-inst.conf",
	}
	if !reflect.DeepEqual(u.Files, wantFiles) {
		t.Fatalf("files:\n got %v\nwant %v", u.Files, wantFiles)
	}
	check := func(key, value, src string) {
		t.Helper()
		s, ok := u.Effective(key)
		if !ok || s.Value != value || s.Source != src {
			t.Errorf("%s = %+v, %v; want %s from %s", key, s, ok, value, src)
		}
	}
	check("LimitNOFILE", "65536", "/etc/systemd/system/postgresql@15-main.service.d/20-inst.conf:2")
	check("LimitNPROC", "4096", "/usr/lib/systemd/system/service.d/05-all.conf:2")
	check("OOMScoreAdjust", "-900", "/usr/lib/systemd/system/postgresql@.service:2")
	// TasksMax= (empty) reset the packaged 100: the manager default applies.
	check("TasksMax", "80%", "/etc/systemd/system.conf:3")
	if _, ok := loadUnit(h, "mongod.service"); ok {
		t.Error("mongod.service found but it does not exist")
	}
}

func TestLoadUnitAliasAndDefaults(t *testing.T) {
	h := tree(t, map[string]string{
		"usr/lib/systemd/system/mariadb.service":              "[Service]\nExecStart=/usr/sbin/mariadbd $MYSQLD_OPTS\nLimitNOFILE=32768\n",
		"usr/lib/systemd/system/mysql.service":                "->mariadb.service",
		"etc/systemd/system/mariadb.service.d/60-dbhost.conf": "[Service]\nLimitNOFILE=64000\n",
	})
	u, ok := loadUnit(h, "mysql.service")
	if !ok {
		t.Fatal("mysql.service not found")
	}
	if u.Alias != "mariadb.service" {
		t.Errorf("alias %q, want mariadb.service", u.Alias)
	}
	if s, _ := u.Effective("LimitNOFILE"); s.Value != "64000" {
		t.Errorf("LimitNOFILE %+v: the real unit's drop-in applies to the alias", s)
	}
	if s, _ := u.Effective("TasksMax"); s.Value != "15%" || s.Source != "systemd built-in default" {
		t.Errorf("TasksMax %+v, want the built-in 15%%", s)
	}
}

func TestInstalledFor(t *testing.T) {
	h := tree(t, map[string]string{
		"usr/lib/systemd/system/postgresql.service":   "[Service]\nType=oneshot\nExecStart=/bin/true\n",
		"usr/lib/systemd/system/redis-server.service": "[Service]\nExecStart=/usr/bin/redis-server /etc/redis/redis.conf --supervised systemd\n",
		"usr/lib/systemd/system/mariadb.service":      "[Service]\nExecStart=/usr/sbin/mariadbd\n",
	})
	pg := &Instance{Instance: &engine.Instance{Engine: engine.Postgres, DataDir: "/tmp/x"}}
	if u := findInstanceUnit(h, pg); u != nil {
		t.Errorf("Debian's umbrella postgresql.service matched a private cluster: %+v", u)
	}
	redis := &Instance{Instance: &engine.Instance{Engine: engine.Redis, ConfigFiles: []string{"/etc/redis/redis.conf"}}}
	if u := findInstanceUnit(h, redis); u == nil || u.Name != "redis-server.service" || u.How != "installed" {
		t.Errorf("packaged Redis: %+v", u)
	}
	private := &Instance{Instance: &engine.Instance{Engine: engine.Redis, ConfigFiles: []string{"/tmp/dbhost-redis-1/redis.conf"}}}
	if u := findInstanceUnit(h, private); u != nil {
		t.Errorf("private Redis matched %s", u.Name)
	}
	my := &Instance{Instance: &engine.Instance{Engine: engine.MySQL, Cmdline: []string{"/usr/sbin/mariadbd", "--no-defaults", "--datadir=/tmp/y"}}}
	if u := findInstanceUnit(h, my); u != nil {
		t.Errorf("--no-defaults MariaDB matched %s", u.Name)
	}
	my.Cmdline = []string{"/usr/sbin/mariadbd"}
	if u := findInstanceUnit(h, my); u == nil || u.Name != "mariadb.service" {
		t.Errorf("packaged MariaDB: %+v", u)
	}
	cg := &Instance{Instance: &engine.Instance{Engine: engine.MySQL}, Cgroup: Cgroup{SystemdPath: "/system.slice/mariadb.service"}}
	if u := findInstanceUnit(h, cg); u == nil || u.How != "cgroup" {
		t.Errorf("unit from cgroup: %+v", u)
	}
}

func TestUnitFromCgroup(t *testing.T) {
	for in, want := range map[string]string{
		"/system.slice/postgresql@15-main.service":    "postgresql@15-main.service",
		"/system.slice/mariadb.service/payload":       "mariadb.service",
		"/user.slice/user-1000.slice/session-3.scope": "",
		"/": "",
		"/kubepods/burstable/pod1/0123456789abcdef0123456": "",
	} {
		if got := unitFromCgroup(in); got != want {
			t.Errorf("unitFromCgroup(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSysctlOrder checks systemd-sysctl's order: files sorted by name across
// directories, a name in an earlier directory masking later ones,
// /etc/sysctl.conf last; slash keys normalised; "-" and globs noted; an
// explicit key beating a later glob.
func TestSysctlOrder(t *testing.T) {
	h := tree(t, map[string]string{
		"usr/lib/sysctl.d/10-a.conf":   "vm.swappiness = 60\n",
		"etc/sysctl.d/10-a.conf":       "vm.swappiness = 10\n",
		"lib/sysctl.d/05-early.conf":   "net/core/somaxconn = 1024\n-net.ipv4.tcp_fin_timeout = 30\n",
		"run/sysctl.d/50-glob.conf":    "net.ipv4.conf.*.rp_filter = 2\n-net.ipv4.conf.all.rp_filter\n",
		"usr/lib/sysctl.d/90-z.conf":   "net.core.somaxconn=4096\nnet.ipv4.conf.eth0.rp_filter = 1\n",
		"usr/lib/sysctl.d/README":      "vm.swappiness = 99\n",
		"etc/sysctl.conf":              "# comment\n; comment\nnet.ipv4.tcp_rmem = 4096\t87380   6291456\n",
		"etc/sysctl.d/99-sysctl.conf":  "->../sysctl.conf",
		"etc/sysctl.d/60-empty.conf":   "",
		"usr/lib/sysctl.d/70-bad.conf": "this is not an assignment\n",
	})
	f := &Facts{Sysctl: map[string]host.Reading{}}
	gatherPersist(context.Background(), h, f)
	p := f.Persist
	wantFiles := []string{
		"/lib/sysctl.d/05-early.conf", "/etc/sysctl.d/10-a.conf", "/run/sysctl.d/50-glob.conf",
		"/etc/sysctl.d/60-empty.conf", "/usr/lib/sysctl.d/70-bad.conf", "/usr/lib/sysctl.d/90-z.conf",
		"/etc/sysctl.d/99-sysctl.conf", "/etc/sysctl.conf",
	}
	if !reflect.DeepEqual(p.SysctlFiles, wantFiles) {
		t.Fatalf("files:\n got %v\nwant %v", p.SysctlFiles, wantFiles)
	}
	get := func(name string) string {
		v, ok := p.PersistedSysctl(name)
		if !ok {
			return "<none>"
		}
		return v.Value + " @" + v.File
	}
	for name, want := range map[string]string{
		"vm.swappiness":                   "10 @/etc/sysctl.d/10-a.conf",
		"net.core.somaxconn":              "4096 @/usr/lib/sysctl.d/90-z.conf",
		"net.ipv4.tcp_fin_timeout":        "30 @/lib/sysctl.d/05-early.conf",
		"net.ipv4.tcp_rmem":               "4096 87380 6291456 @/etc/sysctl.conf",
		"net.ipv4.conf.lo.rp_filter":      "2 @/run/sysctl.d/50-glob.conf",
		"net.ipv4.conf.eth0.rp_filter":    "1 @/usr/lib/sysctl.d/90-z.conf",
		"net.ipv4.conf.all.rp_filter":     "<none>",
		"kernel.this_is_not_set_anywhere": "<none>",
	} {
		if got := get(name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	var ign bool
	for _, e := range p.Sysctl {
		if e.Key == "net.ipv4.tcp_fin_timeout" {
			ign = e.IgnoreErrors
		}
	}
	if !ign {
		t.Error("the - prefix was not noted")
	}
}

func TestNormalizeSysctlKey(t *testing.T) {
	for in, want := range map[string]string{
		"kernel.domainname":                   "kernel.domainname",
		"kernel/domainname":                   "kernel.domainname",
		"net/ipv4/conf/enp3s0.200/forwarding": "net.ipv4.conf.enp3s0/200.forwarding",
		"net.ipv4.conf.enp3s0/200.forwarding": "net.ipv4.conf.enp3s0/200.forwarding",
	} {
		if got := NormalizeSysctlKey(in); got != want {
			t.Errorf("NormalizeSysctlKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLimitsConf checks pam_limits' order and precedence: limits.conf, then
// limits.d in name order; a user entry beats a group entry beats *.
func TestLimitsConf(t *testing.T) {
	h := tree(t, map[string]string{
		"etc/security/limits.conf":            "# domain type item value\n*  soft  nofile  4096\n@dba  hard  nofile 100000 # trailing\n",
		"etc/security/limits.d/90-db.conf":    "postgres - nofile 65536\npostgres soft nproc unlimited\n",
		"etc/security/limits.d/10-first.conf": "postgres soft nofile 1024\n",
		"etc/security/limits.d/README":        "postgres soft nofile 1\n",
	})
	f := &Facts{}
	gatherPersist(context.Background(), h, f)
	if n := len(f.Persist.Limits); n != 5 {
		t.Fatalf("%d entries, want 5: %+v", n, f.Persist.Limits)
	}
	soft, hard := f.Persist.LimitFor("postgres", nil, "nofile")
	if soft == nil || soft.Value != "65536" || soft.File != "/etc/security/limits.d/90-db.conf" {
		t.Errorf("postgres soft nofile from %+v", soft)
	}
	if hard == nil || hard.Value != "65536" {
		t.Errorf("postgres hard nofile from %+v", hard)
	}
	soft, hard = f.Persist.LimitFor("mysql", []string{"dba"}, "nofile")
	if soft == nil || soft.Value != "4096" || hard == nil || hard.Value != "100000" {
		t.Errorf("mysql (group dba): soft %+v hard %+v", soft, hard)
	}
	if s, _ := f.Persist.LimitFor("root", nil, "nproc"); s != nil {
		t.Errorf("root nproc from %+v", s)
	}
}

func TestParseUdevRules(t *testing.T) {
	rules := `# comment
ACTION=="add|change", KERNEL=="sd[a-z]", ATTR{queue/rotational}=="0", ATTR{queue/scheduler}="none"
ACTION=="add|change", KERNEL=="nvme[0-9]n[0-9]", \
  ATTR{queue/scheduler}:="none", ATTR{bdi/read_ahead_kb}="16"
ATTR{queue/scheduler}=="bfq", RUN+="/bin/true"
SUBSYSTEM=="block", ATTRS{queue/read_ahead_kb}="64", ATTR{queue/read_ahead_kb}="32"
ATTR{queue/nr_requests}="256"
`
	got := ParseUdevRules("/etc/udev/rules.d/60-x.rules", []byte(rules))
	type short struct {
		Line               int
		Attr, Value, Match string
		Conditions         []string
	}
	var s []short
	for _, r := range got {
		s = append(s, short{r.Line, r.Attr, r.Value, r.Match, r.Conditions})
	}
	want := []short{
		{2, "queue/scheduler", "none", "sd[a-z]", []string{`ATTR{queue/rotational}=="0"`}},
		{3, "queue/scheduler", "none", "nvme[0-9]n[0-9]", nil},
		{3, "bdi/read_ahead_kb", "16", "nvme[0-9]n[0-9]", nil},
		{6, "queue/read_ahead_kb", "32", "", nil},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("ParseUdevRules:\n got %+v\nwant %+v", s, want)
	}
}

func TestUdevMasking(t *testing.T) {
	h := tree(t, map[string]string{
		"usr/lib/udev/rules.d/60-sched.rules": `KERNEL=="vd*", ATTR{queue/scheduler}="bfq"` + "\n",
		"etc/udev/rules.d/60-sched.rules":     `KERNEL=="vd*", ATTR{queue/scheduler}="none"` + "\n",
		"usr/lib/udev/rules.d/70-ra.rules":    `KERNEL=="vd*", ATTR{bdi/read_ahead_kb}="128"` + "\n",
	})
	f := &Facts{}
	gatherPersist(context.Background(), h, f)
	if len(f.Persist.Udev) != 2 || f.Persist.Udev[0].Value != "none" || f.Persist.Udev[0].File != "/etc/udev/rules.d/60-sched.rules" {
		t.Fatalf("udev rules %+v", f.Persist.Udev)
	}
}

// TestTunedChain follows include= depth first, lets the child override the
// parent, honours replace=1, both THP spellings, several active profiles,
// the /etc copy of a profile hiding the shipped one, and include loops.
func TestTunedChain(t *testing.T) {
	h := tree(t, map[string]string{
		"etc/tuned/active_profile":                        "db-guest extra\n",
		"etc/tuned/profile_mode":                          "manual\n",
		"etc/tuned/tuned-main.conf":                       "# comment\nreapply_sysctl = 0\n",
		"usr/lib/tuned/throughput-performance/tuned.conf": "[main]\nsummary=tp\n[vm]\ntransparent_hugepages=always\n[disk]\nreadahead=>4096\n[sysctl]\nvm.dirty_ratio = 40\nvm.swappiness=10\nkernel.sched_x = ${f:virt_check:1:2}\n",
		"usr/lib/tuned/virtual-guest/tuned.conf":          "[main]\ninclude=throughput-performance\n[sysctl]\nvm.dirty_ratio = 30\nvm.swappiness = 30\n",
		"etc/tuned/virtual-guest/tuned.conf":              "[main]\ninclude=throughput-performance\n[sysctl]\nvm.swappiness = 20\n",
		"etc/tuned/db-guest/tuned.conf":                   "[main]\ninclude=virtual-guest, db-guest\n[vm]\ntransparent_hugepage=never\n[disks]\ntype=disk\nreplace=1\nelevator=none\n",
		"usr/lib/tuned/profiles/extra/tuned.conf":         "[main]\ninclude=missing-one\n[sysctl]\nnet/core/somaxconn=1024\n",
	})
	f := &Facts{}
	gatherTuned(context.Background(), h, f)
	tu := f.Tuned
	if tu.Active != "db-guest extra" || tu.Mode != "manual" || tu.ReapplySysctl {
		t.Fatalf("active %q mode %q reapply %v", tu.Active, tu.Mode, tu.ReapplySysctl)
	}
	if want := []string{"throughput-performance", "virtual-guest", "db-guest", "extra"}; !reflect.DeepEqual(tu.Chain, want) {
		t.Fatalf("chain %v, want %v", tu.Chain, want)
	}
	if want := []string{"missing-one"}; !reflect.DeepEqual(tu.Missing, want) {
		t.Errorf("missing %v, want %v", tu.Missing, want)
	}
	val := func(m map[string]Persisted, k string) string { return m[k].Value + " @" + m[k].File }
	for _, c := range []struct{ got, want string }{
		{val(tu.Sysctl, "vm.swappiness"), "20 @/etc/tuned/virtual-guest/tuned.conf"},
		{val(tu.Sysctl, "vm.dirty_ratio"), "40 @/usr/lib/tuned/throughput-performance/tuned.conf"},
		{val(tu.Sysctl, "net.core.somaxconn"), "1024 @/usr/lib/tuned/profiles/extra/tuned.conf"},
		{val(tu.Sysctl, "kernel.sched_x"), "${f:virt_check:1:2} @/usr/lib/tuned/throughput-performance/tuned.conf"},
		{val(tu.VM, "transparent_hugepages"), "never @/etc/tuned/db-guest/tuned.conf"},
		{val(tu.Disk, "elevator"), "none @/etc/tuned/db-guest/tuned.conf"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	if _, ok := tu.Disk["readahead"]; ok {
		t.Error("replace=1 in the child's disk section kept the parent's readahead")
	}
}

func TestTunedAbsent(t *testing.T) {
	f := &Facts{}
	gatherTuned(context.Background(), tree(t, map[string]string{"etc/hostname": "x\n"}), f)
	if f.Tuned.Active != "" || !f.Tuned.ReapplySysctl || f.Tuned.Err != "" {
		t.Fatalf("no TuneD: %+v", f.Tuned)
	}
}

func TestParseAppArmorProfiles(t *testing.T) {
	got := ParseAppArmorProfiles([]byte("/usr/sbin/mysqld (enforce)\nlsb_release (complain)\n/usr/bin/man (enforce)\nbroken line\nname with spaces (kill)\n"))
	want := map[string]string{"/usr/sbin/mysqld": "enforce", "lsb_release": "complain", "/usr/bin/man": "enforce", "name with spaces": "kill"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

func TestCgroupLimits(t *testing.T) {
	c := Cgroup{MemoryMax: host.Reading{Value: "9223372036854771712"}, CPUMax: host.Reading{Value: "max 100000"}}
	if _, ok := c.MemoryLimit(); ok {
		t.Error("v1 'unlimited' value read as a limit")
	}
	if _, ok := c.CPULimit(); ok {
		t.Error("cpu max read as a limit")
	}
	c = Cgroup{MemoryMax: host.Reading{Value: "209715200"}, CPUMax: host.Reading{Value: "50000 100000"}}
	if n, ok := c.MemoryLimit(); !ok || n != 200<<20 {
		t.Errorf("memory limit %d %v", n, ok)
	}
	if n, ok := c.CPULimit(); !ok || n != 0.5 {
		t.Errorf("cpu limit %v %v", n, ok)
	}
}

// FuzzParseUnitLimit feeds the unit value parsers (the unit file parser is
// fuzzed in internal/unitfile).
func FuzzParseUnitLimit(f *testing.F) {
	for _, v := range []string{"1024:524288", "infinity", "64K", "8M:infinity", "15%", "", "1:x", "16E"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ParseUnitLimit(s)
		ParseTasksMax(s, 32768)
	})
}

func FuzzParseSysctlConf(f *testing.F) {
	f.Add("vm.swappiness = 1\n-net.core.somaxconn=4096\nnet/ipv4/conf/eth0.1/rp_filter = 2\n")
	f.Add("; c\n# c\n-\n=\n-key\nkey.*.glob = 1\n")
	f.Add("a=b=c\n  spaced . key =  v  w \n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range ParseSysctlConf("/x.conf", []byte(s)) {
			if e.Key == "" || e.Line < 1 {
				t.Fatalf("bad entry %+v", e)
			}
			if e.Value != strings.Join(strings.Fields(e.Value), " ") {
				t.Fatalf("value not normalised: %q", e.Value)
			}
			if NormalizeSysctlKey(e.Key) != e.Key {
				t.Fatalf("key %q not normalised", e.Key)
			}
		}
	})
}
