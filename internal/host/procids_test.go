package host

import (
	"os"
	"testing"
)

// The one-read table entry of a live process is what procfs makes of its
// stat and status files.
func TestProcIDsIsProcfs(t *testing.T) {
	h, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	pids, err := h.PIDs()
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	n := 0
	for _, pid := range pids {
		var got ProcIDs
		got, buf, err = h.ProcIDs(pid, buf)
		if err != nil {
			continue // exited
		}
		st, err1 := h.ProcStat(pid)
		status, err2 := h.Status(pid)
		if err1 != nil || err2 != nil {
			continue
		}
		want := ProcIDs{Name: status.Name, PPID: st.PPID, UID: int(status.UIDs[1]), GID: int(status.GIDs[1])}
		if got != want && pid != os.Getpid() {
			t.Errorf("pid %d: ProcIDs %+v, procfs %+v", pid, got, want)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no process read")
	}
}

func TestParseStatusIDs(t *testing.T) {
	got, err := parseStatusIDs([]byte("Name:\tpostgres\nUmask:\t0077\nState:\tS (sleeping)\nPPid:\t1\nUid:\t0\t112\t112\t112\nGid:\t5\t120\t120\t120\nVmRSS:\t  100 kB\n"))
	if want := (ProcIDs{Name: "postgres", PPID: 1, UID: 112, GID: 120}); err != nil || got != want {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	if got, _ := parseStatusIDs([]byte("Name:\tx kB\nPPid:\t2\nUid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n")); got.Name != "x" {
		t.Errorf("name %q: procfs trims a kB suffix", got.Name)
	}
	for _, bad := range []string{"", "Name:\tx\nPPid:\t1\nUid:\t1\t1\t1\t1\n", "Name:\tx\nPPid:\ty\nUid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n", "Name:\tx\nPPid:\t1\nUid:\t1\t1\nGid:\t1\t1\t1\t1\n"} {
		if _, err := parseStatusIDs([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
