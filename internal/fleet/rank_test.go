package fleet

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
)

// outlierMix is a fleet of 500 recorded hosts where most are alike and one
// holds what no other host holds: 440 copies of baseline (the majority),
// five groups of 11 or 12 hosts changed alike (a tuned storage group whose
// one change shows through 24 keys, a scheduler group, swappiness,
// somaxconn, dirty pages: minorities of 2%, not outliers), and one
// mem-thp-always, the planted outlier: transparent huge pages "always"
// (enabled and defrag) on 1 host of 500. A ranking by how many settings are
// off, or by failure count, puts the tuned groups first; a ranking by
// rarity puts the planted host first.
var outlierMix = []struct {
	name string
	n    int
}{
	{"baseline", 440},
	{"storage-vda-tuned", 12},
	{"storage-sched-bfq", 12},
	{"mem-swappiness-1", 12},
	{"net-somaxconn-128", 12},
	{"mem-dirty-high", 11},
	{"mem-thp-always", 1},
}

// planted is the outlier of outlierMix, and its rare setting.
const (
	planted     = "mem-thp-always"
	plantedKey  = "thp/enabled"
	plantedFile = "host0499.tar.gz" // the last of the mix
)

// mixFiles names the 500 files of outlierMix in order: hostNNNN.tar.gz for
// the recorded host names.
func mixFiles() (files, names []string) {
	i := 0
	for _, m := range outlierMix {
		for range m.n {
			files = append(files, fmt.Sprintf("host%04d.tar.gz", i))
			names = append(names, m.name)
			i++
		}
	}
	return files, names
}

func TestRarity(t *testing.T) {
	for _, c := range []struct {
		holders, majority, observed int
		want                        float64
	}{
		{1, 499, 500, 8.95}, // one host of 500 against all others
		{4, 496, 500, 6.91},
		{100, 400, 500, 1.86}, // a fifth is a minority, not an outlier
		{1, 2, 3, 1.06},       // one of three: weak evidence
		{1, 2, 500, 0.04},     // every host its own value (derived from RAM): no majority to be rare against
		{2, 2, 4, 0},          // a tie
		{0, 5, 5, 0},
		{3, 2, 5, 0}, // not a minority
	} {
		if got := Rarity(c.holders, c.majority, c.observed); got != c.want {
			t.Errorf("Rarity(%d, %d, %d) = %v, want %v", c.holders, c.majority, c.observed, got, c.want)
		}
	}
	if d := distance([]float64{1, 4, 2}); d != 4+1+0.25 {
		t.Errorf("distance %v: the rarest in full, then half, then a quarter", d)
	}
	if d := distance(nil); d != 0 {
		t.Errorf("distance of nothing %v", d)
	}
}

// The planted outlier of a 500-host fleet ranks first, with its rare
// setting, although groups of hosts have more settings off the majority and
// as many failures; the rare setting ranks first among settings; checks
// failing fleet-wide are marked and kept out of the separating columns.
func TestReportRanksOutliers(t *testing.T) {
	_, loaded := fleetReport(t)
	byName := map[string]Snapshot{}
	for _, s := range loaded {
		byName[strings.TrimSuffix(base(s.File), ".tar.gz")] = s
	}
	files, names := mixFiles()
	snaps := make([]Snapshot, len(files))
	for i, f := range files {
		s, ok := byName[names[i]]
		if !ok {
			t.Fatalf("%s is not in the recorded fleet", names[i])
		}
		s.File = f
		snaps[i] = s
	}
	r := Build(snaps, nil)

	top := r.Hosts[0]
	if top.ID != plantedFile || top.OffMajority[0].Holders != 1 || top.OffMajority[0].Observed != 500 {
		for _, h := range r.Hosts[:5] {
			t.Logf("%s distance %v, %d off, %d rare failures", h.ID, h.Distance, len(h.OffMajority), len(h.RareFailures))
		}
		t.Fatalf("first host %s (%v), want the planted %s", top.ID, top.Distance, plantedFile)
	}
	var key *OffSetting
	for i := range top.OffMajority {
		if top.OffMajority[i].Key == plantedKey {
			key = &top.OffMajority[i]
		}
	}
	if key == nil || key.Value != "always" || key.Majority != "madvise" || key.Rarity != Rarity(1, 499, 500) {
		t.Errorf("planted host's %s: %+v", plantedKey, key)
	}
	// The tuned hosts have more settings off and more failures: the old
	// order (failures, then settings off) would put them first.
	for _, h := range r.Hosts {
		if strings.HasPrefix(h.ID, "host0440") && (len(h.OffMajority) <= len(top.OffMajority) || h.Failing <= top.Failing || h.Distance >= top.Distance) {
			t.Errorf("storage-vda-tuned %s: %d off, %d failing, distance %v; planted %d off, %d failing, %v",
				h.ID, len(h.OffMajority), h.Failing, h.Distance, len(top.OffMajority), top.Failing, top.Distance)
		}
	}
	if last := r.Hosts[len(r.Hosts)-1]; last.Distance != 0 || len(last.OffMajority) != 0 || len(last.RareFailures) != 0 {
		t.Errorf("last host %s: distance %v: the majority is at distance 0", last.ID, last.Distance)
	}

	// Settings: held by one host of 500 comes before held by 11 or 12.
	rank := map[string]int{}
	for i, s := range r.Settings {
		rank[s.Key] = i
	}
	if sp := r.Settings[rank[plantedKey]]; rank[plantedKey] > 1 || sp.Rarity != Rarity(1, 499, 500) || sp.Off != 1 {
		t.Errorf("%s ranks %d (%+v), want among the first two (with thp/defrag)", plantedKey, rank[plantedKey], sp)
	}
	if sw := r.Settings[rank["sysctl/vm.swappiness"]]; sw.Off != 12 || rank["sysctl/vm.swappiness"] < rank[plantedKey] {
		t.Errorf("vm.swappiness %+v ranks before the planted setting", sw)
	}

	// Checks: fleet-wide ones marked; mem.thp.defrag (fails on the planted
	// host only) separates hosts most.
	for _, c := range r.Checks {
		if c.FleetWide && float64(c.Fail) < FleetWideShare*float64(c.Fail+c.Unknown+c.Pass) {
			t.Errorf("%s marked fleet-wide: %+v", c.ID, c)
		}
	}
	if c := r.Checks[0]; c.ID != "mem.thp.defrag" || c.Fail != 1 || c.FleetWide || math.Abs(c.Separation-8.95) > 0.01 {
		t.Errorf("first check %+v, want mem.thp.defrag failing on the planted host alone", c)
	}
	if r.Summary.FleetWide == 0 {
		t.Errorf("no check fails fleet-wide on 500 copies of mostly one host")
	}
	var rare *RareFailure
	for i := range top.RareFailures {
		if top.RareFailures[i].ID == "mem.thp.defrag" {
			rare = &top.RareFailures[i]
		}
	}
	if rare == nil || rare.Failing != 1 || rare.Judged != 500 {
		t.Errorf("planted host's rare failures %+v", top.RareFailures)
	}
	if top.Checks["mem.thp.defrag"] != check.Fail {
		t.Errorf("planted host's mem.thp.defrag %v", top.Checks["mem.thp.defrag"])
	}
}
