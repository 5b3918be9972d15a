package mem

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/testdb"
)

const (
	demoMiB  = 64
	demoSize = demoMiB << 20
	pageSize = 4096
)

// demo is a running testdata/shmdemo.c.
type demo struct {
	mode, variant string
	procs         [3]int // parent, child 1, child 2 (0 once exited)
	start, end    uint64 // the parent's mapping (0 once unmapped)
	shmid         int    // sysv
	name          string // posix: "/dbhost-test-..."
	stdin         io.WriteCloser
	cmd           *exec.Cmd
}

var (
	demoOnce sync.Once
	demoBin  string
	demoErr  error
)

// TestMain removes the compiled demo when the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if demoBin != "" {
		os.RemoveAll(filepath.Dir(demoBin))
	}
	os.Exit(code)
}

// buildDemo compiles shmdemo.c once per test binary.
func buildDemo(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("gcc")
	testdb.Need(t, "gcc (scripts/install-test-deps installs it)", err == nil)
	demoOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dbhost-shmdemo-")
		if err != nil {
			demoErr = err
			return
		}
		demoBin = filepath.Join(dir, "shmdemo")
		out, err := exec.Command("gcc", "-O1", "-Wall", "-o", demoBin, "testdata/shmdemo.c", "-lrt").CombinedOutput()
		if err != nil {
			demoErr = fmt.Errorf("gcc: %v\n%s", err, out)
		}
	})
	if demoErr != nil {
		t.Fatal(demoErr)
	}
	return demoBin
}

// startDemo runs the demo and waits until the children have written. The
// object is removed when the test ends, however it ends.
func startDemo(t *testing.T, mode, variant string) *demo {
	t.Helper()
	bin := buildDemo(t)
	d := &demo{mode: mode, variant: variant, name: fmt.Sprintf("/dbhost-test-%d-%d", os.Getpid(), time.Now().UnixNano()), shmid: -1}
	d.cmd = exec.Command(bin, mode, variant, strconv.Itoa(demoMiB), d.name)
	d.cmd.Stderr = os.Stderr
	var err error
	if d.stdin, err = d.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stdin.Close()
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-done
		}
		// An orphaned object outlives the demo: remove it here.
		if d.shmid >= 0 {
			unix.SysvShmCtl(d.shmid, unix.IPC_RMID, nil)
		}
		if mode == "posix" {
			os.Remove("/dev/shm" + d.name)
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	var ln string
	select {
	case ln = <-line:
	case <-time.After(30 * time.Second):
		t.Fatal("shmdemo did not get ready")
	}
	f := strings.Fields(ln)
	if len(f) != 7 || f[0] != "ready" {
		t.Fatalf("shmdemo: %q", ln)
	}
	for i := 0; i < 3; i++ {
		d.procs[i], _ = strconv.Atoi(f[1+i])
	}
	d.start, _ = strconv.ParseUint(f[4], 16, 64)
	d.end, _ = strconv.ParseUint(f[5], 16, 64)
	if mode == "sysv" {
		d.shmid, _ = strconv.Atoi(f[6])
	}
	return d
}

// pids are the demo's live processes.
func (d *demo) pids() []int {
	var out []int
	for _, p := range d.procs {
		if p > 0 {
			out = append(out, p)
		}
	}
	return out
}

// findRegion returns the demo's region in a report, failing unless it is
// there exactly once.
func (d *demo) findRegion(t *testing.T, r *Report) Region {
	t.Helper()
	var found []Region
	for _, rg := range r.Regions {
		if d.matches(rg) {
			found = append(found, rg)
		}
	}
	if len(found) != 1 {
		t.Fatalf("demo region found %d times, want once; regions: %+v", len(found), r.Regions)
	}
	return found[0]
}

func (d *demo) matches(rg Region) bool {
	switch d.mode {
	case "sysv":
		return rg.ShmID != nil && int(*rg.ShmID) == d.shmid
	case "posix":
		return strings.TrimSuffix(rg.Name, " (deleted)") == "/dev/shm"+d.name
	}
	if rg.Kind != KindAnon {
		return false
	}
	for _, pid := range rg.PIDs {
		if pid == d.procs[0] {
			return true
		}
	}
	return false
}
