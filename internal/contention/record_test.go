package contention

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/testdb"
)

var record = flag.Bool("record", false, "re-record testdata/rec from this host (root; starts PostgreSQL, MariaDB and pgbench)")

// recording is testdata/rec/manifest.json: what was running, and the
// counters that are not files (per-CPU perf counts, query counters) at
// each snapshot.
type recording struct {
	Recorded  time.Time        `json:"recorded"`
	Kernel    string           `json:"kernel"`
	Note      string           `json:"note"`
	Instances []recInstance    `json:"instances"`
	Snapshots []recordSnapshot `json:"snapshots"`
}

type recInstance struct {
	Engine       engine.Engine `json:"engine"`
	Flavor       string        `json:"flavor"`
	PID          int           `json:"pid"`
	Port         int           `json:"port"`
	Source       string        `json:"query_source"`
	Transactions bool          `json:"transactions,omitempty"`
	Own          []int         `json:"own"`
}

type recordSnapshot struct {
	Dir string `json:"dir"`
	// At is the time since the first snapshot's /proc/stat read.
	At      time.Duration  `json:"at_ns"`
	CPUs    map[int]uint64 `json:"perf_per_cpu"`
	Queries []uint64       `json:"queries"`
	What    string         `json:"what"`
}

// TestRecordFixtures writes testdata/rec: four snapshots of a private
// PostgreSQL and MariaDB, idle and then under pgbench (PostgreSQL) and a
// SELECT loop (MariaDB). Run: go test ./internal/contention -run
// TestRecordFixtures -record
func TestRecordFixtures(t *testing.T) {
	if !*record {
		t.Skip("re-record with -record")
	}
	pg := testdb.Postgres(t, testdb.Options{})
	my := testdb.MariaDB(t, testdb.Options{})
	pgbenchInit(t, pg)
	h := liveHost(t)
	s, err := NewSampler(context.Background(), h, Options{PIDs: []int{pg.PID, my.PID}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.targets) != 2 || s.cpu == nil {
		t.Fatalf("%d targets, per-CPU counters %v (%s)", len(s.targets), s.cpu, s.cpuWhy)
	}
	out := filepath.Join("testdata", "rec")
	os.RemoveAll(out)
	rec := recording{Recorded: time.Now().UTC(), Kernel: h.Read("/proc/sys/kernel/osrelease").Value,
		Note: "a private PostgreSQL and MariaDB on this VM: t0-t1 idle, pgbench -c 4 starts between t1 and t2, t2-t3 pgbench running and 300 SELECT 1 on MariaDB"}
	for _, tg := range s.targets {
		ri := recInstance{Engine: tg.in.Engine, Flavor: tg.in.Flavor, PID: tg.in.PID, Port: tg.in.Port, Source: tg.q.source, Transactions: tg.q.transactions}
		if tg.q.err != nil {
			t.Fatalf("%s: %v", tg.in.Name(), tg.q.err)
		}
		for p := range tg.q.own {
			ri.Own = append(ri.Own, p)
		}
		rec.Instances = append(rec.Instances, ri)
	}
	var first time.Time
	snap := func(name, what string) {
		rs := recordSnapshot{Dir: name, What: what}
		dir := filepath.Join(out, name)
		var err error
		if rs.CPUs, err = s.cpu.read(); err != nil {
			t.Fatal(err)
		}
		copyProc(t, dir, "stat")
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		rs.At = now.Sub(first)
		copyProc(t, dir, "loadavg")
		for _, tg := range s.targets {
			n, err := tg.q.read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rs.Queries = append(rs.Queries, n)
		}
		table, err := engine.ReadTable(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range s.targets {
			for _, pid := range descendants(table, tg.in.PID) {
				for _, f := range []string{"stat", "status", "comm"} {
					copyProc(t, dir, fmt.Sprintf("%d/%s", pid, f))
				}
				tids, _ := h.Tasks(pid)
				for _, tid := range tids {
					copyProc(t, dir, fmt.Sprintf("%d/task/%d/status", pid, tid))
				}
			}
		}
		rec.Snapshots = append(rec.Snapshots, rs)
	}
	snap("t0", "idle")
	time.Sleep(2 * time.Second)
	snap("t1", "idle")
	db := mariaDB(t, my) // connected before t2: its thread is counted
	wait := pgbenchRun(t, pg, 7, filepath.Join(pg.Dir, "pgbench"))
	time.Sleep(1500 * time.Millisecond)
	snap("t2", "pgbench running")
	done := make(chan error)
	go func() {
		var err error
		for i := 0; i < 300 && err == nil; i++ {
			_, err = db.Exec("SELECT 1")
		}
		done <- err
	}()
	time.Sleep(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	snap("t3", "pgbench running; 300 SELECT 1 on MariaDB since t2")
	wait()
	b, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "manifest.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyProc copies /proc/NAME into dir/proc/NAME; a file that vanished is
// left out, as the sampler would skip it.
func copyProc(t *testing.T, dir, name string) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + name)
	if err != nil {
		if os.IsNotExist(err) || strings.Contains(err.Error(), "no such process") {
			return
		}
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "proc", name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mariaDB(t testing.TB, s *testdb.Server) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User = "unix", s.Socket, "root"
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	return db
}

// loadRecording reads testdata/rec/manifest.json.
func loadRecording(t testing.TB) recording {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rec", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r recording
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	for i := range r.Instances {
		sort.Ints(r.Instances[i].Own)
	}
	return r
}
