package journal

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHelperLockChild is the child of TestPassLock: it tries to take the
// lock named in its environment and says whether it held it within 300 ms.
func TestHelperLockChild(t *testing.T) {
	name := os.Getenv("DBHOST_TEST_LOCK_CHILD")
	if name == "" {
		t.Skip("helper process")
	}
	got := make(chan *Held, 1)
	go func() {
		h, err := Hold(name)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(0)
		}
		got <- h
	}()
	select {
	case h := <-got:
		fmt.Println("held")
		h.Release()
	case <-time.After(300 * time.Millisecond):
		fmt.Println("waiting")
	}
	os.Exit(0)
}

func lockChild(t *testing.T, name string, prepare func(*exec.Cmd)) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DBHOST_TEST_LOCK_CHILD="+name)
	if prepare != nil {
		prepare(cmd)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPassLock: a command the holder starts holds the lock through the
// descriptor passed (it does not wait), gives nothing up when it ends, and
// a command not passed the lock, or passed another file, waits.
func TestPassLock(t *testing.T) {
	name := fmt.Sprintf("dbhost-test-pass-%d", os.Getpid())
	file, err := lockFile(name)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file)
	h, err := Hold(name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()

	if got := lockChild(t, name, nil); got != "waiting" {
		t.Errorf("a command not passed the lock: %q, want waiting", got)
	}
	if got := lockChild(t, name, h.Pass); got != "held" {
		t.Errorf("a command passed the lock: %q, want held", got)
	}
	// Another file on the descriptor the variable names.
	other, err := os.CreateTemp(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	forged := func(cmd *exec.Cmd) {
		cmd.ExtraFiles = []*os.File{other}
		cmd.Env = append(cmd.Env, PassEnv+"="+name+"=3")
	}
	if got := lockChild(t, name, forged); got != "waiting" {
		t.Errorf("a command passed another file: %q, want waiting", got)
	}
	// The holder still holds it after the command released its copy.
	fd, err := unix.Open(file, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err == nil {
		t.Error("the lock was free after the command that was passed it ended")
	}
}
