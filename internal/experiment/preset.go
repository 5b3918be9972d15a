package experiment

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/workload"
)

// A preset is a ready-made experiment: its arms and workload follow from
// this host's facts (cores, memory, huge page sizes, the database's
// version and shared memory). The first arm is the base.
type preset struct {
	summary string
	// pgOnly presets need PostgreSQL (they set pg.* parameters).
	pgOnly bool
	build  func(f Facts, p *Plan) (presetResult, error)
}

type presetResult struct {
	arms []Arm
	// workload defaults: fields the user did not set take these.
	workload     Workload
	dataFraction float64
	notes        []string
}

var presets = map[string]preset{
	"hugepages": {"4 KB vs 2 MB (vs 1 GB where the kernel offers them) pages for PostgreSQL's shared memory", true, hugepagesPreset},
	"thp":       {"transparent huge pages: never vs madvise vs always", false, thpPreset},
	"swappiness": {"vm.swappiness 60 (kernel default) vs 1 (database hosts)", false, func(f Facts, _ *Plan) (presetResult, error) {
		r := presetResult{arms: arms("60: vm.swappiness=60", "1: vm.swappiness=1")}
		r.workload, r.dataFraction = presetWorkloads["swappiness"](f)
		return r, nil
	}},
	"dirty":     {"kernel default dirty page thresholds vs small ones (write-back starts early)", false, dirtyPreset},
	"scheduler": {"I/O scheduler of the data device: mq-deadline vs none", false, schedulerPreset},
	"readahead": {"read-ahead of the data device: 128 kB (kernel default) vs 8192 kB", false, readaheadPreset},
	"clients":   {"a sweep of client counts (1, 2, 4, ... up to 4 x cores) for each arm (default: 4 KB vs 2 MB pages)", false, clientsPreset},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var out []string
	for n := range presets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// PresetSummary describes a preset in one line.
func PresetSummary(name string) string { return presets[name].summary }

// applyPreset fills the plan's arms and workload defaults from its preset
// and the facts, and returns notes for the user (what was decided for
// this host and why).
func applyPreset(p *Plan, f Facts) ([]string, error) {
	pr, ok := presets[p.Preset]
	if !ok {
		return nil, fmt.Errorf("unknown preset %q", p.Preset)
	}
	if pr.pgOnly && f.Engine != "postgres" {
		return nil, fmt.Errorf("preset %s needs PostgreSQL (give --pg, or no target for a throwaway cluster)", p.Preset)
	}
	r, err := pr.build(f, p)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Preset, err)
	}
	if len(p.Arms) == 0 {
		p.Arms = r.arms
	}
	applyWorkload(p, f, r.workload, r.dataFraction)
	return r.notes, nil
}

// applyWorkload gives the fields of the plan's workload the user did not
// set a preset's defaults d, and the throwaway cluster's data set its
// dataFraction.
func applyWorkload(p *Plan, f Facts, d Workload, dataFraction float64) {
	w := &p.Workload
	if w.Kind == "" && d.Kind != "" {
		w.Kind = d.Kind
		if d.Kind == string(workload.PGBench) && f.Engine == "mysql" {
			w.Kind = ""
		}
	}
	if len(w.Clients) == 0 {
		w.Clients = d.Clients
	}
	if w.Jobs == 0 {
		w.Jobs = d.Jobs
	}
	if !w.SelectOnly && d.SelectOnly && w.Script == "" && w.Kind == string(workload.PGBench) {
		w.SelectOnly = true
	}
	if p.Target.DataFraction == 0 && dataFraction > 0 {
		p.Target.DataFraction = dataFraction
	}
}

// presetLoad is the workload a preset runs and the size of its data set
// (a fraction of shared_buffers; 0 the default).
type presetLoad func(f Facts) (Workload, float64)

// presetWorkloads are the presets' workloads, by preset; `experiment
// --finding` runs the one of the preset for the finding's domain.
var presetWorkloads = map[string]presetLoad{
	// Memory access: select-only on a data set that fits in shared_buffers,
	// two clients per core.
	"hugepages": func(f Facts) (Workload, float64) {
		return Workload{Kind: string(workload.PGBench), SelectOnly: true, Clients: IntList{min(64, max(4, 2*f.CPUs))}}, 0.75
	},
	"thp":        tpcbLoad(0),
	"swappiness": tpcbLoad(0),
	"dirty":      tpcbLoad(2),
	"scheduler":  tpcbLoad(0),
	// Reads through the page cache: twice shared_buffers.
	"readahead": func(Facts) (Workload, float64) {
		return Workload{Kind: string(workload.PGBench), SelectOnly: true}, 2
	},
}

// tpcbLoad is pgbench's TPC-B-like load on a data set of dataFraction.
func tpcbLoad(dataFraction float64) presetLoad {
	return func(Facts) (Workload, float64) { return Workload{Kind: string(workload.PGBench)}, dataFraction }
}

func arms(specs ...string) []Arm {
	out := make([]Arm, len(specs))
	for i, s := range specs {
		name, set, err := knob.ParseArm(s)
		if err != nil {
			panic("preset arm " + s + ": " + err.Error())
		}
		out[i] = Arm{Name: name, Set: set}
	}
	return out
}

const (
	page2M = 2 << 20
	page1G = 1 << 30
	// shmemMargin is added to the shared memory size when reserving huge
	// pages: the segment is rounded up to whole pages, and other
	// processes may hold a few.
	shmemMargin = 0.10
)

// sharedMemoryNeed estimates the main shared memory segment when the
// server does not report it: shared_buffers plus WAL buffers (1/32 of it,
// at most 16 MB) plus 48 MB for locks, connections and the rest at
// default settings.
func sharedMemoryNeed(f Facts) uint64 {
	if f.SharedMemory > 0 {
		return f.SharedMemory
	}
	return f.SharedBuffers + min(f.SharedBuffers/32, 16<<20) + 48<<20
}

// hugePagesFor is the number of pages of size to reserve for f's shared
// memory: its size plus 10%, rounded up.
func hugePagesFor(f Facts, size uint64) uint64 {
	need := float64(sharedMemoryNeed(f)) * (1 + shmemMargin)
	return (uint64(need) + size - 1) / size
}

// hugepagesPreset compares PostgreSQL's shared memory on 4 KB pages
// (huge_pages=off) with explicit 2 MB pages, and with 1 GB pages where
// the kernel offers them, PostgreSQL can ask for them (14+) and memory
// allows. The workload is pgbench select-only on a data set that fits in
// shared_buffers with twice as many clients as cores: the page size
// matters to memory access, and a write workload's fsync noise would
// hide it (the published measurement kept the data in shared_buffers too
// and found the gain grew with clients).
func hugepagesPreset(f Facts, _ *Plan) (presetResult, error) {
	if f.SharedBuffers == 0 {
		return presetResult{}, errors.New("shared_buffers of the target is unknown")
	}
	if !f.OffersPageSize(page2M) {
		return presetResult{}, errors.New("this kernel offers no 2 MB huge pages (/sys/kernel/mm/hugepages/hugepages-2048kB)")
	}
	n2 := hugePagesFor(f, page2M)
	r := presetResult{
		arms: []Arm{
			{Name: "4k", Set: []knob.Setting{{Name: "pg.huge_pages", Value: "off"}}},
			{Name: "2m", Set: []knob.Setting{{Name: "hugepages.2M", Value: strconv.FormatUint(n2, 10)}, {Name: "pg.huge_pages", Value: "on"}}},
		},
	}
	r.workload, r.dataFraction = presetWorkloads["hugepages"](f)
	r.notes = append(r.notes, fmt.Sprintf("2 MB pages: %d reserved for %s of shared memory plus %.0f%%", n2, Size(sharedMemoryNeed(f)), 100*shmemMargin))
	n1 := hugePagesFor(f, page1G)
	switch {
	case !f.OffersPageSize(page1G):
		r.notes = append(r.notes, "1 GB pages: not offered by this kernel (no /sys/kernel/mm/hugepages/hugepages-1048576kB; the CPU lacks pdpe1gb or the kernel was built without them): arm left out")
	case f.Major < 14:
		r.notes = append(r.notes, fmt.Sprintf("1 GB pages: PostgreSQL %d cannot choose the page size (huge_page_size is 14+): arm left out", f.Major))
	case f.MemAvailable > 0 && n1*page1G+f.SharedBuffers > f.MemAvailable/2:
		r.notes = append(r.notes, fmt.Sprintf("1 GB pages: %d pages would take %s of %s available memory: arm left out", n1, Size(n1*page1G), Size(f.MemAvailable)))
	default:
		r.arms = append(r.arms, Arm{Name: "1g", Set: []knob.Setting{
			{Name: "hugepages.1G", Value: strconv.FormatUint(n1, 10)}, {Name: "pg.huge_pages", Value: "on"}, {Name: "pg.huge_page_size", Value: "1GB"}}})
		r.notes = append(r.notes, fmt.Sprintf("1 GB pages: offered by this kernel; %d to reserve at run time (tried before the first trial: the arm is left out if memory is too fragmented)", n1))
	}
	return r, nil
}

// thpPreset: the kernel's transparent huge pages modes. never is what the
// database vendors advise and the base.
func thpPreset(f Facts, _ *Plan) (presetResult, error) {
	r := presetResult{arms: arms("never: thp.enabled=never", "madvise: thp.enabled=madvise", "always: thp.enabled=always")}
	r.workload, r.dataFraction = presetWorkloads["thp"](f)
	return r, nil
}

// dirtyPreset: the kernel's default dirty page thresholds against small
// ones that start write-back early, as advised for hosts with much memory
// (a write-heavy benchmark's periodic stalls went away with a 1% background
// ratio). A write workload (pgbench TPC-B-like) is what they affect.
//
// The kernel keeps each threshold as a ratio or as bytes, and writing one
// clears the other; a byte limit of 0 cannot be written back. So the arms
// stay in the form the host uses: ratios (10%/20% against 1%/5%) where the
// byte limits are 0, else byte limits (the host's own against 64 MB/256 MB).
func dirtyPreset(f Facts, _ *Plan) (presetResult, error) {
	var r presetResult
	r.workload, r.dataFraction = presetWorkloads["dirty"](f)
	if f.DirtyBytes == 0 && f.DirtyBackgroundBytes == 0 {
		r.arms = arms("default: vm.dirty_background_ratio=10 vm.dirty_ratio=20", "small: vm.dirty_background_ratio=1 vm.dirty_ratio=5")
		r.notes = []string{fmt.Sprintf("dirty limits as ratios, as this host sets them: small is 1%% / 5%% of memory (about %s / %s here)",
			Size(f.MemTotal/100/(1<<20)*(1<<20)), Size(f.MemTotal/20/(1<<20)*(1<<20)))}
		return r, nil
	}
	if f.DirtyBytes == 0 || f.DirtyBackgroundBytes == 0 {
		return r, errors.New("this host limits one dirty threshold in bytes and the other as a ratio; set both the same way first")
	}
	r.arms = arms(fmt.Sprintf("host: vm.dirty_background_bytes=%d vm.dirty_bytes=%d", f.DirtyBackgroundBytes, f.DirtyBytes),
		"small: vm.dirty_background_bytes=67108864 vm.dirty_bytes=268435456")
	r.notes = []string{"dirty limits in bytes, as this host sets them: its own against 64 MB / 256 MB"}
	return r, nil
}

func schedulerPreset(f Facts, _ *Plan) (presetResult, error) {
	r := presetResult{
		arms:  arms("mq-deadline: disk.scheduler=mq-deadline", "none: disk.scheduler=none"),
		notes: []string{"the scheduler is set on the device(s) under the database's data directory"},
	}
	r.workload, r.dataFraction = presetWorkloads["scheduler"](f)
	return r, nil
}

// readaheadPreset: the data set is twice shared_buffers so that reads go
// through the page cache, where read-ahead acts.
func readaheadPreset(f Facts, _ *Plan) (presetResult, error) {
	r := presetResult{
		arms:  arms("128: disk.read_ahead_kb=128", "8192: disk.read_ahead_kb=8192"),
		notes: []string{"read-ahead matters only when data is read from the device: with memory to cache the data set, expect 'equivalent'"},
	}
	r.workload, r.dataFraction = presetWorkloads["readahead"](f)
	return r, nil
}

// clientsPreset sweeps client counts 1, 2, 4, ... up to four per core
// (at most 64), for the user's arms or, without any, for 4 KB vs 2 MB
// pages (the published curves).
func clientsPreset(f Facts, p *Plan) (presetResult, error) {
	var sweep IntList
	top := min(64, max(2, 4*f.CPUs))
	for c := 1; c <= top; c *= 2 {
		sweep = append(sweep, c)
	}
	r := presetResult{workload: Workload{Clients: sweep}}
	if len(p.Arms) > 0 {
		return r, nil
	}
	if f.Engine != "postgres" {
		return r, errors.New("without --arm, the clients preset compares huge page sizes, which needs PostgreSQL")
	}
	hp, err := hugepagesPreset(f, p)
	if err != nil {
		return r, err
	}
	r.arms = hp.arms[:2]
	r.workload.Kind, r.workload.SelectOnly = hp.workload.Kind, hp.workload.SelectOnly
	r.dataFraction = hp.dataFraction
	r.notes = hp.notes[:1]
	return r, nil
}
