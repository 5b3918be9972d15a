package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/stats"
	"github.com/dbhost/dbhost/internal/workload"
)

// Plan is what an experiment is asked to do, from flags or a YAML file
// (see docs/experiment.md). Zero fields take the documented defaults.
type Plan struct {
	Name     string   `yaml:"name" json:"name"`
	Preset   string   `yaml:"preset" json:"preset,omitempty"`
	Target   Target   `yaml:"target" json:"target"`
	Arms     []Arm    `yaml:"arms" json:"arms"`
	Workload Workload `yaml:"workload" json:"workload"`
	Protocol Protocol `yaml:"protocol" json:"protocol"`
	// Findings are the check IDs an experiment on findings tests
	// (--finding): its arms are "now" and "fixed" (PlanFindings), and the
	// stored plan links the verdict to the checks.
	Findings []string `yaml:"-" json:"findings,omitempty"`
	// FindingWorkload names the preset whose workload an experiment on
	// findings runs.
	FindingWorkload string `yaml:"-" json:"finding_workload,omitempty"`
}

// sized reports whether the plan takes a preset's shorter trials and time
// budget: a preset's, or an experiment on findings.
func (p *Plan) sized() bool { return p.Preset != "" || len(p.Findings) > 0 }

// Target says which database the experiment runs against. Neither PG nor
// MySQL: a throwaway PostgreSQL cluster (the embedded default).
type Target struct {
	// PG is a PostgreSQL connection string (key=value or URL). It may hold
	// a password, so it is never stored or printed; Where describes it.
	PG string `yaml:"pg" json:"-"`
	// MySQL is a MySQL/MariaDB DSN (user:pass@unix(/run/mysqld/mysqld.sock)/db).
	MySQL string `yaml:"mysql" json:"-"`
	// Where describes the target without secrets (filled by Run).
	Where string `yaml:"-" json:"where,omitempty"`
	// AllowRestart lets dbhost restart the user's server for knobs that
	// need it, when it knows how (a systemd unit).
	AllowRestart bool `yaml:"allow_restart" json:"allow_restart,omitempty"`
	// OSUser runs pgbench/sysbench as this system user (peer
	// authentication over a Unix socket).
	OSUser string `yaml:"os_user" json:"os_user,omitempty"`

	// SharedBuffers sizes the throwaway cluster (0: sized to the host).
	SharedBuffers Size `yaml:"shared_buffers" json:"shared_buffers,omitempty"`
	// Dir is where the throwaway cluster lives (default: the system's
	// temporary directory).
	Dir string `yaml:"dir" json:"dir,omitempty"`
	// DataFraction is the size of the benchmark data set in the throwaway
	// cluster, as a fraction of shared_buffers (default 0.5: it fits).
	DataFraction float64 `yaml:"data_fraction" json:"data_fraction,omitempty"`
	// Settings are extra PostgreSQL settings of the throwaway cluster.
	Settings map[string]string `yaml:"settings" json:"settings,omitempty"`
}

// Embedded reports whether the experiment runs on a throwaway cluster.
func (t Target) Embedded() bool { return t.PG == "" && t.MySQL == "" }

// Arm is one setting under test: a name and its knob assignments.
type Arm struct {
	Name string         `json:"name"`
	Set  []knob.Setting `json:"set"`
	// Filled lists the knobs this arm did not name, set to their original
	// values so that every arm describes the whole state.
	Filled []string `json:"filled,omitempty"`
}

// Knobs returns "name=value" for each setting, as stored with the results.
func (a Arm) Knobs() []string {
	out := make([]string, len(a.Set))
	for i, s := range a.Set {
		out[i] = s.Name + "=" + s.Value
	}
	return out
}

func (a Arm) String() string { return a.Name + ": " + strings.Join(a.Knobs(), " ") }

// UnmarshalYAML reads an arm written as "name: knob=value, ..." (a string
// or a one-key mapping) or as {name: NAME, set: {knob: value} | [knob=value]}.
func (a *Arm) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		name, set, err := knob.ParseArm(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		*a = Arm{Name: name, Set: set}
		return nil
	case yaml.MappingNode:
	default:
		return fmt.Errorf("line %d: an arm is \"name: knob=value ...\" or {name: ..., set: ...}", n.Line)
	}
	keys := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys[n.Content[i].Value] = n.Content[i+1]
	}
	if name, ok := keys["name"]; ok {
		for k := range keys {
			if k != "name" && k != "set" {
				return fmt.Errorf("line %d: unknown arm field %q (name, set)", n.Line, k)
			}
		}
		set, err := settingsNode(keys["set"])
		if err != nil {
			return err
		}
		*a = Arm{Name: name.Value, Set: set}
		return a.validName()
	}
	if len(keys) != 1 {
		return fmt.Errorf("line %d: an arm mapping needs name and set, or exactly one \"name: knobs\" pair", n.Line)
	}
	name, v := n.Content[0].Value, n.Content[1]
	set, err := settingsNode(v)
	if err != nil {
		return err
	}
	*a = Arm{Name: name, Set: set}
	return a.validName()
}

func (a Arm) validName() error {
	if a.Name == "" || len(a.Name) > 64 || strings.ContainsFunc(a.Name, unicode.IsControl) {
		return fmt.Errorf("arm name %q: 1 to 64 printable characters", a.Name)
	}
	return nil
}

// settingsNode reads knob settings from a mapping (knob: value), a list
// ("knob=value") or a string ("knob=value, knob=value").
func settingsNode(n *yaml.Node) ([]knob.Setting, error) {
	if n == nil {
		return nil, errors.New("arm without settings")
	}
	var out []knob.Setting
	switch n.Kind {
	case yaml.ScalarNode:
		_, set, err := knob.ParseArm("x: " + n.Value)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return set, nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			s, err := knob.Parse(n.Content[i].Value + "=" + n.Content[i+1].Value)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Content[i].Line, err)
			}
			out = append(out, s)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			s, err := knob.Parse(c.Value)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", c.Line, err)
			}
			out = append(out, s)
		}
	default:
		return nil, fmt.Errorf("line %d: settings are a mapping, a list or a string", n.Line)
	}
	return out, nil
}

// Workload is the benchmark each trial runs (internal/workload).
type Workload struct {
	// Kind is pgbench, sysbench or sql (default: pgbench for PostgreSQL,
	// sysbench for MySQL).
	Kind string `yaml:"kind" json:"kind"`
	// Clients is one client count, or several for a sweep (each arm runs
	// at each count).
	Clients  IntList  `yaml:"clients" json:"clients"`
	Jobs     int      `yaml:"jobs" json:"jobs,omitempty"`
	Duration Duration `yaml:"duration" json:"duration"`
	Warmup   Duration `yaml:"warmup" json:"warmup"`
	// Scale is pgbench's scale (default: 10; on the throwaway cluster, the
	// data set sized by Target.DataFraction).
	Scale      int      `yaml:"scale" json:"scale,omitempty"`
	SelectOnly bool     `yaml:"select_only" json:"select_only,omitempty"`
	Script     string   `yaml:"script" json:"script,omitempty"`
	Tables     int      `yaml:"tables" json:"tables,omitempty"`
	TableSize  int      `yaml:"table_size" json:"table_size,omitempty"`
	Readers    int      `yaml:"readers" json:"readers,omitempty"`
	Writers    int      `yaml:"writers" json:"writers,omitempty"`
	Args       []string `yaml:"args" json:"args,omitempty"`
	// DB holds the benchmark tables (default: the connection string's
	// database, else dbhost_bench).
	DB string `yaml:"db" json:"db,omitempty"`
	// NoPrepare reuses tables loaded earlier instead of (re)creating them.
	NoPrepare bool `yaml:"no_prepare" json:"no_prepare,omitempty"`
}

// Spec is the workload.Spec of one trial at the given client count.
func (w Workload) Spec(clients int) workload.Spec {
	return workload.Spec{
		Kind: workload.Kind(w.Kind), Duration: time.Duration(w.Duration), Warmup: time.Duration(w.Warmup),
		Clients: clients, Jobs: min(w.Jobs, clients), Scale: w.Scale, SelectOnly: w.SelectOnly, Script: w.Script,
		Tables: w.Tables, TableSize: w.TableSize, Readers: w.Readers, Writers: w.Writers, Args: w.Args,
	}
}

// Protocol is how trials are run and judged.
type Protocol struct {
	// Trials is the total budget of trials over all arms (and client
	// counts); Time a wall-clock budget instead. Neither: 8 trials per
	// arm, or 12 minutes for a preset.
	Trials int      `yaml:"trials" json:"trials,omitempty"`
	Time   Duration `yaml:"time" json:"time,omitempty"`
	// Calibrate runs this many A/A trials of the base arm first and
	// prints the noise and the smallest detectable change (0: none).
	Calibrate int `yaml:"calibrate" json:"calibrate,omitempty"`
	// Restart restarts the database before every trial.
	Restart bool `yaml:"restart" json:"restart,omitempty"`
	// Alpha is the accepted rate of false "better"/"worse" (0.05).
	Alpha float64 `yaml:"alpha" json:"alpha"`
	// Equivalence is the change that does not matter (0.02 = ±2%).
	Equivalence Fraction `yaml:"equivalence" json:"equivalence"`
	// Metric is throughput (default), p50, p95 or p99 latency.
	Metric string `yaml:"metric" json:"metric"`
	// Seed draws the trial order (0: random; the one used is stored).
	Seed uint64 `yaml:"seed" json:"seed"`
	// MaxPerArm is the resulting budget per arm and client count (filled).
	MaxPerArm int `yaml:"-" json:"max_per_arm"`
	// Replace is how many more trials per arm and client count may run in
	// place of excluded ones (steal time, drift, a failed run), so that a
	// busy host still gives each look the trials it was planned with: 0
	// as many as the budget, negative none. They run in whole blocks (two
	// per arm) and may overrun a time budget.
	Replace int `yaml:"replace" json:"replace,omitempty"`
	// MaxReplace is the resulting replacement budget per arm and client
	// count (filled; absent in experiments stored before there was one,
	// which replaced nothing).
	MaxReplace int `yaml:"-" json:"max_replace,omitempty"`
}

// replaceBudget resolves Replace for a budget of perArm trials per arm:
// whole blocks, so an even number.
func (pr Protocol) replaceBudget(perArm int) int {
	switch {
	case pr.Replace < 0:
		return 0
	case pr.Replace == 0:
		return perArm + perArm%2
	}
	return pr.Replace + pr.Replace%2
}

// Metrics are the samples a trial can be judged by.
var Metrics = []string{"throughput", "p50", "p95", "p99"}

// Defaults.
const (
	DefaultDuration       = 30 * time.Second
	DefaultWarmup         = 10 * time.Second
	PresetDuration        = 20 * time.Second
	PresetWarmup          = 5 * time.Second
	PresetTime            = 12 * time.Minute
	DefaultPerArm         = 8
	DefaultDataFraction   = 0.5
	DefaultScale          = 10
	maxStealPercent       = 10.0
	maxConsecutiveFailure = 3
)

// ParsePlan reads a YAML plan. Unknown fields are errors: a typo must not
// silently change an experiment.
func ParsePlan(r io.Reader) (*Plan, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var p Plan
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("plan: empty file")
		}
		return nil, fmt.Errorf("plan: %w", err)
	}
	return &p, nil
}

// LoadPlan reads a YAML plan file.
func LoadPlan(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := ParsePlan(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Validate checks the plan as given (before presets and defaults).
func (p *Plan) Validate() error {
	if p.Target.PG != "" && p.Target.MySQL != "" {
		return errors.New("plan: give --pg or --mysql, not both")
	}
	if err := p.validateArms(); err != nil {
		return err
	}
	if err := p.Workload.validate(); err != nil {
		return err
	}
	if err := p.Protocol.validate(); err != nil {
		return err
	}
	if p.Target.DataFraction < 0 || p.Target.DataFraction > 4 {
		return fmt.Errorf("plan: data fraction %g", p.Target.DataFraction)
	}
	return nil
}

// validateArms checks the preset and the arms: distinct names, each knob
// set once, something set at all.
func (p *Plan) validateArms() error {
	if len(p.Findings) > 0 && p.Preset != "" {
		return errors.New("plan: --finding brings its own arms and workload; leave out --preset")
	}
	if w := p.FindingWorkload; w != "" && presetWorkloads[w] == nil {
		return fmt.Errorf("plan: finding workload %q is no preset's", w)
	}
	if p.Preset != "" {
		if _, ok := presets[p.Preset]; !ok {
			return fmt.Errorf("plan: unknown preset %q (%s)", p.Preset, strings.Join(PresetNames(), ", "))
		}
		if len(p.Arms) > 0 && p.Preset != "clients" {
			return fmt.Errorf("plan: preset %q brings its own arms; leave out --arm (only the clients preset sweeps your arms)", p.Preset)
		}
	} else if len(p.Arms) < 2 {
		return fmt.Errorf("plan: %d arms; an experiment needs a base arm and at least one treatment (--arm 'base: knob=value' --arm 'new: knob=value', or --preset)", len(p.Arms))
	}
	seen := map[string]bool{}
	sets := 0
	for _, a := range p.Arms {
		if err := a.validName(); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		if seen[a.Name] {
			return fmt.Errorf("plan: two arms named %q", a.Name)
		}
		seen[a.Name] = true
		sets += len(a.Set)
		names := map[string]bool{}
		for _, s := range a.Set {
			if names[s.Name] {
				return fmt.Errorf("plan: arm %q sets %s twice", a.Name, s.Name)
			}
			names[s.Name] = true
		}
	}
	if len(p.Arms) > 0 && sets == 0 {
		return errors.New("plan: no arm sets anything: every arm would run the same host")
	}
	return nil
}

func (w Workload) validate() error {
	switch w.Kind {
	case "", string(workload.PGBench), string(workload.Sysbench), string(workload.SQL):
	default:
		return fmt.Errorf("plan: workload %q (pgbench, sysbench, sql)", w.Kind)
	}
	for _, c := range w.Clients {
		if c < 1 || c > 10000 {
			return fmt.Errorf("plan: %d clients", c)
		}
	}
	if w.Duration != 0 && time.Duration(w.Duration) < time.Second {
		return fmt.Errorf("plan: trial duration %s: at least 1s", time.Duration(w.Duration))
	}
	if w.Warmup < 0 {
		return errors.New("plan: negative warm-up")
	}
	return nil
}

func (pr Protocol) validate() error {
	switch {
	case pr.Trials < 0 || pr.Time < 0 || pr.Calibrate < 0:
		return errors.New("plan: negative budget")
	case pr.Trials > 0 && pr.Time > 0:
		return errors.New("plan: give a budget of --trials or --time, not both")
	case pr.Calibrate > 0 && pr.Calibrate < 3:
		return fmt.Errorf("plan: %d calibration trials; at least 3 are needed to measure noise", pr.Calibrate)
	case pr.Alpha != 0 && !(pr.Alpha > 0 && pr.Alpha <= 0.2):
		return fmt.Errorf("plan: alpha %g not in (0, 0.2]", pr.Alpha)
	case pr.Equivalence < 0 || pr.Equivalence >= 0.5:
		return fmt.Errorf("plan: equivalence %g not in [0, 0.5)", float64(pr.Equivalence))
	case pr.Metric != "" && !slices.Contains(Metrics, pr.Metric):
		return fmt.Errorf("plan: metric %q (%s)", pr.Metric, strings.Join(Metrics, ", "))
	}
	return nil
}

// withDefaults fills what the user left out (after the preset); presets
// have shorter trials and a time budget.
func (p *Plan) withDefaults(f Facts) {
	p.Workload.withDefaults(f, p.sized(), p.Target.Embedded())
	if p.Target.DataFraction == 0 {
		p.Target.DataFraction = DefaultDataFraction
	}
	pr := &p.Protocol
	if pr.Alpha == 0 {
		pr.Alpha = stats.DefaultAlpha
	}
	if pr.Equivalence == 0 {
		pr.Equivalence = stats.DefaultEquivalence
	}
	if pr.Metric == "" {
		pr.Metric = "throughput"
	}
	if pr.Trials == 0 && pr.Time == 0 && p.sized() {
		pr.Time = Duration(PresetTime)
	}
	if p.Name == "" {
		p.Name = p.Preset
		if len(p.Findings) > 0 {
			p.Name = "finding " + strings.Join(p.Findings, ",")
		}
		if p.Name == "" {
			names := make([]string, len(p.Arms))
			for i, a := range p.Arms {
				names[i] = a.Name
			}
			p.Name = strings.Join(names, " vs ")
		}
	}
}

// withDefaults fills the workload: the engine's benchmark, clients for
// the host's cores, trial times (shorter for a preset).
func (w *Workload) withDefaults(f Facts, preset, embedded bool) {
	if w.Kind == "" {
		w.Kind = string(workload.PGBench)
		if f.Engine == "mysql" {
			w.Kind = string(workload.Sysbench)
			if w.Script == "" {
				w.Script = "oltp_read_only"
			}
		}
	}
	if len(w.Clients) == 0 {
		w.Clients = IntList{defaultClients(f.CPUs)}
	}
	if w.Duration == 0 {
		w.Duration = Duration(DefaultDuration)
		if preset {
			w.Duration = Duration(PresetDuration)
		}
	}
	if w.Warmup == 0 {
		w.Warmup = Duration(DefaultWarmup)
		if preset {
			w.Warmup = Duration(PresetWarmup)
		}
	}
	if w.Kind == string(workload.PGBench) && w.Scale == 0 && !embedded {
		w.Scale = DefaultScale
	}
}

// statsPlan is the stats.Plan of one comparison (one client count).
func (p *Plan) statsPlan(perArm, comparisons int) stats.Plan {
	sp := stats.Plan{
		Alpha:       p.Protocol.Alpha / float64(comparisons),
		MaxPerArm:   perArm,
		Equivalence: float64(p.Protocol.Equivalence),
		Metric:      p.Protocol.Metric,
	}
	if p.Protocol.Metric != "throughput" {
		sp.Direction = stats.LowerIsBetter
		sp.Metric = p.Protocol.Metric + " latency"
	}
	return sp
}

// trialOverhead is the time a trial takes besides warm-up and measurement
// (applying knobs, fingerprints, storing), and a restart's extra.
const (
	// trialGrace is added to twice a trial's planned time before it is
	// stopped as stuck.
	trialGrace      = time.Minute
	trialOverhead   = 2 * time.Second
	restartOverhead = 5 * time.Second
)

// trialWall estimates one trial's wall-clock time.
func (p *Plan) trialWall(restart bool) time.Duration {
	d := time.Duration(p.Workload.Duration+p.Workload.Warmup) + trialOverhead
	if restart {
		d += restartOverhead
	}
	return d
}

// budget turns the plan's budget into trials per arm and client count.
func (p *Plan) budget(restart bool) (int, error) {
	cells := len(p.Arms) * len(p.Workload.Clients)
	pr := p.Protocol
	switch {
	case pr.Trials > 0:
		n, err := stats.MaxPerArmForTrials(pr.Trials, cells)
		if err != nil {
			return 0, fmt.Errorf("%w (%d arms x %d client counts)", err, len(p.Arms), len(p.Workload.Clients))
		}
		return n, nil
	case pr.Time > 0:
		left := time.Duration(pr.Time) - time.Duration(pr.Calibrate)*p.trialWall(restart)
		n, err := stats.MaxPerArmForTime(left, p.trialWall(restart), cells)
		if err != nil {
			return 0, fmt.Errorf("%w; give more --time or shorter --duration", err)
		}
		return n, nil
	}
	return DefaultPerArm, nil
}

// defaultClients keeps every core busy with a client waiting: twice the
// cores, at least 2, at most 8 (more needs a reason, then --clients).
func defaultClients(cpus int) int {
	return max(2, min(8, 2*cpus))
}

// Duration is a time.Duration written as "30s", "2m", "1h30m".
type Duration time.Duration

// MarshalText writes the duration as Go prints it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads "30s"; a bare number is seconds.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		*d = Duration(n * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// Set implements flag.Value.
func (d *Duration) Set(s string) error { return d.UnmarshalText([]byte(s)) }

// Fraction is a share written as 0.02 or "2%".
type Fraction float64

// UnmarshalText reads 0.02 or 2%.
func (f *Fraction) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	div := 1.0
	if t, ok := strings.CutSuffix(s, "%"); ok {
		s, div = strings.TrimSpace(t), 100
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%q: want a fraction (0.02) or a percentage (2%%)", string(b))
	}
	*f = Fraction(v / div)
	return nil
}

// MarshalText writes the share as a percentage.
func (f Fraction) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

func (f Fraction) String() string { return strconv.FormatFloat(100*float64(f), 'g', -1, 64) + "%" }

// Set implements flag.Value.
func (f *Fraction) Set(s string) error { return f.UnmarshalText([]byte(s)) }

// IntList is one number or several: 8, [1, 2, 4], "1,2,4".
type IntList []int

// UnmarshalYAML reads a number, a list of numbers or "1,2,4".
func (l *IntList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		return l.Set(n.Value)
	case yaml.SequenceNode:
		*l = nil
		for _, c := range n.Content {
			v, err := strconv.Atoi(c.Value)
			if err != nil {
				return fmt.Errorf("line %d: %q is not a number", c.Line, c.Value)
			}
			*l = append(*l, v)
		}
		return nil
	}
	return fmt.Errorf("line %d: want a number or a list", n.Line)
}

// Set implements flag.Value: "8" or "1,2,4,8".
func (l *IntList) Set(s string) error {
	var out IntList
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return errors.New("no number given")
	}
	*l = out
	return nil
}

func (l IntList) String() string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

// Size is a byte count written as 128MB, 1GB, 4096 (bytes) or 8kB.
type Size uint64

// UnmarshalText reads sizes with PostgreSQL's units (kB, MB, GB, TB; also
// K, M, G, T and KiB ...), all powers of 1024.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// MarshalText writes the size exactly: in GB or MB when whole, else bytes.
func (s Size) MarshalText() ([]byte, error) {
	if s >= 1<<20 && s%(1<<20) != 0 {
		return []byte(strconv.FormatUint(uint64(s), 10)), nil
	}
	return []byte(s.String()), nil
}

// String writes whole GB or MB exactly, other sizes of a MB and more
// rounded to a tenth of a MB, smaller ones in bytes.
func (s Size) String() string {
	switch {
	case s == 0:
		return "0"
	case s%(1<<30) == 0:
		return strconv.FormatUint(uint64(s)>>30, 10) + "GB"
	case s%(1<<20) == 0:
		return strconv.FormatUint(uint64(s)>>20, 10) + "MB"
	case s >= 1<<20:
		return strconv.FormatFloat(float64(s)/(1<<20), 'f', 1, 64) + "MB"
	}
	return strconv.FormatUint(uint64(s), 10)
}

// Set implements flag.Value.
func (s *Size) Set(v string) error { return s.UnmarshalText([]byte(v)) }

// ParseSize reads "128MB", "1GB", "8kB", "4096".
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (kB, MB, GB)", s)
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
		"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (kB, MB, GB, TB)", s, unit)
	}
	return uint64(v * mult), nil
}
