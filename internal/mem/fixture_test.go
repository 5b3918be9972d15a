package mem

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/safefile"
)

// Fixtures are /proc subsets recorded from real runs of shmdemo on this
// host: the demo's processes (status, stat, maps, smaps, smaps_rollup,
// numa_maps, comm, cmdline), /proc/meminfo, its row of /proc/sysvipc/shm,
// the tmpfs lines of mountinfo, node and huge page counters. What are system
// calls, not files — stat(2) of /proc/PID/map_files/START-END and of
// /dev/shm files, statfs(2) of the tmpfs mounts — are recorded in
// stats.json and replayed through the Stater interface: a copied map_files
// entry would be an ordinary file with none of the object's blocks.
//
// Re-record (root): DBHOST_RECORD_MEM=1 go test -run TestRecordFixtures ./internal/mem/
const fixtureDir = "testdata/fixtures"

var fixtureScenarios = []struct{ mode, variant string }{
	{"anon", "stay"}, {"anon", "exit"}, {"sysv", "stay"}, {"sysv", "orphan"}, {"posix", "stay"}, {"posix", "orphan"},
}

// recorded replays stats.json.
type recorded struct {
	Files map[string]recStat `json:"stat"`
	FS    map[string]recFS   `json:"statfs"`
}

type recStat struct {
	host.FileStat
	Err string `json:"err,omitempty"`
}

type recFS struct {
	host.FSStat
	Err string `json:"err,omitempty"`
}

func errFrom(path, msg string) error {
	e := errors.New(msg)
	switch msg {
	case syscall.EPERM.Error():
		e = syscall.EPERM
	case syscall.EACCES.Error():
		e = syscall.EACCES
	case syscall.ENOENT.Error():
		e = syscall.ENOENT
	}
	return &fs.PathError{Op: "stat", Path: path, Err: e}
}

func (r *recorded) StatFile(p string) (host.FileStat, error) {
	s, ok := r.Files[p]
	if !ok {
		return host.FileStat{}, errFrom(p, syscall.ENOENT.Error())
	}
	if s.Err != "" {
		return host.FileStat{}, errFrom(p, s.Err)
	}
	return s.FileStat, nil
}

func (r *recorded) Statfs(p string) (host.FSStat, error) {
	s, ok := r.FS[p]
	if !ok {
		return host.FSStat{}, errFrom(p, syscall.ENOENT.Error())
	}
	if s.Err != "" {
		return host.FSStat{}, errFrom(p, s.Err)
	}
	return s.FSStat, nil
}

// demoMeta is what the fixture records about the demo.
type demoMeta struct {
	Mode, Variant string
	Procs         [3]int
	Start, End    uint64
	ShmID         int
	Name          string
}

func (d *demo) meta() demoMeta {
	return demoMeta{d.mode, d.variant, d.procs, d.start, d.end, d.shmid, d.name}
}

func fromMeta(m demoMeta) *demo {
	return &demo{mode: m.Mode, variant: m.Variant, procs: m.Procs, start: m.Start, end: m.End, shmid: m.ShmID, name: m.Name}
}

func TestRecordFixtures(t *testing.T) {
	if os.Getenv("DBHOST_RECORD_MEM") == "" {
		t.Skip("set DBHOST_RECORD_MEM=1 to re-record testdata/fixtures (root)")
	}
	needRoot(t)
	for _, sc := range fixtureScenarios {
		d := startDemo(t, sc.mode, sc.variant)
		recordFixture(t, d, filepath.Join(fixtureDir, sc.mode+"-"+sc.variant))
	}
}

func recordFixture(t *testing.T, d *demo, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	write := func(rel string, b []byte) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(rel string) []byte {
		b, err := os.ReadFile("/" + rel)
		if err != nil {
			t.Fatal(err)
		}
		write(rel, b)
		return b
	}
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	rec := recorded{Files: map[string]recStat{}, FS: map[string]recFS{}}
	stat := func(p string) {
		st, err := h.StatFile(p)
		r := recStat{FileStat: st}
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				r.Err = pe.Err.Error()
			} else {
				r.Err = err.Error()
			}
		}
		rec.Files[p] = r
	}
	// Mounts first: the maps lines are classified with them.
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, ln := range strings.Split(string(mi), "\n") {
		f := strings.Fields(ln)
		if len(f) > 4 && (f[4] == "/dev" || f[4] == "/dev/shm" || strings.Contains(ln, " - hugetlbfs ")) {
			keep = append(keep, ln)
		}
	}
	write("proc/self/mountinfo", []byte(strings.Join(keep, "\n")+"\n"))
	mounts := parseMountinfo([]byte(strings.Join(keep, "\n")))
	for _, m := range mounts.list {
		st, err := h.Statfs(m.point)
		r := recFS{FSStat: st}
		if err != nil {
			r.Err = err.Error()
		}
		rec.FS[m.point] = r
	}
	for _, pid := range d.pids() {
		base := "proc/" + strconv.Itoa(pid) + "/"
		for _, f := range []string{"status", "stat", "comm", "cmdline", "smaps", "smaps_rollup", "numa_maps"} {
			copyFile(base + f)
		}
		ParseMaps(copyFile(base+"maps"), func(hd *Header) {
			if _, ok := mounts.classify(hd); ok {
				stat(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, hd.Start, hd.End))
			}
		})
	}
	if d.mode == "posix" {
		write("dev/shm"+d.name, nil)
		stat("/dev/shm" + d.name)
	}
	copyFile("proc/meminfo")
	shm, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(shm), "\n")
	out := []string{lines[0]}
	for _, ln := range lines[1:] {
		if f := strings.Fields(ln); len(f) > 1 && f[1] == strconv.Itoa(d.shmid) {
			out = append(out, ln)
		}
	}
	write("proc/sysvipc/shm", []byte(strings.Join(out, "\n")+"\n"))
	nodes, _ := filepath.Glob("/sys/devices/system/node/node*/meminfo")
	for _, n := range nodes {
		copyFile(strings.TrimPrefix(n, "/"))
	}
	pools, _ := filepath.Glob("/sys/kernel/mm/hugepages/hugepages-*")
	for _, p := range pools {
		copyFile(strings.TrimPrefix(p, "/") + "/nr_hugepages")
		copyFile(strings.TrimPrefix(p, "/") + "/free_hugepages")
	}
	write("etc/passwd", []byte("root:x:0:0:root:/root:/bin/bash\n"))
	js, err := json.MarshalIndent(&rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	write("stats.json", append(js, '\n'))
	meta, _ := json.MarshalIndent(d.meta(), "", "  ")
	if err := safefile.Write(filepath.Join(dir, "demo.json"), 0o644, func(w io.Writer) error {
		_, err := w.Write(append(meta, '\n'))
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// openFixture scans a recorded scenario.
func openFixture(t *testing.T, name string, opt Options) (*demo, *Report) {
	t.Helper()
	dir := filepath.Join(fixtureDir, name)
	var m demoMeta
	b, err := os.ReadFile(filepath.Join(dir, "demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var rec recorded
	b, err = os.ReadFile(filepath.Join(dir, "stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if opt.Stater == nil {
		opt.Stater = &rec
	}
	r, err := Scan(t.Context(), h, opt)
	if err != nil {
		t.Fatal(err)
	}
	return fromMeta(m), r
}
