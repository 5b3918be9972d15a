package fix

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// TestRuntimeCommandsOrder: whatever order a check gives its commands in,
// reloads come before changes of the running system, restarts are never
// listed, and systemctl only where PID 1 is systemd.
func TestRuntimeCommandsOrder(t *testing.T) {
	f := &Fix{
		Sysctl:  []KV{{Key: "fs.file-max", Value: "262144"}},
		Dropins: []Dropin{{Unit: "mariadb.service", Section: "Service", Key: "LimitNOFILE", Value: "5120"}},
		Runtime: []string{"prlimit --pid 42 --nofile=5120:5120", "systemctl daemon-reload && systemctl restart mariadb.service", "sysctl --system"},
	}
	cases := []struct {
		systemd bool
		want    []string
	}{
		{true, []string{"systemctl daemon-reload", "sysctl --system", "sysctl -w fs.file-max=262144", "prlimit --pid 42 --nofile=5120:5120"}},
		{false, []string{"sysctl --system", "sysctl -w fs.file-max=262144", "prlimit --pid 42 --nofile=5120:5120"}},
	}
	for _, c := range cases {
		got := RuntimeCommands(f, Context{Systemd: c.systemd})
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("systemd %v: %q, want %q", c.systemd, got, c.want)
		}
	}
}

// TestStepsRestart: a restart is said with its warning and reason, by the
// unit where systemd runs, and never by systemctl elsewhere.
func TestStepsRestart(t *testing.T) {
	f := &Fix{Dropins: []Dropin{{Unit: "postgresql@15-main.service", Section: "Service", Key: "LimitNOFILE", Value: "4096"}},
		Restart: &Restart{Unit: "postgresql@15-main.service", Why: "PostgreSQL probes the limit once at start"}}
	on := Steps(f, Context{Systemd: true})
	for _, s := range []string{"RESTART NEEDED", "PostgreSQL probes the limit once at start", "interrupts every connection", "systemctl restart postgresql@15-main.service"} {
		if !strings.Contains(on, s) {
			t.Errorf("systemd: %q lacks %q", on, s)
		}
	}
	off := Steps(f, Context{})
	if strings.Contains(off, "systemctl restart") || !strings.Contains(off, "PID 1 is not systemd") || !strings.Contains(off, "RESTART NEEDED") {
		t.Errorf("no systemd: %q", off)
	}
	if got := RuntimeCommands(f, Context{Systemd: true}); !reflect.DeepEqual(got, []string{"systemctl daemon-reload"}) {
		t.Errorf("a restart was listed among the commands: %q", got)
	}
}

const fstabForms = "# /etc/fstab: static file system information.\n" +
	"UUID=0a1b-2c3d /               ext4    errors=remount-ro 0       1\n" +
	"LABEL=data\t/srv/data\txfs\tdefaults\t0\t2\n" +
	"/dev/vdb1 /srv/pg ext4 rw,relatime,nobarrier 0 2\n" +
	"  # /dev/vdc1 /srv/old ext4 defaults 0 2\n" +
	"/dev/vdd1 /srv/old ext4 defaults 0 2\n" +
	"/dev/vde1 /srv/old ext4 noatime 0 2\n" +
	"/dev/vdf1 /srv/my\\040db ext4 noatime,errors=remount-ro 0 2\n" +
	"tmpfs /tmp tmpfs defaults\n"

// TestRenderMountsExactLines: the before line is quoted exactly as the
// file has it and the after line keeps its fields and blanks, changing
// only the options column, for every form of fstab line.
func TestRenderMountsExactLines(t *testing.T) {
	ctx := Context{Fstab: host.Reading{Source: "/etc/fstab", Value: fstabForms}}
	cases := []struct {
		name       string
		m          MountChange
		want, lack []string
	}{
		{"UUID", MountChange{MountPoint: "/", Source: "/dev/vda1", Add: []string{"noatime"}},
			[]string{"# /etc/fstab:2 before:\n# UUID=0a1b-2c3d /               ext4    errors=remount-ro 0       1\nUUID=0a1b-2c3d /               ext4    errors=remount-ro,noatime 0       1\n"}, nil},
		{"LABEL with tabs, defaults kept", MountChange{MountPoint: "/srv/data", Source: "/dev/vdc1", Add: []string{"noatime"}},
			[]string{"# /etc/fstab:3 before:\n# LABEL=data\t/srv/data\txfs\tdefaults\t0\t2\nLABEL=data\t/srv/data\txfs\tdefaults,noatime\t0\t2\n"}, nil},
		{"device, relatime replaced, nobarrier removed", MountChange{MountPoint: "/srv/pg", Source: "/dev/vdb1", Add: []string{"noatime"}, Remove: []string{"nobarrier"}},
			[]string{"/dev/vdb1 /srv/pg ext4 rw,noatime 0 2\n"}, []string{"\n/dev/vdb1 /srv/pg ext4 rw,relatime,nobarrier 0 2"}},
		{"the line of the mounted device, not a comment", MountChange{MountPoint: "/srv/old", Source: "/dev/vdd1", Add: []string{"noatime"}},
			[]string{"# /etc/fstab:6 before:\n# /dev/vdd1 /srv/old ext4 defaults 0 2\n/dev/vdd1 /srv/old ext4 defaults,noatime 0 2\n"}, []string{"vdc1 /srv/old", "vde1"}},
		{"octal escape, already set", MountChange{MountPoint: "/srv/my db", Source: "/dev/vdf1", Add: []string{"noatime"}},
			[]string{"/etc/fstab:8 already has these options"}, nil},
		{"another device in fstab", MountChange{MountPoint: "/srv/pg", Source: "/dev/sdz1", Add: []string{"noatime"}},
			[]string{"mounts /dev/vdb1 at /srv/pg, but /dev/sdz1 is mounted there now"}, []string{"ext4 rw,noatime"}},
		{"no line", MountChange{MountPoint: "/var/lib/mysql", Source: "/dev/vdg1", Add: []string{"noatime"}},
			[]string{"No line of /etc/fstab mounts /var/lib/mysql"}, nil},
		{"last option removed", MountChange{MountPoint: "/srv/old", Source: "/dev/vde1", Remove: []string{"noatime"}},
			[]string{"/dev/vde1 /srv/old ext4 defaults 0 2\n"}, nil},
	}
	for _, c := range cases {
		f := (&renderer{ctx: ctx}).mounts([]Item{{ID: "storage.noatime", Subject: "mount:" + c.m.MountPoint, Fix: &Fix{Mount: []MountChange{c.m}}}})
		for _, w := range c.want {
			if !strings.Contains(f.Content, w) {
				t.Errorf("%s: lacks %q:\n%s", c.name, w, f.Content)
			}
		}
		for _, l := range c.lack {
			if strings.Contains(f.Content, l) {
				t.Errorf("%s: has %q:\n%s", c.name, l, f.Content)
			}
		}
		if strings.Contains(f.Content, "add=") {
			t.Errorf("%s: pseudo-syntax:\n%s", c.name, f.Content)
		}
	}
	f := (&renderer{ctx: Context{Fstab: host.Missing("/etc/fstab", "not recorded in this snapshot")}}).mounts([]Item{{ID: "storage.noatime", Fix: &Fix{Mount: []MountChange{{MountPoint: "/srv/pg", Add: []string{"noatime"}}}}}})
	if !strings.Contains(f.Content, "/etc/fstab could not be read (not recorded in this snapshot)") {
		t.Errorf("unreadable fstab:\n%s", f.Content)
	}
}

// TestRenderConfigNotRead: a server that reads no configuration file gets
// no snippet (its finding says where the setting goes instead); one with
// a file does.
func TestRenderConfigNotRead(t *testing.T) {
	it := Item{ID: "mysql.x", Subject: "mysql:3306", Fix: &Fix{Config: []ConfigChange{{Instance: "mysql:3306", Engine: "mysql", Key: "symbolic_links", Value: "0"}}}}
	none := Context{Instances: map[string]InstanceInfo{"mysql:3306": {Engine: "mysql", NoConfig: true}}}
	if files := (&renderer{ctx: none}).config([]Item{it}); len(files) != 0 {
		t.Errorf("a snippet for a server that reads no file: %+v", files)
	}
	if s := Steps(it.Fix, none); !strings.Contains(s, "mysql:3306 reads no configuration file, so dbhost writes no snippet") {
		t.Errorf("steps %q", s)
	}
	some := Context{Instances: map[string]InstanceInfo{"mysql:3306": {Engine: "mysql", ConfFile: "/etc/mysql/my.cnf"}}}
	if files := (&renderer{ctx: some}).config([]Item{it}); len(files) != 1 || files[0].Path != "/etc/mysql/zz-dbhost.cnf" {
		t.Errorf("files %+v", files)
	}
}

// TestRenderLimitsLargestNeed: two servers of one user share its limits.d
// line; the larger need wins whichever finding comes first.
func TestRenderLimitsLargestNeed(t *testing.T) {
	small := &Fix{Limits: []LimitLine{{Domain: "postgres", Type: "soft", Item: "nofile", Value: "1024"}}}
	big := &Fix{Limits: []LimitLine{{Domain: "postgres", Type: "soft", Item: "nofile", Value: "4096"}}}
	for _, order := range [][]*Fix{{small, big}, {big, small}} {
		f := (&renderer{}).limits([]Item{{ID: "limits.nofile", Subject: "a", Fix: order[0]}, {ID: "limits.nofile", Subject: "b", Fix: order[1]}})
		if !strings.Contains(f.Content, "nofile   4096\n") || strings.Contains(f.Content, "1024") {
			t.Errorf("%s", f.Content)
		}
	}
}

// TestRunbookOrder: two findings want different pools; the runbook sets
// the pool once, to the value sysctl.d keeps, before other memory values
// and the rest; a value with blanks is one quoted word; reloads come
// first, process limits and database settings after the kernel, restarts
// last and marked, one per unit; nothing follows check IDs.
func TestRunbookOrder(t *testing.T) {
	ctx := Context{Systemd: true, Instances: map[string]InstanceInfo{"redis:6379": {Engine: "redis", ConfFile: "/etc/redis/redis.conf", Unit: "redis-server.service"}}}
	items := []Item{
		{ID: "a.restart", Subject: "postgres:5432", Fix: &Fix{Dropins: []Dropin{{Unit: "postgresql.service", Section: "Service", Key: "LimitNOFILE", Value: "4096"}},
			Restart: &Restart{Unit: "postgresql.service", Why: "PostgreSQL probes the limit at start"}}},
		{ID: "b.pool", Subject: "postgres:5432", Fix: &Fix{Sysctl: []KV{{"vm.nr_hugepages", "92"}}}},
		{ID: "c.pool", Subject: "postgres:5433", Fix: &Fix{Sysctl: []KV{{"vm.nr_hugepages", "73"}, {"kernel.sem", "32000 1024000000 500 32000"}}}},
		{ID: "d.limit", Fix: &Fix{Rlimits: []Rlimit{{PID: 42, Item: "nofile", Soft: 1024, Hard: 4096}}, Runtime: []string{"prlimit --pid 42 --nofile=1024:4096"}}},
		{ID: "e.limit", Fix: &Fix{Rlimits: []Rlimit{{PID: 42, Item: "nofile", Soft: 8192, Hard: 8192}}, Runtime: []string{"prlimit --pid 42 --nofile=8192:8192"}}},
		{ID: "f.redis", Subject: "redis:6379", Fix: &Fix{Config: []ConfigChange{{Instance: "redis:6379", Engine: "redis", Key: "maxmemory", Value: "150mb"}},
			Runtime: []string{"redis-cli -p 6379 CONFIG SET maxmemory 150mb"}}},
		{ID: "g.redis", Subject: "redis:6379", Fix: &Fix{Config: []ConfigChange{{Instance: "redis:6379", Engine: "redis", Key: "maxmemory", Value: "1mb"}},
			Runtime: []string{"redis-cli -p 6379 CONFIG SET maxmemory 1mb"}}},
		{ID: "h.swap", Fix: &Fix{Sysctl: []KV{{"vm.swappiness", "1"}}}},
		{ID: "i.bind", Subject: "redis:6379", Fix: &Fix{Config: []ConfigChange{{Instance: "redis:6379", Engine: "redis", Key: "bind", Value: "127.0.0.1", Restart: true}}}},
	}
	want := []string{
		"systemctl daemon-reload  # a.restart (postgres:5432)",
		"sysctl -w vm.nr_hugepages=92  # b.pool (postgres:5432), c.pool (postgres:5433)",
		"sysctl -w vm.swappiness=1  # h.swap",
		"sysctl -w 'kernel.sem=32000 1024000000 500 32000'  # c.pool (postgres:5433)",
		"prlimit --pid 42 --nofile=8192:8192  # d.limit, e.limit",
		"redis-cli -p 6379 CONFIG SET maxmemory 150mb  # f.redis (redis:6379)",
		"RESTART (interrupts every connection): systemctl restart postgresql.service  # PostgreSQL probes the limit at start; a.restart (postgres:5432)",
		"RESTART (interrupts every connection): systemctl restart redis-server.service  # the server reads bind only when it starts; i.bind (redis:6379)",
	}
	if got := Lines(Runbook(ctx, items)); !reflect.DeepEqual(got, want) {
		t.Errorf("runbook:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Without systemd: no systemctl, the restart said in words.
	got := Lines(Runbook(Context{}, items[:1]))
	if len(got) != 1 || !strings.HasPrefix(got[0], "RESTART (interrupts every connection): restart postgresql.service the way it is started (PID 1 is not systemd") {
		t.Errorf("no systemd: %q", got)
	}
}
