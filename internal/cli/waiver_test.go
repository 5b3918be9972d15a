package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/fixture/derive"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
	"github.com/dbhost/dbhost/internal/waiver"
)

// On mem-swapfile (collected 2026-11), mem.swappiness fails with a
// kernel-value fix and mysql.hardening.empty_passwords fails critical.
const waiversText = `waivers:
  - check: mem.swappiness
    subject: host
    reason: swap is the batch job's cushion (TICKET-42)
    expires: 2027-01-31
  - check: mysql.hardening.empty_passwords
    subject: mysql:3306
    reason: lab box
    expires: 2026-01-01
  - check: mem.dirty
    subject: postgres:9999
    reason: a server long gone
`

func writeWaivers(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "waivers.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAuditWaivedText: a waived failure moves from its severity group to
// WAIVED with its reason, expiry and place, and leaves the failure count
// and the exit status; an expired waiver's finding fails again and the
// audit says the waiver expired; a waiver naming nothing is reported stale.
func TestAuditWaivedText(t *testing.T) {
	snap := fixture.Path("mem-swapfile")
	w := writeWaivers(t, waiversText)
	code, plain, _ := runCLI(t, "audit", "--from", snap, "--color", "never", "--no-waivers")
	if code != ExitFindings || !strings.Contains(plain, "✗ mem.swappiness  [host]") || strings.Contains(plain, "WAIVED") {
		t.Fatalf("without waivers: exit %d\n%s", code, plain)
	}
	code, out, stderr := runCLI(t, "audit", "--from", snap, "--color", "never", "--waivers", w)
	if code != ExitFindings {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	live, waived, _ := strings.Cut(out, "\nWAIVED (1): failing, accepted by a waiver; not counted as failures\n")
	if waived == "" {
		t.Fatalf("no WAIVED section:\n%s", out)
	}
	if strings.Contains(live, "mem.swappiness") {
		t.Errorf("the waived finding is still among the live failures:\n%s", live)
	}
	for _, want := range []string{
		"~ mem.swappiness [host] vm.swappiness does not suit a database host (warning) waived: swap is the batch job's cushion (TICKET-42) (until 2027-01-31, " + w + ":2) COULD NOT JUDGE",
		"WAIVERS (" + w + ") - waiver of mysql.hardening.empty_passwords on mysql:3306 (" + w + ":6) expired 2026-01-01: its finding counts again (it was: lab box) -",
		"- waiver of mem.dirty on postgres:9999 (" + w + ":10) matches no finding of this audit: a stale",
	} {
		if !strings.Contains(flat(waived), want) {
			t.Errorf("lacks %q:\n%s", want, waived)
		}
	}
	if !strings.Contains(live, "CRITICAL (1)\n  ✗ mysql.hardening.empty_passwords") {
		t.Errorf("the finding of an expired waiver does not fail:\n%s", live)
	}
	count := regexp.MustCompile(`Summary: (\d+) failed \((\d+) critical, (\d+) warning, (\d+) info\)(, \d+ waived)?,`)
	before, after := count.FindStringSubmatch(plain), count.FindStringSubmatch(out)
	if before == nil || after == nil || before[5] != "" || after[5] != ", 1 waived" || atoi(before[1])-1 != atoi(after[1]) || atoi(before[3])-1 != atoi(after[3]) {
		t.Errorf("summary: %q then %q", before, after)
	}

	// The exit status: only the waived finding selected.
	if code, _, _ := runCLI(t, "audit", "--from", snap, "--only", "mem.swappiness", "--no-waivers"); code != ExitFindings {
		t.Errorf("mem.swappiness without waivers: exit %d", code)
	}
	if code, out, _ := runCLI(t, "audit", "--from", snap, "--only", "mem.swappiness", "--waivers", w); code != ExitOK || strings.Contains(out, "stale") {
		t.Errorf("mem.swappiness waived: exit %d (want 0; the other checks' waivers not looked at)\n%s", code, out)
	}
	// An expired waiver counts for nothing.
	if code, _, _ := runCLI(t, "audit", "--from", snap, "--only", "mysql.hardening.empty_passwords", "--fail-on", "critical", "--waivers", w); code != ExitFindings {
		t.Errorf("expired waiver: exit %d, want 1", code)
	}
}

// flat is text with every run of white space one space: what the text
// report says, however it wraps.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

// TestAuditWaivedJSON: the waived finding keeps its status and carries
// `waiver`; the summary counts it apart; `waivers` says what the file did.
func TestAuditWaivedJSON(t *testing.T) {
	snap := fixture.Path("mem-swapfile")
	w := writeWaivers(t, waiversText)
	_, out, stderr := runCLI(t, "audit", "--from", snap, "--format", "json", "--waivers", w)
	var doc struct {
		Summary struct {
			Fail, Waived int
		}
		Findings []check.Finding
		Waivers  *waiver.Outcome
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	n := 0
	for _, fd := range doc.Findings {
		if fd.Waiver == nil {
			continue
		}
		n++
		if fd.ID != "mem.swappiness" || fd.Status != check.Fail || fd.Waiver.Reason != "swap is the batch job's cushion (TICKET-42)" ||
			fd.Waiver.Source != w+":2" || fd.Waiver.Expires.Format("2006-01-02T15:04:05Z07:00") != "2027-01-31T23:59:59Z" {
			t.Errorf("waived finding: %+v %+v", fd, fd.Waiver)
		}
	}
	if n != 1 || doc.Summary.Waived != 1 {
		t.Errorf("%d waived findings, summary %+v", n, doc.Summary)
	}
	o := doc.Waivers
	if o == nil || o.Source != w || o.Waived != 1 || len(o.Expired) != 1 || len(o.Stale) != 1 || o.Stale[0].Where != w+":10" {
		t.Errorf("waivers: %+v", o)
	}
	// No file: the document is as before waivers existed.
	_, out, _ = runCLI(t, "audit", "--from", snap, "--format", "json", "--no-waivers")
	if strings.Contains(out, `"waive`) {
		t.Errorf("no waiver file, yet the JSON speaks of waivers")
	}
}

// TestWaiverFlagErrors: a broken or missing named file is an error naming
// it, before anything is judged; the two flags contradict.
func TestWaiverFlagErrors(t *testing.T) {
	snap := fixture.Path("mem-swapfile")
	bad := writeWaivers(t, "waivers:\n  - {check: mem.swappiness, subject: host, reason: r, expires: soon}\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"audit", "--waivers", bad}, bad + `:2: expires "soon": want a date`},
		{[]string{"fix", "--plan", "--waivers", bad}, bad + ":2: expires"},
		{[]string{"audit", "--waivers", bad + ".none"}, "--waivers: open " + bad + ".none: no such file"},
		{[]string{"audit", "--waivers", bad, "--no-waivers"}, "--waivers and --no-waivers contradict each other"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, append(c.args, "--from", snap, "--root", t.TempDir())...)
		if code != ExitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}

// TestFixLeavesWaivedAlone: with mem.swappiness waived, fix --plan plans
// no vm.swappiness and says the finding was waived, with its reason;
// everything else in the plan is unchanged. fix --out renders no
// vm.swappiness line and says why in README.txt.
func TestFixLeavesWaivedAlone(t *testing.T) {
	snap := fixture.Path("mem-swapfile")
	w := writeWaivers(t, waiversText)
	root := t.TempDir()
	_, without, stderr := runCLI(t, "fix", "--plan", "--from", snap, "--root", root, "--no-waivers")
	if !strings.Contains(without, "+vm.swappiness = 1\n") {
		t.Fatalf("the plan without waivers does not set vm.swappiness:\n%s\n%s", without, stderr)
	}
	_, with, stderr := runCLI(t, "fix", "--plan", "--from", snap, "--root", root, "--waivers", w)
	if strings.Contains(with, "vm.swappiness = 1") || strings.Contains(with, "mem.swappiness:") {
		t.Errorf("the waived finding is planned:\n%s\n%s", with, stderr)
	}
	if !strings.Contains(with, "Waivers (waived findings are left alone):\n  - mem.swappiness (host) is waived, not fixed: swap is the batch job's cushion (TICKET-42) (until 2027-01-31, "+w+":2)\n") {
		t.Errorf("the plan does not say mem.swappiness is waived:\n%s", with)
	}
	// Every other line is the same: what differs is about mem.swappiness,
	// the waivers, or the counts.
	differs := func(a, b string) []string {
		var out []string
		bl := strings.Split(b, "\n")
		for _, l := range strings.Split(a, "\n") {
			if !slices.Contains(bl, l) {
				out = append(out, l)
			}
		}
		return out
	}
	// The sysctl file's line lists the findings it is for.
	allowed := regexp.MustCompile(`swappiness|^\+$|^Host plan: 2[45] fixes|^Fixes for 2[45] findings|^Waivers \(|^  - waiver of |^file /etc/sysctl.d/60-dbhost.conf \(`)
	for _, l := range append(differs(without, with), differs(with, without)...) {
		if !allowed.MatchString(l) {
			t.Errorf("line changed by waiving mem.swappiness: %q", l)
		}
	}
	if !strings.Contains(without, "Fixes for 25 findings") || !strings.Contains(with, "Fixes for 24 findings") {
		t.Errorf("want 25 findings fixed without the waiver, 24 with it")
	}

	// --apply builds the same plan: the waived finding's value is not written.
	if os.Geteuid() == 0 {
		tree := copyTree(t)
		code, applied, stderr := runCLI(t, "fix", "--apply", "--from", snap, "--root", tree, "--waivers", w)
		b, err := os.ReadFile(filepath.Join(tree, "etc/sysctl.d/60-dbhost.conf"))
		if code == ExitError || err != nil || strings.Contains(string(b), "vm.swappiness = 1\n") || !strings.Contains(string(b), "vm.overcommit_memory") ||
			!strings.Contains(applied, "mem.swappiness (host) is waived, not fixed") {
			t.Errorf("--apply: exit %d, %v\n%s\n%s\n%s", code, err, b, applied, stderr)
		}
	}

	out := filepath.Join(t.TempDir(), "fixes")
	if code, _, stderr := runCLI(t, "fix", "--out", out, "--from", snap, "--waivers", w); code != ExitOK {
		t.Fatalf("fix --out: %d %s", code, stderr)
	}
	sysctl, err := os.ReadFile(filepath.Join(out, "etc", "sysctl.d", "60-dbhost.conf"))
	if err != nil {
		entries, _ := os.ReadDir(out)
		t.Fatalf("%v (in %v)", err, entries)
	}
	readme, _ := os.ReadFile(filepath.Join(out, "README.txt"))
	if strings.Contains(string(sysctl), "swappiness") || !strings.Contains(string(sysctl), "vm.overcommit_memory") {
		t.Errorf("fix --out sysctl file:\n%s", sysctl)
	}
	if !strings.Contains(string(readme), "mem.swappiness (host) is waived, not fixed") {
		t.Errorf("README.txt does not say mem.swappiness is waived:\n%s", readme)
	}
}

// rootTree makes a root-owned tree holding etc/dbhost/waivers.yaml.
func rootTree(t *testing.T, text string) (root, file string) {
	t.Helper()
	testdb.Need(t, "root (a tree owned by root)", os.Geteuid() == 0)
	root = t.TempDir()
	os.Chmod(root, 0o755)
	file = filepath.Join(root, "etc", "dbhost", "waivers.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, file
}

// TestSnapshotKeepsWaivers: collect records the waiver file and the
// ownership of its path, so that audit --from shows the host's waivers;
// the recording is grafted onto a recorded host with a failing finding.
// A group-writable file recorded so is refused by audit --from as it is
// live.
func TestSnapshotKeepsWaivers(t *testing.T) {
	root, file := rootTree(t, waiversText)
	grafted := func(t *testing.T) string {
		t.Helper()
		snap := filepath.Join(t.TempDir(), "tree.tar.gz")
		if code, _, stderr := runCLI(t, "collect", "--root", root, "-o", snap); code != ExitOK {
			t.Fatalf("collect: %s", stderr)
		}
		rec, err := derive.Read(snap)
		if err != nil {
			t.Fatal(err)
		}
		a, err := derive.Read(fixture.Path("mem-swapfile"))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"lstat:", "lstat:etc", "lstat:etc/dbhost", "lstat:etc/dbhost/waivers.yaml", "stat:etc/dbhost/waivers.yaml"} {
			p, ok := rec.Probes[k]
			if !ok && !strings.HasPrefix(k, "stat:") { // an untrusted file is not looked at further
				t.Fatalf("collect did not record %s", k)
			}
			if !ok {
				continue
			}
			if _, had := a.Probes[k]; !had {
				a.Probes[k] = p
			}
		}
		if b, ok := rec.File("etc/dbhost/waivers.yaml"); ok {
			a.SetFile("etc/dbhost/waivers.yaml", b)
		}
		out := filepath.Join(t.TempDir(), "waived.tar.gz")
		if err := a.Write(out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	snap := grafted(t)
	_, out, stderr := runCLI(t, "audit", "--from", snap, "--color", "never")
	if !strings.Contains(out, "WAIVED (1)") || !strings.Contains(flat(out), "waived: swap is the batch job's cushion (TICKET-42) (until 2027-01-31, /etc/dbhost/waivers.yaml:2)") {
		t.Errorf("audit --from does not show the recorded waivers:\n%s\n%s", out, stderr)
	}
	if _, out, _ := runCLI(t, "audit", "--from", snap, "--no-waivers"); strings.Contains(out, "WAIVED") {
		t.Errorf("--no-waivers applied the snapshot's waivers")
	}

	os.Chmod(file, 0o664)
	snap = grafted(t)
	code, _, stderr := runCLI(t, "audit", "--from", snap)
	if code != ExitError || !strings.Contains(stderr, "/etc/dbhost/waivers.yaml is not read: /etc/dbhost/waivers.yaml is writable by group or others (mode 0664)") {
		t.Errorf("group-writable recorded file: exit %d, %s", code, stderr)
	}
	if code, _, _ := runCLI(t, "audit", "--from", snap, "--no-waivers"); code != ExitFindings {
		t.Errorf("--no-waivers on it: exit %d", code)
	}
	// A snapshot that recorded no waiver file (every recorded host) has none.
	if _, out, _ := runCLI(t, "audit", "--from", fixture.Path("mem-swapfile")); strings.Contains(out, "WAIVE") {
		t.Errorf("a snapshot without a waiver file shows waivers")
	}
}

// TestLiveDefaultWaivers: on a live root, /etc/dbhost/waivers.yaml is read
// when root owns it and nobody else can write it, refused otherwise.
func TestLiveDefaultWaivers(t *testing.T) {
	root, file := rootTree(t, "waivers:\n  - {check: mem.dirty, subject: postgres:9999, reason: gone}\n")
	_, out, stderr := runCLI(t, "audit", "--root", root, "--only", "mem.dirty")
	if !strings.Contains(out, "WAIVERS (/etc/dbhost/waivers.yaml)") || !strings.Contains(flat(out), "waiver of mem.dirty on postgres:9999 (/etc/dbhost/waivers.yaml:2) matches no finding") {
		t.Errorf("the host's file was not read:\n%s\n%s", out, stderr)
	}
	os.Chmod(filepath.Dir(file), 0o775)
	code, _, stderr := runCLI(t, "audit", "--root", root, "--only", "mem.dirty")
	if code != ExitError || !strings.Contains(stderr, "/etc/dbhost is writable by group or others (mode 0775)") {
		t.Errorf("group-writable directory: exit %d, %s", code, stderr)
	}
	_, out, _ = runCLI(t, "audit", "--root", root, "--only", "mem.dirty", "--no-waivers")
	if strings.Contains(out, "WAIVERS") {
		t.Errorf("--no-waivers read the file")
	}
}

// TestServeReloadsWaivers: serve's audit reads the file again each cycle:
// a changed file applies without a restart; a broken one keeps the last
// good file, says so once in the log, and its state reaches the audit
// result (metrics.Input.Waivers) for the exporter.
func TestServeReloadsWaivers(t *testing.T) {
	root, file := rootTree(t, waiversText)
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	f := fixture.Facts(t, "mem-swapfile")
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	var sf serveFlags
	cycle := func() (*waiver.Status, *check.Waiver) {
		t.Helper()
		fds := check.Run(f, check.Selector{})
		st := sf.applyWaivers(h, fds, check.Selector{}, f, logger)
		for _, fd := range fds {
			if fd.ID == "mem.swappiness" {
				return st, fd.Waiver
			}
		}
		t.Fatal("no mem.swappiness finding")
		return nil, nil
	}
	st, w := cycle()
	if !st.Valid || w == nil || !strings.Contains(w.Reason, "TICKET-42") || st.Outcome.Waived != 1 || log.Len() != 0 {
		t.Fatalf("first cycle: %+v %+v log %q", st, w, log.String())
	}
	write := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Replace(waiversText, "TICKET-42", "TICKET-43", 1))
	if st, w = cycle(); !st.Valid || w == nil || !strings.Contains(w.Reason, "TICKET-43") {
		t.Errorf("changed file not applied: %+v %+v", st, w)
	}
	write(waiversText + "  - {check: mem.swappiness, subject: host, reason: twice}\n")
	st, w = cycle()
	if st.Valid || !strings.Contains(st.Error, "/etc/dbhost/waivers.yaml:13: mem.swappiness on host waived again") || w == nil || !strings.Contains(w.Reason, "TICKET-43") {
		t.Errorf("broken file: %+v %+v", st, w)
	}
	cycle()
	if n := strings.Count(log.String(), "waiver file not loaded"); n != 1 {
		t.Errorf("%d log lines for a broken file over two cycles, want 1:\n%s", n, log.String())
	}
	os.Remove(file)
	if st, w = cycle(); !st.Valid || w != nil || st.Outcome != nil || !strings.Contains(log.String(), "waiver file loaded again") {
		t.Errorf("file removed: %+v %+v\n%s", st, w, log.String())
	}

	// The audit serve runs carries the state.
	write(waiversText)
	sf = serveFlags{root: root, interval: time.Minute, dbTimeout: time.Second, noConnect: true}
	in, err := sf.audit(logger)(context.Background())
	if err != nil || in.Waivers == nil || !in.Waivers.Valid || in.Waivers.Outcome == nil || in.Waivers.Outcome.Source != waiver.DefaultPath {
		t.Errorf("serve's audit: %+v %v", in, err)
	}
}
