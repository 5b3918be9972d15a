package stats

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/testdb"
)

// benchFixture is testdata/pgbench.json: real pgbench trials recorded on
// this project's test host, one sample (tps) per trial, in run order.
type benchFixture struct {
	Recorded    string            `json:"recorded"`
	Host        string            `json:"host"`
	Server      string            `json:"server"`
	Setup       string            `json:"setup"`
	Experiments []benchExperiment `json:"experiments"`
}

type benchExperiment struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Workload    string            `json:"workload"`
	Arms        map[string]string `json:"arms"` // arm → extra pgbench arguments or PGOPTIONS of its trials
	Trials      []benchTrial      `json:"trials"`
}

type benchTrial struct {
	Arm string  `json:"arm"`
	TPS float64 `json:"tps"`
}

func (e benchExperiment) arm(name string) []float64 {
	var out []float64
	for _, tr := range e.Trials {
		if tr.Arm == name {
			out = append(out, tr.TPS)
		}
	}
	return out
}

const (
	benchScale   = "5"
	benchSeconds = "5"
	benchClients = "4"
)

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)

// TestRecordPgbench re-records testdata/pgbench.json on a private
// PostgreSQL (never the host's own servers): an A/A experiment (both arms
// synchronous_commit=on) and an A/B one (on against off), each in ABBA
// blocks as `dbhost experiment` runs them. It runs only when asked:
//
//	DBHOST_RECORD_STATS=1 go test -count=1 -run TestRecordPgbench ./internal/stats/
func TestRecordPgbench(t *testing.T) {
	if os.Getenv("DBHOST_RECORD_STATS") == "" {
		t.Skip("recorder: set DBHOST_RECORD_STATS=1 to re-record testdata/pgbench.json")
	}
	pgbench, err := exec.LookPath("pgbench")
	testdb.Need(t, "pgbench", err == nil)
	srv := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"fsync": "on", "shared_buffers": "128MB"}})
	ctx := context.Background()
	conn := []string{"-h", srv.Socket, "-p", strconv.Itoa(srv.Port), "-U", "postgres"}
	if out, err := exec.CommandContext(ctx, pgbench, append(append([]string{"-i", "-q", "-s", benchScale}, conn...), "postgres")...).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	// trial runs pgbench once; an arm is "PGOPTIONS=…" or extra pgbench
	// arguments.
	trial := func(workload []string, arm string) float64 {
		args := append([]string{"-n", "-c", benchClients, "-j", "2", "-T", benchSeconds}, workload...)
		env := os.Environ()
		if opt, ok := strings.CutPrefix(arm, "PGOPTIONS="); ok {
			env = append(env, "PGOPTIONS="+opt)
		} else if arm != "" {
			args = append(args, strings.Fields(arm)...)
		}
		cmd := exec.CommandContext(ctx, pgbench, append(append(args, conn...), "postgres")...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pgbench: %v\n%s", err, out)
		}
		m := tpsLine.FindSubmatch(out)
		if m == nil {
			t.Fatalf("no tps in pgbench output:\n%s", out)
		}
		tps, _ := strconv.ParseFloat(string(m[1]), 64)
		return tps
	}
	run := func(name, desc, workload string, arms map[string]string, blocks int) benchExperiment {
		e := benchExperiment{Name: name, Description: desc, Workload: workload, Arms: arms}
		trial(strings.Fields(workload), arms["A"]) // warm-up, not recorded
		for b := range blocks {
			order := []string{"A", "B", "B", "A"}
			if b%2 == 1 {
				order = []string{"B", "A", "A", "B"}
			}
			for _, arm := range order {
				tps := trial(strings.Fields(workload), arms[arm])
				t.Logf("%s block %d arm %s: %.1f tps", name, b+1, arm, tps)
				e.Trials = append(e.Trials, benchTrial{Arm: arm, TPS: tps})
			}
		}
		return e
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fx := benchFixture{
		Recorded: time.Now().UTC().Format("2006-01-02"),
		Host:     fmt.Sprintf("linux %s, %d CPUs, virtual machine shared with other test runs", strings.TrimSpace(string(kernel)), runtime.NumCPU()),
		Server:   serverVersion(t, srv.DataDir),
		Setup: fmt.Sprintf("pgbench scale %s, %s clients, 2 threads, %s s per trial, fsync=on, shared_buffers=128MB; one unrecorded warm-up trial per experiment; ABBA/BAAB blocks",
			benchScale, benchClients, benchSeconds),
		Experiments: []benchExperiment{
			run("select-aa", "A/A: select-only, the same in both arms", "-S", map[string]string{"A": "", "B": ""}, 5),
			run("select-prepared", "A/B: select-only, base simple protocol, treatment prepared statements", "-S", map[string]string{"A": "-M simple", "B": "-M prepared"}, 4),
			run("tpcb-aa", "A/A: TPC-B-like writes, synchronous_commit=on in both arms", "", map[string]string{"A": "PGOPTIONS=-c synchronous_commit=on", "B": "PGOPTIONS=-c synchronous_commit=on"}, 5),
			run("tpcb-sync-commit", "A/B: TPC-B-like writes, base synchronous_commit=on, treatment off", "", map[string]string{"A": "PGOPTIONS=-c synchronous_commit=on", "B": "PGOPTIONS=-c synchronous_commit=off"}, 3),
		},
	}
	b, err := json.MarshalIndent(fx, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := safefile.WriteBytes("testdata/pgbench.json", 0o644, append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

func serverVersion(t *testing.T, dataDir string) string {
	b, err := os.ReadFile(dataDir + "/PG_VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return "PostgreSQL " + strings.TrimSpace(string(b))
}
