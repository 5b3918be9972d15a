package fleet

import (
	"context"
	"path/filepath"
	"sort"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// Snapshot is what fleet keeps of one observation of a host: who and when,
// its settings, its databases and its verdicts. It holds no facts.
type Snapshot struct {
	// File is the snapshot file as given, or "live" for this host.
	File        string    `json:"file"`
	Hostname    string    `json:"hostname"`
	Kernel      string    `json:"kernel,omitempty"`
	CollectedAt time.Time `json:"collected_at"`
	AsRoot      bool      `json:"as_root"`
	// Instances are the databases by name ("postgres:5432"), sorted.
	Instances []string `json:"instances"`
	// Databases describe the Instances, for pairing them with another
	// host's: by engine and data directory, then port.
	Databases []Database `json:"databases,omitempty"`
	// Devices are the whole block devices observed, sorted.
	Devices []string `json:"devices"`
	// Stacks are the devices as their settings are keyed: the devices
	// under database paths grouped, the rest one by one.
	Stacks []Stack `json:"stacks,omitempty"`
	// Settings are nil in the snapshots LoadAll returns, which hold them
	// packed: read them with EachSetting.
	Settings SettingMap `json:"settings"`
	// Raw holds the value read for the settings whose compared value is
	// another (a kernel default derived from RAM, a cleaned path).
	Raw      map[string]string `json:"raw,omitempty"`
	Findings []Finding         `json:"findings"`

	packed *packed // the settings, when LoadAll packed them
}

// EachSetting calls fn with each setting of s, in no order, whether they
// are in Settings or packed by LoadAll.
func (s *Snapshot) EachSetting(fn func(key, value string)) {
	for k, v := range s.Settings {
		fn(k, v)
	}
	if p := s.packed; p != nil {
		for _, kv := range p.pairs {
			fn(p.in.strs[kv.key], p.in.strs[kv.value])
		}
	}
}

// settingMap returns the settings of s as a map, unpacking them if LoadAll
// packed them.
func (s *Snapshot) settingMap() SettingMap {
	if s.packed == nil {
		return s.Settings
	}
	m := make(SettingMap, len(s.Settings)+len(s.packed.pairs))
	s.EachSetting(func(k, v string) { m[k] = v })
	return m
}

// Database is one database server of a snapshot.
type Database struct {
	Name    string `json:"name"`
	Engine  string `json:"engine"`
	Port    int    `json:"port,omitempty"`
	DataDir string `json:"data_dir,omitempty"`
}

// Finding is a verdict without its evidence: enough to compare and count.
type Finding struct {
	ID       string         `json:"id"`
	Subject  string         `json:"subject"`
	Status   check.Status   `json:"status"`
	Severity check.Severity `json:"severity"`
}

// key identifies a finding on a host.
func (f Finding) key() string { return f.ID + "\x00" + f.Subject }

// Label names the observation for people: the host name and the time it
// was collected ("db1 2026-11-21 17:06:05Z"). Two snapshots of one host at
// different times have different labels; File tells apart the rest.
func (s *Snapshot) Label() string {
	name := s.Hostname
	if name == "" {
		name = "(no hostname)"
	}
	if s.CollectedAt.IsZero() {
		return name
	}
	return name + " " + s.CollectedAt.UTC().Format("2006-01-02 15:04:05Z")
}

// FromFacts reduces gathered facts and their findings (check.Run) to a
// Snapshot. file names the source ("live" for this host).
func FromFacts(file string, f *facts.Facts, findings []check.Finding) Snapshot {
	s := Snapshot{
		File:        file,
		Hostname:    f.Manifest.Hostname,
		Kernel:      f.Manifest.Kernel,
		CollectedAt: f.Manifest.CollectedAt,
		AsRoot:      f.AsRoot,
	}
	s.Settings, s.Raw, s.Stacks = flatten(f)
	if len(s.Raw) == 0 {
		s.Raw = nil
	}
	for _, in := range f.Instances {
		s.Instances = append(s.Instances, in.Name())
		d := Database{Name: in.Name(), Engine: string(in.Engine), Port: in.Port}
		if in.DataDir != "" {
			d.DataDir = filepath.Clean(in.DataDir)
		}
		s.Databases = append(s.Databases, d)
	}
	sort.Strings(s.Instances)
	sort.Slice(s.Databases, func(i, j int) bool { return s.Databases[i].Name < s.Databases[j].Name })
	for name, d := range f.Storage.Devices {
		if d != nil && !d.Partition {
			s.Devices = append(s.Devices, name)
		}
	}
	sort.Strings(s.Devices)
	s.Findings = reduceFindings(findings)
	return s
}

// reduceFindings keeps one verdict per check and subject (the worst, should
// a check judge a subject twice), sorted by check and subject.
func reduceFindings(fds []check.Finding) []Finding {
	idx := map[string]int{}
	out := make([]Finding, 0, len(fds))
	for _, fd := range fds {
		f := Finding{ID: fd.ID, Subject: fd.Subject, Status: fd.Status, Severity: fd.Severity}
		if i, ok := idx[f.key()]; ok {
			if worse(f, out[i]) {
				out[i] = f
			}
			continue
		}
		idx[f.key()] = len(out)
		out = append(out, f)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].ID != out[b].ID {
			return out[a].ID < out[b].ID
		}
		return out[a].Subject < out[b].Subject
	})
	return out
}

// statusRank orders verdicts from best to worst; a check with no verdict
// on a host ranks below pass.
func statusRank(s check.Status) int {
	switch s {
	case check.Pass:
		return 1
	case check.Unknown:
		return 2
	case check.Fail:
		return 3
	}
	return 0
}

// worse reports whether a is a worse verdict than b: fail over unknown over
// pass, and between two failures the more severe.
func worse(a, b Finding) bool {
	if ra, rb := statusRank(a.Status), statusRank(b.Status); ra != rb {
		return ra > rb
	}
	return a.Status == check.Fail && a.Severity > b.Severity
}

// Load judges a snapshot file as 'dbhost audit --from' does and reduces it.
func Load(ctx context.Context, file string) (Snapshot, error) {
	h, err := host.OpenSnapshot(file)
	if err != nil {
		return Snapshot{}, err
	}
	defer h.Close()
	return judge(ctx, file, h, check.GatherOptions(engine.Options{})), nil
}

// LoadHost judges an opened host (live, or a snapshot) and reduces it.
func LoadHost(ctx context.Context, file string, h *host.Host, opts facts.Options) Snapshot {
	return judge(ctx, file, h, opts)
}

func judge(ctx context.Context, file string, h *host.Host, opts facts.Options) Snapshot {
	f := facts.Gather(ctx, h, opts)
	return FromFacts(file, f, check.Run(f, check.Selector{}))
}

// base is a file's name without its directory, for display.
func base(file string) string {
	if file == "" || file == "live" {
		return file
	}
	return filepath.Base(file)
}
