package experiment

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/knob"
)

const planYAML = `
name: swap test
target:
  pg: "host=/var/run/postgresql dbname=bench"
  allow_restart: true
arms:
  - "base: vm.swappiness=60"
  - low: vm.swappiness=1, thp.enabled=never
  - name: map
    set: {vm.swappiness: 10, hugepages: 128}
  - name: list
    set: ["vm.swappiness=5", "pg.work_mem='64MB'"]
workload:
  kind: pgbench
  clients: [1, 4, 16]
  duration: 45s
  warmup: 5
  scale: 50
  select_only: true
protocol:
  time: 1h30m
  calibrate: 6
  equivalence: 3%
  alpha: 0.01
  metric: p99
  seed: 99
`

func TestParsePlan(t *testing.T) {
	p, err := ParsePlan(strings.NewReader(planYAML))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []Arm{
		{Name: "base", Set: []knob.Setting{{Name: "vm.swappiness", Value: "60"}}},
		{Name: "low", Set: []knob.Setting{{Name: "vm.swappiness", Value: "1"}, {Name: "thp.enabled", Value: "never"}}},
		{Name: "map", Set: []knob.Setting{{Name: "vm.swappiness", Value: "10"}, {Name: "hugepages.2M", Value: "128"}}},
		{Name: "list", Set: []knob.Setting{{Name: "vm.swappiness", Value: "5"}, {Name: "pg.work_mem", Value: "64MB"}}},
	}
	if !reflect.DeepEqual(p.Arms, want) {
		t.Errorf("arms\n got %+v\nwant %+v", p.Arms, want)
	}
	w, pr := p.Workload, p.Protocol
	if p.Name != "swap test" || !p.Target.AllowRestart || p.Target.PG == "" || p.Target.Embedded() {
		t.Errorf("name/target: %+v", p)
	}
	if !reflect.DeepEqual(w.Clients, IntList{1, 4, 16}) || time.Duration(w.Duration) != 45*time.Second ||
		time.Duration(w.Warmup) != 5*time.Second || w.Scale != 50 || !w.SelectOnly || w.Kind != "pgbench" {
		t.Errorf("workload: %+v", w)
	}
	if time.Duration(pr.Time) != 90*time.Minute || pr.Calibrate != 6 || pr.Equivalence != 0.03 || pr.Alpha != 0.01 ||
		pr.Metric != "p99" || pr.Seed != 99 {
		t.Errorf("protocol: %+v", pr)
	}
	// The stored form (JSON) reads back to the same plan, without the
	// connection string, which may hold a password.
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "/var/run/postgresql") {
		t.Errorf("stored plan holds the connection string: %s", b)
	}
	var back Plan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	back.Target.PG = p.Target.PG
	if !reflect.DeepEqual(&back, p) {
		t.Errorf("JSON round trip\n got %+v\nwant %+v", back, *p)
	}
}

func TestParsePlanErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"", "empty"},
		{"nmae: x\n", "field nmae not found"},
		{"arms: [\"a: vm.swappiness=1\"]\nworkload: {clients: [1, x]}\n", `"x" is not a number`},
		{"arms:\n  - name: a\n    sett: {vm.swappiness: 1}\n", `unknown arm field "sett"`},
		{"arms:\n  - a: nosuchknob=1\n", "not a knob name"},
		{"workload: {duration: soon}\n", `duration "soon"`},
		{"protocol: {equivalence: lots}\n", "want a fraction"},
		{"target: {shared_buffers: 12XB}\n", "unknown unit"},
	} {
		_, err := ParsePlan(strings.NewReader(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	two := []Arm{{Name: "a", Set: []knob.Setting{{Name: "vm.swappiness", Value: "60"}}}, {Name: "b", Set: []knob.Setting{{Name: "vm.swappiness", Value: "1"}}}}
	for _, tc := range []struct {
		p    Plan
		want string
	}{
		{Plan{Arms: two[:1]}, "1 arms"},
		{Plan{Arms: []Arm{{Name: "a"}, {Name: "b"}}}, "no arm sets anything"},
		{Plan{Arms: []Arm{two[0], two[0]}}, "two arms named"},
		{Plan{Preset: "nope"}, "unknown preset"},
		{Plan{Preset: "swappiness", Arms: two}, "brings its own arms"},
		{Plan{Arms: two, Target: Target{PG: "x", MySQL: "y"}}, "not both"},
		{Plan{Arms: two, Protocol: Protocol{Trials: 8, Time: Duration(time.Hour)}}, "not both"},
		{Plan{Arms: two, Protocol: Protocol{Calibrate: 2}}, "at least 3"},
		{Plan{Arms: two, Protocol: Protocol{Metric: "p42"}}, "metric"},
		{Plan{Arms: two, Workload: Workload{Kind: "hammer"}}, "workload"},
		{Plan{Arms: two, Workload: Workload{Duration: Duration(time.Millisecond)}}, "at least 1s"},
	} {
		err := tc.p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.p, err, tc.want)
		}
	}
	ok := Plan{Arms: []Arm{{Name: "base"}, two[1]}} // an empty base keeps the host as it is
	if err := ok.Validate(); err != nil {
		t.Errorf("empty base arm: %v", err)
	}
	if err := (&Plan{Preset: "clients", Arms: two}).Validate(); err != nil {
		t.Errorf("clients preset over own arms: %v", err)
	}
}

// Budgets: --trials spreads over arms and client counts in whole ABBA
// blocks; --time subtracts the calibration and divides by a trial's wall
// time (warm-up, measurement, overhead, restart).
func TestBudget(t *testing.T) {
	p := &Plan{Arms: make([]Arm, 2), Workload: Workload{Clients: IntList{8}, Duration: Duration(20 * time.Second), Warmup: Duration(5 * time.Second)}}
	check := func(what string, want int) {
		t.Helper()
		n, err := p.budget(false)
		if err != nil || n != want {
			t.Errorf("%s: %d per arm (%v), want %d", what, n, err, want)
		}
	}
	check("default", DefaultPerArm)
	p.Protocol.Trials = 17
	check("17 trials, 2 arms", 8)
	p.Workload.Clients = IntList{1, 2}
	check("17 trials, 2 arms x 2 client counts", 4)
	p.Protocol.Trials = 15
	if _, err := p.budget(false); err == nil || !strings.Contains(err.Error(), "at least 4 per arm") {
		t.Errorf("15 trials over 4 cells: %v", err)
	}
	p.Workload.Clients = IntList{8}
	p.Protocol.Trials = 0
	p.Protocol.Time = Duration(12 * time.Minute) // 27 s per trial: 26 trials
	check("12 minutes", 12)
	p.Protocol.Calibrate = 6 // 6 x 27 s less
	check("12 minutes after 6 A/A trials", 10)
	if n, err := p.budget(true); err != nil || n != 8 { // 32 s per trial: 16 trials after calibration... 22 - 6 = 16
		t.Errorf("12 minutes with restarts: %d (%v), want 8", n, err)
	}
}

func TestDefaults(t *testing.T) {
	p := &Plan{Preset: "swappiness"}
	p.withDefaults(Facts{CPUs: 2, Engine: "postgres"})
	w := p.Workload
	if w.Kind != "pgbench" || time.Duration(w.Duration) != PresetDuration || time.Duration(w.Warmup) != PresetWarmup ||
		!reflect.DeepEqual(w.Clients, IntList{4}) || time.Duration(p.Protocol.Time) != PresetTime || p.Name != "swappiness" {
		t.Errorf("preset defaults: %+v %+v", w, p.Protocol)
	}
	m := &Plan{Target: Target{MySQL: "root@unix(/x)/"}, Arms: []Arm{{Name: "a"}, {Name: "b"}}}
	m.withDefaults(Facts{CPUs: 16, Engine: "mysql"})
	if m.Workload.Kind != "sysbench" || m.Workload.Script != "oltp_read_only" || m.Workload.Clients[0] != 8 ||
		time.Duration(m.Workload.Duration) != DefaultDuration || m.Protocol.Trials != 0 || m.Protocol.Time != 0 || m.Name != "a vs b" {
		t.Errorf("MySQL defaults: %+v %+v %q", m.Workload, m.Protocol, m.Name)
	}
	if p.Protocol.Equivalence != 0.02 || p.Protocol.Alpha != 0.05 || p.Protocol.Metric != "throughput" {
		t.Errorf("protocol defaults: %+v", p.Protocol)
	}
}

func TestSizesAndFractions(t *testing.T) {
	for in, want := range map[string]uint64{"128MB": 128 << 20, "1GB": 1 << 30, "8kB": 8192, "4096": 4096, "1.5G": 3 << 29, "2 MiB": 2 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	var f Fraction
	for in, want := range map[string]float64{"2%": 0.02, "0.05": 0.05, " 10 % ": 0.1} {
		if err := f.Set(in); err != nil || float64(f) != want {
			t.Errorf("Fraction %q = %v, %v", in, f, err)
		}
	}
	var l IntList
	if err := l.Set("1, 2,4"); err != nil || !reflect.DeepEqual(l, IntList{1, 2, 4}) {
		t.Errorf("IntList: %v %v", l, err)
	}
	if s := Size(62720000).String(); s != "59.8MB" {
		t.Errorf("Size string %q", s)
	}
	var back Size
	b, _ := Size(62720000).MarshalText()
	if err := back.UnmarshalText(b); err != nil || back != 62720000 {
		t.Errorf("Size round trip %s: %d %v", b, back, err)
	}
}
