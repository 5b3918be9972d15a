package expreport

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
	"github.com/dbhost/dbhost/internal/testdb"
	"github.com/dbhost/dbhost/internal/workload"
)

// TestIntegrationRealRun reports a real, small A/A experiment: pgbench
// against a private PostgreSQL, ABBA blocks, every trial stored in a
// results database, decided by internal/stats, read back and rendered.
func TestIntegrationRealRun(t *testing.T) {
	if testing.Short() && !testdb.Required() {
		t.Skip("integration test (-short)")
	}
	testdb.Need(t, "root (private servers run as their service users)", os.Geteuid() == 0)
	_, err := exec.LookPath("pgbench")
	testdb.Need(t, "pgbench", err == nil)

	ctx := context.Background()
	srv := testdb.Postgres(t, testdb.Options{})
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := engine.Locate(ctx, h, workload.Target{Engine: engine.Postgres, Host: srv.Socket, Port: srv.Port, User: "postgres"})
	if err != nil {
		t.Fatal(err)
	}
	spec := workload.Spec{Kind: workload.PGBench, Clients: 2, Jobs: 1, Duration: 2 * time.Second, Warmup: time.Second, Scale: 1}
	if err := workload.Prepare(ctx, tg, spec); err != nil {
		t.Fatal(err)
	}
	fingerprint := func() json.RawMessage {
		fp := map[string]string{}
		for key, p := range map[string]string{"thp.enabled": "/sys/kernel/mm/transparent_hugepage/enabled", "kernel.release": "/proc/sys/kernel/osrelease", "load.avg": "/proc/loadavg"} {
			if b, err := h.ReadFile(p); err == nil {
				fp[key] = strings.TrimSpace(string(b))
			}
		}
		b, _ := json.Marshal(fp)
		return b
	}

	st, err := results.Open(filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	plan := stats.Plan{MaxPerArm: 4, Metric: "throughput"}
	planJSON, _ := json.Marshal(map[string]any{"workload": spec, "protocol": plan})
	e := &results.Experiment{Name: "A/A pgbench", Plan: planJSON, Host: json.RawMessage(`{"cpus":2}`),
		Arms: []results.Arm{{Index: 0, Name: "A"}, {Index: 1, Name: "A again"}}}
	if err := st.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	seq := 0
	for block, order := range [][]int{{0, 1, 1, 0}, {1, 0, 0, 1}} {
		for _, arm := range order {
			tr := results.Trial{Seq: seq, Block: block, Arm: arm, Started: time.Now(), Fingerprint: fingerprint()}
			r, err := workload.Run(ctx, tg, spec)
			if err != nil {
				t.Fatal(err)
			}
			tr.Finished = time.Now()
			tr.OpsPerSec, tr.Transactions, tr.Errors = r.OpsPerSec, r.Ops, r.Errors
			tr.P50, tr.P95, tr.P99 = r.Latency.P50, r.Latency.P95, r.Latency.P99
			for _, s := range r.PerSecond {
				if !s.Warmup {
					tr.Seconds = append(tr.Seconds, results.Second{At: s.At.Seconds(), Ops: s.Ops})
				}
			}
			if err := st.AddTrial(ctx, e.ID, &tr); err != nil {
				t.Fatal(err)
			}
			seq++
		}
	}
	_, trials, err := st.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	ds := decide(t, plan, e.Arms, trials, 0)
	if len(ds) != 1 {
		t.Fatalf("decisions %+v", ds)
	}
	b, _ := json.Marshal(ds)
	if err := st.Finish(ctx, e.ID, results.Done, b, ""); err != nil {
		t.Fatal(err)
	}
	got, trials, err := st.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Experiment: got, Trials: trials}
	html, doc, md := render(t, in)
	in.Decisions = ds
	checkCharts(t, in, doc)
	checkNumbers(t, doc)
	if len(chart(doc, "timeline").all(named("polyline"))) != 8 {
		t.Error("not one line per real trial")
	}
	t.Logf("A/A on this host: %s", ds[0].Reason)
	t.Logf("report of 8 real trials: %.1f KB HTML, %d B Markdown\n%s", float64(len(html))/1024, len(md), md)
}
