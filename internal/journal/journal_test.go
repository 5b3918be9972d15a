package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func knob(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "knob")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return Current(string(b))
}

func TestCurrent(t *testing.T) {
	for in, want := range map[string]string{
		"always [madvise] never\n":       "madvise",
		"none [mq-deadline] kyber bfq\n": "mq-deadline",
		"60\n":                           "60",
		"32768\t60999\n":                 "32768 60999",
		"[always] defer defer+madvise\n": "always",
	} {
		if got := Current(in); got != want {
			t.Errorf("Current(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSetRestore(t *testing.T) {
	a := knob(t, "60\n")
	b := knob(t, "always [madvise] never\n")
	j, err := Open(filepath.Join(t.TempDir(), "j"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Set(a, "1"); err != nil {
		t.Fatal(err)
	}
	if err := j.Set(b, "never"); err != nil {
		t.Fatal(err)
	}
	if err := j.Set(a, "10"); err != nil { // a second change of the same knob
		t.Fatal(err)
	}
	if read(t, a) != "10" || read(t, b) != "never" {
		t.Fatalf("not applied: %q %q", read(t, a), read(t, b))
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if read(t, a) != "60" || read(t, b) != "madvise" {
		t.Errorf("not restored: %q %q", read(t, a), read(t, b))
	}
	if _, err := os.Stat(j.file); !os.IsNotExist(err) {
		t.Error("journal file left after a complete restore")
	}
}

// A journal left by a crashed run is restored by the next Open.
func TestRecoverAfterCrash(t *testing.T) {
	a := knob(t, "1\n")
	file := filepath.Join(t.TempDir(), "j")
	b, _ := json.Marshal([]Change{{Path: a, Old: "60", New: "1"}})
	os.WriteFile(file, b, 0o600)
	if _, err := Open(file, nil); err != nil {
		t.Fatal(err)
	}
	if read(t, a) != "60" {
		t.Errorf("crash journal not restored: %q", read(t, a))
	}
	// An unreadable journal is kept for a person and refused, not ignored.
	os.WriteFile(file, []byte("{garbage"), 0o600)
	if _, err := Open(file, nil); err == nil || !strings.Contains(err.Error(), "unreadable journal") {
		t.Errorf("garbage journal: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Error("garbage journal removed")
	}
}

func TestLockSharedInsideExclusive(t *testing.T) {
	unlock, err := Lock("dbhost-test-lock")
	if err != nil {
		t.Fatal(err)
	}
	// Must not deadlock on the process's own exclusive hold.
	release, err := LockShared("dbhost-test-lock")
	if err != nil {
		t.Fatal(err)
	}
	release()
	unlock()
}

// Root's lock lives where only root can write: a lock file another user
// planted (a link to elsewhere, or a file held locked for ever) is
// refused, never followed.
func TestLockFileNotPlantable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's lock directory")
	}
	name := fmt.Sprintf("dbhost-test-plant-%d", os.Getpid())
	file, err := lockFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(file, LockDir+"/") {
		t.Fatalf("root's lock %s is outside %s", file, LockDir)
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, file); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file)
	if release, err := Lock(name); err == nil {
		release()
		t.Fatal("a lock file that is a link was followed")
	}
	os.Remove(file)
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if release, err := Lock(name); err == nil {
		release()
		t.Fatal("another user's lock file was used")
	}
	os.Remove(file)
	release, err := Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	release()
	os.Remove(file)
}

// LockContext says once that it waits while another holds the lock, gives
// up when its context ends, and takes the lock at once when it is free
// (without saying anything) or soon after it is released.
func TestLockContextWaits(t *testing.T) {
	name := fmt.Sprintf("dbhost-test-wait-%d", os.Getpid())
	if file, err := lockFile(name); err == nil {
		defer os.Remove(file)
	}
	unlock, err := Lock(name) // another open file: flock conflicts as with another process
	if err != nil {
		t.Fatal(err)
	}
	waited := 0
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if release, err := LockContext(ctx, name, func() { waited++ }); err == nil {
		release()
		t.Fatal("took a lock another holds")
	} else if !errors.Is(err, context.DeadlineExceeded) || waited != 1 {
		t.Errorf("while held: %v, said it waits %d times", err, waited)
	}
	got := make(chan error, 1)
	waited = 0
	go func() {
		release, err := LockContext(context.Background(), name, func() { waited++ })
		if err == nil {
			release()
		}
		got <- err
	}()
	time.Sleep(3 * lockPoll)
	unlock()
	select {
	case err := <-got:
		if err != nil || waited != 1 {
			t.Errorf("after the release: %v, said it waits %d times", err, waited)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not taken 5 s after its release")
	}
	waited = 0
	release, err := LockContext(context.Background(), name, func() { waited++ })
	if err != nil || waited != 0 {
		t.Fatalf("free lock: %v, said it waits %d times", err, waited)
	}
	release()
}
