package exporter_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/metrics"
	"github.com/dbhost/dbhost/internal/testdb"
)

const (
	nobody = 65534
	// dummies is how many look-alike servers TestUntrustedScrape starts.
	dummies = 1000
	// dummyPort is the first port the dummies claim (-c port=N): below
	// the kernel's ephemeral range, where other tests' servers listen.
	dummyPort = 20000
)

// TestUntrustedScrape: a user starts a thousand processes named postgres
// as nobody, each with its own command line (some data directories with a
// line break). A real audit of the host and a scrape of its result give
// about the series they gave without them, and no label holds anything
// they chose; the audit describes and judges at most engine.MaxUntrusted
// of them and counts the rest.
func TestUntrustedScrape(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a thousand processes and audits the host twice")
	}
	testdb.Need(t, "root (the audit as root, look-alike servers as nobody)", os.Geteuid() == 0)
	// The dummies look like the host's servers to any audit: hold the
	// host lock shared, as the tests that start fake servers do.
	unlock, err := journal.LockShared(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	dir, err := os.MkdirTemp("", "dbhost-untrusted-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := buildDummy(t, dir)

	without := liveScrape(t)
	d := startDummies(t, bin, dir, dummies)
	with := liveScrape(t)
	t.Logf("without the dummies: %d series, %d findings, %d trusted instances; with %d: %d series, %d findings, %d trusted instances",
		without.series, len(without.in.Findings), len(without.trusted), dummies, with.series, len(with.in.Findings), len(with.trusted))

	// Another test may start or stop a private server, or mount a
	// filesystem, meanwhile: the series of a trusted instance, device or
	// mount the first scrape did not see are its doing, not the dummies'
	// (none of them can make one). The dummies add at most what a few
	// host-level findings could.
	if added := unexplained(without, with); len(added) > 20 {
		t.Errorf("%d series with %d untrusted instances, %d without: %d new series no new trusted instance, device or mount explains (at most 20):\n%s",
			with.series, dummies, without.series, len(added), strings.Join(added, "\n"))
	}

	f := with.in.Facts
	described := map[string]bool{}
	for _, in := range f.Instances {
		if !in.Trusted() {
			described[in.Name()] = true
		}
	}
	mine := 0
	for _, in := range f.Instances {
		if !in.Trusted() && d.pids[in.PID] {
			mine++
		}
	}
	if len(described) > engine.MaxUntrusted || mine == 0 {
		t.Errorf("%d untrusted instances described (%d of them dummies), want 1 to %d", len(described), mine, engine.MaxUntrusted)
	}
	if n := f.NotDescribed[engine.Postgres]; n < dummies-engine.MaxUntrusted {
		t.Errorf("%d untrusted postgres instances counted, not described; want at least %d", n, dummies-engine.MaxUntrusted)
	}
	untrusted := 0
	for _, fd := range with.in.Findings {
		if fd.Untrusted {
			untrusted++
		}
	}
	// One finding per check and instance at most, for at most
	// MaxUntrusted instances.
	judged := engine.MaxUntrusted * len(check.All())
	if untrusted == 0 || untrusted > judged {
		t.Errorf("%d findings about untrusted instances, want 1 to %d", untrusted, judged)
	}
	moreTrusted := max(0, len(with.trusted)-len(without.trusted))
	if bound := len(without.in.Findings) + judged + 50*moreTrusted; len(with.in.Findings) > bound {
		t.Errorf("%d findings with the dummies, %d without: over the bound %d", len(with.in.Findings), len(without.in.Findings), bound)
	}

	for name, want := range map[string]float64{
		`dbhost_untrusted_instances{engine="postgres"}`:               dummies,
		`dbhost_untrusted_instances_not_described{engine="postgres"}`: dummies - engine.MaxUntrusted,
	} {
		if v := with.value(name); v < want {
			t.Errorf("%s %v, want at least %v", name, v, want)
		}
	}
	if v := with.sum("dbhost_untrusted_findings"); v != float64(untrusted) {
		t.Errorf("dbhost_untrusted_findings sum to %v, want %d", v, untrusted)
	}
	base := filepath.Base(dir)
	for _, l := range with.labels {
		if described[l.value] || strings.Contains(l.value, base) || strings.Contains(l.value, "\\n") {
			t.Errorf("%s has %s=%q, chosen by an untrusted instance", l.metric, l.name, l.value)
		}
		var port int
		if _, err := fmt.Sscanf(l.value, "postgres:%d", &port); err == nil && port >= dummyPort && port < dummyPort+dummies {
			t.Errorf("%s has %s=%q, a dummy's port", l.metric, l.name, l.value)
		}
	}
}

// scrape is one live audit and what /metrics served from it.
type scrape struct {
	in      *metrics.Input
	series  int
	trusted []string        // names of the trusted instances
	devices map[string]bool // devices under their files
	values  map[string]float64
	labels  []labelValue
}

type labelValue struct{ metric, name, value string }

func (s scrape) value(series string) float64 { return s.values[series] }

func (s scrape) sum(metric string) float64 {
	v := 0.0
	for k, x := range s.values {
		if strings.HasPrefix(k, metric+"{") {
			v += x
		}
	}
	return v
}

// liveScrape audits the live host as dbhost serve does and scrapes the
// result.
func liveScrape(t *testing.T) scrape {
	t.Helper()
	var in *metrics.Input
	e := newExporter(t, func(ctx context.Context) (*metrics.Input, error) {
		h, err := host.Open("/")
		if err != nil {
			return nil, err
		}
		defer h.Close()
		f := facts.Gather(ctx, h, check.GatherOptions(engine.Options{Timeout: 3 * time.Second}))
		in = &metrics.Input{Facts: f, Findings: check.Run(f, check.Selector{})}
		return in, nil
	}, 5*time.Minute)
	e.AuditOnce(context.Background())
	if in == nil {
		t.Fatal("the audit did not complete")
	}
	code, body := get(t, e.Handler(), "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	s := scrape{in: in, values: map[string]float64{}, devices: map[string]bool{}}
	// What the audit trusts, from its facts: not from the metrics, which
	// this test judges.
	for _, i := range in.Facts.Instances {
		if !i.Trusted() {
			continue
		}
		s.trusted = append(s.trusted, i.Name())
		for _, ps := range i.Storage {
			for _, d := range append(append([]string{ps.Device}, ps.Stack...), ps.Physical...) {
				if d != "" {
					s.devices[d] = true
				}
			}
		}
	}
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			s.series++
			var ls []string
			for _, l := range m.Label {
				s.labels = append(s.labels, labelValue{name, l.GetName(), l.GetValue()})
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			s.values[name+"{"+strings.Join(ls, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return s
}

// unexplained lists the series of b that a lacks, but for those naming a
// trusted instance or a device under one (from the facts) or a mount that
// a did not have.
func unexplained(a, b scrape) []string {
	seen := map[string]bool{}
	for _, l := range a.labels {
		seen[l.value] = true
	}
	fresh := map[string]bool{}
	for _, n := range b.trusted {
		fresh[n] = !seen[n]
	}
	for d := range b.devices {
		if !a.devices[d] {
			fresh[d], fresh["device:"+d] = true, true
		}
	}
	// A mount another test made (no look-alike process can make one).
	for _, l := range b.labels {
		if strings.HasPrefix(l.value, "mount:") && !seen[l.value] {
			fresh[l.value] = true
		}
	}
	var out []string
	for k := range b.values {
		if _, ok := a.values[k]; ok {
			continue
		}
		explained := false
		for v, isNew := range fresh {
			if isNew && strings.Contains(k, fmt.Sprintf("%q", v)) {
				explained = true
				break
			}
		}
		if !explained {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// buildDummy builds testdata/dummy as dir/bin/postgres: from C where there
// is a compiler (static where the C library allows: ~44 kB of memory of
// its own per process), else from Go (~460 kB).
func buildDummy(t *testing.T, dir string) string {
	t.Helper()
	binDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "postgres")
	src, err := filepath.Abs(filepath.Join("testdata", "dummy"))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	if cc, err := exec.LookPath("cc"); err == nil {
		out, err = exec.Command(cc, "-O2", "-static", "-o", bin, filepath.Join(src, "dummy.c")).CombinedOutput()
		if err != nil {
			out, err = exec.Command(cc, "-O2", "-o", bin, filepath.Join(src, "dummy.c")).CombinedOutput()
		}
		if err == nil {
			return bin
		}
		t.Logf("cc: %v\n%s", err, out)
	}
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(src, "go")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the dummy: %v\n%s", err, out)
	}
	return bin
}

// running dummies: one process group, so that one signal ends them all.
type running struct {
	pgid int
	pids map[int]bool
}

// startDummies starts n copies of bin as nobody, each with its own
// postgres command line (-D DIR/dN -c port=N; every tenth data directory
// has a line break in its name), in one process group. The group is
// killed at the end of the test, on SIGINT, SIGTERM or SIGHUP, and, should
// the test binary die, by the kernel (Pdeathsig).
func startDummies(t *testing.T, bin, dir string, n int) running {
	t.Helper()
	r := running{pids: map[int]bool{}}
	var (
		mu   sync.Mutex
		cmds []*exec.Cmd
		done bool
	)
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		if r.pgid > 0 && !done {
			syscall.Kill(-r.pgid, syscall.SIGKILL)
		}
		done = true
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	stop := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			kill()
			signal.Reset(sig)
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-stop:
		}
	}()
	t.Cleanup(func() {
		signal.Stop(sigs)
		close(stop)
		kill()
		for _, c := range cmds {
			c.Wait()
		}
	})
	for i := range n {
		data := filepath.Join(dir, fmt.Sprintf("d%d", i))
		if i%10 == 0 {
			data += "\nlooks like a second line"
		}
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(data, nobody, nobody)
		cmd := exec.Command(bin, "-D", data, "-c", fmt.Sprintf("port=%d", dummyPort+i))
		cmd.Dir = dir
		cmd.Env = []string{"GOMAXPROCS=1", "GOGC=off"} // for the Go dummy
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: nobody, Gid: nobody},
			Setpgid:    true, Pgid: r.pgid,
			Pdeathsig: syscall.SIGKILL,
		}
		mu.Lock()
		if done {
			mu.Unlock()
			t.Fatal("interrupted")
		}
		err := cmd.Start()
		if err == nil {
			cmds = append(cmds, cmd)
			if r.pgid == 0 {
				r.pgid = cmd.Process.Pid
			}
			r.pids[cmd.Process.Pid] = true
		}
		mu.Unlock()
		if err != nil {
			t.Fatalf("start dummy %d: %v", i, err)
		}
	}
	return r
}
