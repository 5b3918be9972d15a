package knob

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Setting
		err  string
	}{
		{in: "vm.swappiness=1", want: Setting{"vm.swappiness", "1"}},
		{in: " vm.dirty_ratio = 5 ", want: Setting{"vm.dirty_ratio", "5"}},
		{in: "net/ipv4/conf/eth0.100/rp_filter=1", want: Setting{"net/ipv4/conf/eth0.100/rp_filter", "1"}},
		{in: "THP.Enabled=never", want: Setting{"thp.enabled", "never"}},
		{in: "hugepages=64", want: Setting{"hugepages.2M", "64"}},
		{in: "hugepages.1g=2", want: Setting{"hugepages.1G", "2"}},
		{in: "hugepages.2048kB=8", want: Setting{"hugepages.2M", "8"}},
		{in: "hugepages.64K=8", want: Setting{"hugepages.64K", "8"}},
		{in: "disk.scheduler=none", want: Setting{"disk.scheduler", "none"}},
		{in: "disk.read_ahead_kb=128", want: Setting{"disk.read_ahead_kb", "128"}},
		{in: "pg.Shared_Buffers=1GB", want: Setting{"pg.shared_buffers", "1GB"}},
		{in: "pg.auto_explain.log_min_duration=10ms", want: Setting{"pg.auto_explain.log_min_duration", "10ms"}},
		{in: `pg.search_path="$user, public"`, want: Setting{"pg.search_path", "$user, public"}},
		{in: "pg.application_name=''", want: Setting{"pg.application_name", ""}},
		{in: "mysql.innodb-io-capacity=400", want: Setting{"mysql.innodb_io_capacity", "400"}},
		{in: "vm.swappiness", err: "not name=value"},
		{in: "=1", err: "empty knob name"},
		{in: "vm.swappiness=", err: "empty value"},
		{in: "thp.khugepaged=1", err: "unknown THP knob"},
		{in: "hugepages.3X=1", err: "huge page size"},
		{in: "disk.../x=1", err: "not a block queue attribute"},
		{in: "vm/../../etc/passwd=1", err: "not a sysctl name"},
		{in: "swappiness=1", err: "not a knob name"},
		{in: "pg.work mem=1", err: "not a PostgreSQL parameter"},
		{in: "mysql.a;b=1", err: "not a MySQL variable"},
		{in: "pg.work_mem=1\n2", err: "line break"},
	} {
		got, err := Parse(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Parse(%q) = %v, %v; want error with %q", c.in, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseArm(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		set  []Setting
		err  string
	}{
		{in: "low: vm.swappiness=1, thp.enabled=never", name: "low",
			set: []Setting{{"vm.swappiness", "1"}, {"thp.enabled", "never"}}},
		{in: "low:vm.swappiness=1 thp.enabled=never", name: "low",
			set: []Setting{{"vm.swappiness", "1"}, {"thp.enabled", "never"}}},
		{in: "x: vm.swappiness = 1 ,, hugepages=4", name: "x",
			set: []Setting{{"vm.swappiness", "1"}, {"hugepages.2M", "4"}}},
		{in: "vm.swappiness=1, pg.work_mem=64MB", name: "vm.swappiness=1 pg.work_mem=64MB",
			set: []Setting{{"vm.swappiness", "1"}, {"pg.work_mem", "64MB"}}},
		{in: `q: pg.search_path='"$user", public' pg.log_line_prefix="%m: "`, name: "q",
			set: []Setting{{"pg.search_path", `"$user", public`}, {"pg.log_line_prefix", "%m: "}}},
		{in: "base:", name: "base"},
		{in: "2m-pages: hugepages.2M=512", name: "2m-pages", set: []Setting{{"hugepages.2M", "512"}}},
		// A colon inside a value is not an arm name.
		{in: "pg.log_line_prefix='a:b'", name: `pg.log_line_prefix=a:b`, set: []Setting{{"pg.log_line_prefix", "a:b"}}},
		{in: "", err: "no name and no settings"},
		{in: "a: hugepages=1 hugepages.2M=2", err: "hugepages.2M set twice"},
		{in: "a: vm.swappiness", err: "not name=value"},
		{in: "a: pg.x='open", err: "unterminated quote"},
		{in: "a: pg.x='v'w", err: "after the closing quote"},
		{in: "a: vm.swappiness=1 junk", err: "not name=value"},
	} {
		name, set, err := ParseArm(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseArm(%q) = %q, %v, %v; want error with %q", c.in, name, set, err, c.err)
		case c.err == "" && (err != nil || name != c.name || !reflect.DeepEqual(set, c.set)):
			t.Errorf("ParseArm(%q) = %q, %v, %v; want %q, %v", c.in, name, set, err, c.name, c.set)
		}
	}
}

// A setting's String form parses back to itself.
func TestSettingRoundTrip(t *testing.T) {
	for _, s := range []Setting{{"vm.swappiness", "1"}, {"pg.search_path", `"$user", public`},
		{"pg.log_line_prefix", "%m [%p] "}, {"pg.application_name", ""}} {
		_, set, err := ParseArm("a: " + s.String())
		if err != nil || len(set) != 1 || set[0] != s {
			t.Errorf("%v → %q → %v, %v", s, s.String(), set, err)
		}
	}
}

func FuzzParseArm(f *testing.F) {
	for _, s := range []string{"low: vm.swappiness=1, thp.enabled=never", `q: pg.search_path='"$user", public'`, "base:", "a: x= 'y'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, set, err := ParseArm(s)
		if err != nil {
			return
		}
		if name == "" {
			t.Fatalf("%q: no name", s)
		}
		for _, st := range set {
			if n, _, err := canonical(st.Name); err != nil || n != st.Name {
				t.Fatalf("%q: setting %v not canonical (%v)", s, st, err)
			}
		}
	})
}
