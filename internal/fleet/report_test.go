package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fixture"
)

// fleetHosts are 20 recorded hosts: one setting changed in each, from THP
// and swappiness to I/O schedulers and network backlogs.
var fleetHosts = []string{"baseline", "mem-thp-always", "mem-thp-never", "mem-thp-always-ptes0", "mem-swappiness-0",
	"mem-swappiness-1", "mem-swapfile", "storage-sched-bfq", "storage-vda-default", "storage-vda-tuned",
	"limits-nofile-1024", "net-somaxconn-128", "net-tuned", "mem-dirty-high", "mem-overcommit-1", "tuned-profile",
	"time-chrony", "sec-apparmor", "redis-open", "pg-hba-open"}

var (
	fleetOnce  sync.Once
	fleetSnaps []Snapshot
	fleetErrs  []LoadError
)

// fleetReport loads the recorded fleet with LoadAll (in parallel, interned),
// plus a file that is not a snapshot and a missing one, once per test
// binary, and builds the report.
func fleetReport(t *testing.T) (*Report, []Snapshot) {
	t.Helper()
	fleetOnce.Do(func() { fleetSnaps, fleetErrs = loadFleet(t) })
	if fleetSnaps == nil {
		t.Fatal("the recorded fleet could not be loaded")
	}
	return Build(fleetSnaps, fleetErrs), fleetSnaps
}

func loadFleet(t *testing.T) ([]Snapshot, []LoadError) {
	var files []string
	for _, n := range fleetHosts {
		files = append(files, fixture.Path(n))
	}
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.tar.gz")
	if err := os.WriteFile(junk, []byte("not an archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	files = append(files, junk, filepath.Join(dir, "missing.tar.gz"))
	calls := 0
	snaps, errs := LoadAll(context.Background(), files, 3, func(done, total int) {
		calls++
		if done != calls || total != len(files) {
			t.Errorf("progress(%d, %d) at call %d", done, total, calls)
		}
	})
	if len(snaps) != len(fleetHosts) || len(errs) != 2 || calls != len(files) {
		t.Fatalf("%d snapshots, errors %v, %d progress calls", len(snaps), errs, calls)
	}
	for i, s := range snaps {
		if s.File != files[i] {
			t.Fatalf("snapshot %d is %s, want %s (order of the files)", i, s.File, files[i])
		}
	}
	if errs[0].File != junk || !strings.Contains(errs[0].Error, "not a usable dbhost snapshot") ||
		!strings.Contains(errs[1].Error, "no such file") {
		t.Errorf("errors %+v", errs)
	}
	return snaps, errs
}

func hostByBase(r *Report, name string) *HostReport {
	for i := range r.Hosts {
		if base(r.Hosts[i].ID) == name+".tar.gz" {
			return &r.Hosts[i]
		}
	}
	return nil
}

func TestReportRecordedFleet(t *testing.T) {
	r, snaps := fleetReport(t)
	if r.Schema != ReportSchema || r.Summary.Hosts != 20 || r.Summary.Unreadable != 2 || len(r.Errors) != 2 {
		t.Fatalf("summary %+v", r.Summary)
	}

	// Counts, recomputed from the snapshots.
	fails, crit, failing := map[string]int{}, 0, 0
	for _, s := range snaps {
		for _, f := range s.Findings {
			if f.Status == check.Fail {
				fails[s.File]++
				if f.Severity == check.Critical {
					crit++
				}
			}
		}
		failing += fails[s.File]
	}
	if r.Summary.FailingFindings != failing || r.Summary.Critical != crit || failing == 0 {
		t.Errorf("summary %+v, want %d failing, %d critical", r.Summary, failing, crit)
	}
	for _, h := range r.Hosts {
		if h.Failing != fails[h.ID] || len(h.Failures) != h.Failing {
			t.Errorf("%s: %d failing, %d listed, want %d", h.ID, h.Failing, len(h.Failures), fails[h.ID])
		}
	}

	// Hosts: the farthest from the majority first; the distance is
	// recomputed from the host's rare settings and failures.
	for i, h := range r.Hosts {
		if i > 0 && r.Hosts[i-1].Distance < h.Distance {
			t.Errorf("host %d (%s, distance %v) before %s (%v)", i-1, r.Hosts[i-1].ID, r.Hosts[i-1].Distance, h.ID, h.Distance)
		}
		var rs []float64
		for _, o := range h.OffMajority {
			rs = append(rs, o.Rarity)
		}
		for _, f := range h.RareFailures {
			rs = append(rs, f.Rarity)
		}
		if d := distance(rs); d != h.Distance || (len(rs) > 0) != (d > 0) {
			t.Errorf("%s: distance %v, want %v from %v", h.ID, h.Distance, d, rs)
		}
	}
	// Checks: those that tell hosts apart, most telling first, then the
	// fleet-wide ones, then those passing everywhere.
	group := 0
	for i, c := range r.Checks {
		g := checkGroup(c)
		if g < group || (i > 0 && g == checkGroup(r.Checks[i-1]) && r.Checks[i-1].Separation < c.Separation) {
			t.Errorf("check %d %s (group %d, separation %v) out of order", i, c.ID, g, c.Separation)
		}
		group = g
		judged := c.Fail + c.Unknown + c.Pass
		if c.FleetWide != (c.Fail >= 2 && float64(c.Fail) >= 0.95*float64(judged)) || c.Title == "" {
			t.Errorf("check %+v: fleet-wide flag", c)
		}
		if want := Rarity(min(c.Fail, c.Pass), max(c.Fail, c.Pass), c.Fail+c.Pass); c.Separation != want {
			t.Errorf("check %s: separation %v, want %v", c.ID, c.Separation, want)
		}
	}
	if r.Summary.FleetWide == 0 || !r.Checks[0].FleetWide && checkGroup(r.Checks[0]) != 0 {
		t.Errorf("summary %+v, first check %+v", r.Summary, r.Checks[0])
	}
	defrag := checkSummary(r, "mem.thp.defrag")
	if defrag == nil || defrag.Fail != 2 || defrag.Pass != 18 || defrag.Unknown != 0 {
		t.Errorf("mem.thp.defrag %+v: fails with defrag=always and defer+madvise only", defrag)
	}

	// The worst verdict per host and check.
	for host, want := range map[string]check.Status{"mem-thp-always": check.Fail, "mem-thp-always-ptes0": check.Fail, "baseline": check.Pass, "mem-thp-never": check.Pass} {
		if h := hostByBase(r, host); h == nil || h.Checks["mem.thp.defrag"] != want {
			t.Errorf("%s: mem.thp.defrag %v, want %s", host, h, want)
		}
	}

	// Settings off the majority.
	thp := spread(r, "thp/enabled")
	want := []ValueHosts{
		{Value: "madvise", Count: 17},
		{Value: "always", Count: 2, Hosts: []string{fixture.Path("mem-thp-always-ptes0"), fixture.Path("mem-thp-always")}},
		{Value: "never", Count: 1, Hosts: []string{fixture.Path("mem-thp-never")}},
	}
	if thp == nil || thp.Majority != "madvise" || thp.Tie || thp.Observed != 20 || thp.Off != 3 || !reflect.DeepEqual(thp.Values, want) {
		t.Errorf("thp/enabled %+v", thp)
	}
	if sw := spread(r, "sysctl/vm.swappiness"); sw == nil || sw.Majority != "60" || sw.Off != 2 {
		t.Errorf("vm.swappiness %+v", sw)
	}
	if thp.Rarity != Rarity(1, 17, 20) || thp.Rarity != 3.67 {
		t.Errorf("thp/enabled rarity %v: 'never' is held by 1 of 20 against 17", thp.Rarity)
	}
	for i := 1; i < len(r.Settings); i++ {
		if x, y := r.Settings[i-1], r.Settings[i]; x.Rarity < y.Rarity || (x.Tie && !y.Tie) {
			t.Errorf("setting %s (rarity %v) before %s (%v)", x.Key, x.Rarity, y.Key, y.Rarity)
		}
	}
	always := hostByBase(r, "mem-thp-always")
	wantOff := []OffSetting{{"thp/enabled", "always", "madvise", 2, 20, Rarity(2, 17, 20)}}
	if got := always.OffMajority; len(got) < 1 || !reflect.DeepEqual(got[len(got)-1:], wantOff) || got[0].Key != "thp/defrag" || got[0].Rarity < wantOff[0].Rarity {
		t.Errorf("mem-thp-always off the majority: %+v, want thp/defrag then %+v", always.OffMajority, wantOff)
	}
	if b := hostByBase(r, "baseline"); len(b.OffMajority) != 0 {
		t.Errorf("baseline off the majority: %+v", b.OffMajority)
	}
	if tuned := hostByBase(r, "storage-vda-tuned"); len(tuned.OffMajority) != 3 || tuned.Distance == 0 {
		t.Errorf("storage-vda-tuned: %d settings off the majority, want 3 (vda once, whatever database paths it holds), distance %v: %+v", len(tuned.OffMajority), tuned.Distance, tuned.OffMajority)
	}
	for _, sp := range r.Settings {
		for _, v := range sp.Values {
			if strings.Contains(v.Value, "<redacted>") {
				t.Errorf("%s: redacted value counted", sp.Key)
			}
		}
	}
}

func checkSummary(r *Report, id string) *CheckSummary {
	for i := range r.Checks {
		if r.Checks[i].ID == id {
			return &r.Checks[i]
		}
	}
	return nil
}

func spread(r *Report, key string) *SettingSpread {
	for i := range r.Settings {
		if r.Settings[i].Key == key {
			return &r.Settings[i]
		}
	}
	return nil
}

var (
	colRe  = regexp.MustCompile(`<th class="col( fw)?" data-sort="verdict" title="[^"]*"><span>([^<]+)</span></th>`)
	rowRe  = regexp.MustCompile(`(?s)<tr><th class="host"><a href="#(h\d+)">[^<]*</a> <span class="note">([^<]+)</span></th><td class="num">([\d.]+)</td><td class="num">(\d+)</td><td class="num">(\d+)</td>(.*?)</tr>`)
	cellRe = regexp.MustCompile(`<td class="([^" ]+)( fw)?">`)
)

// The HTML matrix holds the report's cells in its order: a column per check
// that fails or cannot be judged somewhere, those failing fleet-wide last
// (marked, for the page to hide), a row per host.
func TestReportHTMLMatrix(t *testing.T) {
	r, _ := fleetReport(t)
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	var cols []string
	fw := map[string]bool{}
	for _, m := range colRe.FindAllStringSubmatch(page, -1) {
		cols = append(cols, m[2])
		fw[m[2]] = m[1] != ""
	}
	var wantCols []string
	for _, c := range r.Checks {
		if c.Fail+c.Unknown > 0 {
			wantCols = append(wantCols, c.ID)
			if fw[c.ID] != c.FleetWide {
				t.Errorf("column %s: fleet-wide %v, want %v", c.ID, fw[c.ID], c.FleetWide)
			}
		}
	}
	if !reflect.DeepEqual(cols, wantCols) || len(cols) == 0 {
		t.Fatalf("columns %v, want %v", cols, wantCols)
	}
	rows := rowRe.FindAllStringSubmatch(page, -1)
	if len(rows) != 20 {
		t.Fatalf("%d matrix rows", len(rows))
	}
	cell := map[[2]string]string{}
	for i, m := range rows {
		if want := base(r.Hosts[i].ID); m[2] != want {
			t.Errorf("row %d is %s, want %s", i, m[2], want)
		}
		cells := cellRe.FindAllStringSubmatch(m[6], -1)
		if len(cells) != len(cols) {
			t.Fatalf("row %s: %d cells, %d columns", m[2], len(cells), len(cols))
		}
		for j, c := range cells {
			cell[[2]string{strings.TrimSuffix(m[2], ".tar.gz"), cols[j]}] = c[1]
			if (c[2] != "") != fw[cols[j]] {
				t.Errorf("row %s, column %s: fleet-wide mark %q", m[2], cols[j], c[2])
			}
		}
		if h := r.Hosts[i]; m[3] != num(h.Distance) {
			t.Errorf("row %s: distance %s, want %v", m[2], m[3], h.Distance)
		}
		if !strings.Contains(page, `<section class="host" id="`+m[1]+`">`) {
			t.Errorf("row %s links to #%s, which is not a host section", m[2], m[1])
		}
	}
	var wide *CheckSummary
	for i := range r.Checks {
		if r.Checks[i].FleetWide && r.Checks[i].Fail == 20 {
			wide = &r.Checks[i]
			break
		}
	}
	if wide == nil {
		t.Fatal("no check fails on all 20 recorded hosts")
	}
	for k, want := range map[[2]string]string{
		{"mem-thp-always", "mem.thp.defrag"}:          "f-warning",
		{"baseline", "mem.thp.defrag"}:                "p",
		{"mem-thp-never", "mem.thp.defrag"}:           "p",
		{"baseline", wide.ID}:                         "f-" + wide.Severity.String(),
		{"storage-vda-tuned", "storage.read_ahead"}:   "p",
		{"storage-vda-default", "storage.read_ahead"}: "f-warning",
	} {
		if got := cell[k]; got != want {
			t.Errorf("%s × %s: %q, want %q", k[0], k[1], got, want)
		}
	}
	for _, want := range []string{"junk.tar.gz", "not a usable dbhost snapshot", "missing.tar.gz", `id="errors"`,
		"<code>thp/enabled</code>", `<code class="clip" title="always">always</code> <span class="hold">2</span>`,
		`<code>` + wide.ID + `</code> 20/20</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	assertSelfContained(t, page)
}

var (
	tagRe       = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	attrValueRe = regexp.MustCompile(`="[^"]*"`)
	anchorRe    = regexp.MustCompile(` href="#[a-z0-9]+"`) // a link within the page
	badTagRe    = regexp.MustCompile(`(?i)^<(link|img|iframe|object|embed|base|form)\b|\s(on[a-z]+|src|href|action|srcset)\b`)
)

// assertSelfContained fails unless the page loads nothing and runs only its
// own script, allowed by the hash of its text in the CSP.
func assertSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "@import", "url(", "javascript:"} {
		if i := strings.Index(page, bad); i >= 0 {
			t.Errorf("page holds %q: it must load nothing", page[i:min(len(page), i+60)])
		}
	}
	// Every tag, its attribute values blanked (html/template quotes them and
	// escapes < and > in them): no element that loads, no handler, no link
	// but to the page itself.
	for _, tag := range tagRe.FindAllString(page, -1) {
		names := attrValueRe.ReplaceAllString(anchorRe.ReplaceAllString(tag, ""), "")
		if m := badTagRe.FindString(names); m != "" {
			t.Errorf("page holds %q in %q", m, tag[:min(len(tag), 80)])
		}
	}
	if n := strings.Count(page, "<script"); n != 1 {
		t.Fatalf("%d scripts, want the page's one", n)
	}
	body := page[strings.Index(page, "<script>")+len("<script>"):]
	body = body[:strings.Index(body, "</script>")]
	sum := sha256.Sum256([]byte(body))
	csp := "default-src &#39;none&#39;; style-src &#39;unsafe-inline&#39;; script-src &#39;sha256-" +
		strings.ReplaceAll(base64.StdEncoding.EncodeToString(sum[:]), "+", "&#43;") + "&#39;"
	if body != pageScript || !strings.Contains(page, `<meta http-equiv="Content-Security-Policy" content="`+csp+`" />`) {
		t.Errorf("the CSP does not allow exactly the page's script")
	}
}

// Snapshot contents are hostile: a host name, a file name or a setting
// value cannot add markup to the page.
func TestReportEscapes(t *testing.T) {
	evil := "<script>alert(1)</script>\"><img src=x onerror=alert(2)>\x1b]0;pwned\x07\u202e\x9b"
	mk := func(file, host, v string, status check.Status) Snapshot {
		return Snapshot{File: file, Hostname: host, CollectedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Instances: []string{"postgres:5432"},
			Settings: SettingMap{"db/postgres:5432/search_path": v, "sysctl/vm.swappiness": "60"},
			Findings: []Finding{{ID: "mem.swappiness", Subject: evil, Status: status, Severity: check.Warning}}}
	}
	snaps := []Snapshot{mk("a/"+evil+".tar.gz", evil, evil, check.Fail), mk("b.tar.gz", "db2", "public", check.Pass), mk("c.tar.gz", "db3", "public", check.Pass)}
	r := Build(snaps, []LoadError{{File: evil, Error: evil}})
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Count(page, "<script") != 1 || strings.Contains(page, "<img") {
		t.Errorf("markup from a snapshot reached the page")
	}
	assertSelfContained(t, page)
	if strings.ContainsAny(page, "\x1b\x07\u202e\u009b") {
		t.Errorf("control or reordering characters from a snapshot reached the page")
	}
	if !strings.Contains(page, `&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;img src=x onerror=alert(2)&gt;\x1b]0;pwned\a\u202e\x9b`) {
		t.Errorf("the hostile text is not shown escaped")
	}
	j, err := json.Marshal(r)
	if err != nil || !json.Valid(j) {
		t.Fatal(err)
	}
}

// Hand-made snapshots: a tie has no majority and puts no host off it; a
// file given twice is two hosts.
func TestReportTiesAndDuplicates(t *testing.T) {
	mk := func(file, v string) Snapshot {
		return Snapshot{File: file, Hostname: "h", Settings: SettingMap{"sysctl/vm.swappiness": v, "thp/enabled": "never"}}
	}
	r := Build([]Snapshot{mk("x.tar.gz", "1"), mk("y.tar.gz", "60"), mk("x.tar.gz", "1"), mk("z.tar.gz", "60")}, nil)
	ids := []string{}
	for _, h := range r.Hosts {
		ids = append(ids, h.ID)
		if len(h.OffMajority) != 0 {
			t.Errorf("%s off the majority of a tie: %v", h.ID, h.OffMajority)
		}
	}
	sort.Strings(ids)
	if !reflect.DeepEqual(ids, []string{"x.tar.gz", "x.tar.gz #2", "y.tar.gz", "z.tar.gz"}) {
		t.Errorf("hosts %v", ids)
	}
	if len(r.Settings) != 1 {
		t.Fatalf("settings %+v: only vm.swappiness differs", r.Settings)
	}
	sp := r.Settings[0]
	if !sp.Tie || sp.Majority != "" || sp.Off != 4 || len(sp.Values) != 2 || len(sp.Values[0].Hosts) != 2 || r.Summary.SettingsOff != 0 {
		t.Errorf("tie %+v, summary %+v", sp, r.Summary)
	}
}

// The JSON shape is documented in docs/fleet.md: these names are its
// contract.
func TestReportJSONShape(t *testing.T) {
	s := Snapshot{File: "a.tar.gz", Hostname: "db1", Settings: SettingMap{"thp/enabled": "always"},
		Findings: []Finding{{ID: "mem.thp.enabled", Subject: "host", Status: check.Fail, Severity: check.Warning}}}
	s2 := s
	s2.File, s2.Settings = "b.tar.gz", SettingMap{"thp/enabled": "never"}
	s2.Findings = []Finding{{ID: "mem.thp.enabled", Subject: "host", Status: check.Pass, Severity: check.Warning}}
	s3 := s2
	s3.File = "c.tar.gz"
	j, err := json.Marshal(Build([]Snapshot{s, s2, s3}, []LoadError{{File: "d.tar.gz", Error: "gone"}}))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	json.Unmarshal(j, &v)
	keys := func(m any) []string {
		var out []string
		for k := range m.(map[string]any) {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	for path, want := range map[string][]string{
		"":                        {"checks", "errors", "hosts", "schema", "settings", "summary"},
		"summary":                 {"checks_failing", "critical", "failing_findings", "fleet_wide", "hosts", "hosts_failing", "settings_off_majority", "unreadable"},
		"hosts.0":                 {"as_root", "checks", "collected_at", "critical", "distance", "failing", "failures", "hostname", "id", "instances", "kernel", "label", "off_majority", "rare_failures", "unknown"},
		"hosts.0.failures.0":      {"id", "problem", "severity", "subject"},
		"hosts.0.off_majority.0":  {"holders", "key", "majority", "observed", "rarity", "value"},
		"hosts.0.rare_failures.0": {"failing", "id", "judged", "rarity"},
		"checks.0":                {"fail", "fleet_wide", "id", "pass", "problem", "separation", "severity", "title", "unknown"},
		"settings.0":              {"key", "kind", "majority", "observed", "off", "rarity", "tie", "values"},
		"settings.0.values.1":     {"count", "hosts", "value"},
		"errors.0":                {"error", "file"},
	} {
		var node any = v
		for _, p := range strings.Split(path, ".") {
			switch n := node.(type) {
			case map[string]any:
				if p != "" {
					node = n[p]
				}
			case []any:
				i := int(p[0] - '0')
				node = n[i]
			}
		}
		if got := keys(node); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: keys %v, want %v", path, got, want)
		}
	}
	if v["schema"] != ReportSchema {
		t.Errorf("schema %v", v["schema"])
	}
}

// A report read back from its JSON renders the same matrix: each cell is
// the check's worst status, coloured by the check's severity.
func TestReportHTMLFromJSON(t *testing.T) {
	r, _ := fleetReport(t)
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	matrix := func(r *Report) string {
		var b bytes.Buffer
		if err := WriteHTML(&b, r); err != nil {
			t.Fatal(err)
		}
		s := b.String()
		i := strings.Index(s, `<section id="matrix">`)
		return s[i : i+strings.Index(s[i:], "</section>")]
	}
	want, got := matrix(r), matrix(&back)
	if !strings.Contains(want, `class="f-warning"`) {
		t.Fatal("no failing cell in the matrix")
	}
	// Where a check failed with another severity than its catalog's on
	// some subject, the JSON no longer says so: allow that difference only.
	norm := regexp.MustCompile(`class="f-[a-z]+"`)
	if norm.ReplaceAllString(got, "F") != norm.ReplaceAllString(want, "F") {
		t.Errorf("the matrix from JSON differs in more than severities")
	}
}
