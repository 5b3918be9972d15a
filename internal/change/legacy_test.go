package change_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
)

// TestRecoverVersion1 recovers a journal as today's release writes it (a
// bare array, version 1) holding one change of each kind it knew that
// needs no server: a kernel value (kind "", Path and Old), the
// experiment's scratch directory (experiment.workdir), a file apply wrote
// and a process limit of a process that has ended since.
func TestRecoverVersion1(t *testing.T) {
	tmp := t.TempDir()
	knob := filepath.Join(tmp, "knob")
	os.WriteFile(knob, []byte("1\n"), 0o600)
	work := filepath.Join(tmp, change.WorkDirPrefix+"v1")
	os.Mkdir(work, 0o711)
	os.WriteFile(filepath.Join(work, "tx.log"), []byte("1 2 3\n"), 0o600)
	root := t.TempDir()
	const conf = "/etc/sysctl.d/60-dbhost.conf"
	content := []byte("vm.swappiness = 1\n")
	os.MkdirAll(filepath.Join(root, "etc/sysctl.d"), 0o755)
	os.WriteFile(filepath.Join(root, conf), content, 0o644)
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	data := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	v1 := fmt.Sprintf(`[
 {"path": %q, "old": "60", "new": "1"},
 {"kind": "experiment.workdir", "what": "scratch directory", "data": %s},
 {"kind": "file", "what": "file %s", "data": %s},
 {"kind": "rlimit", "what": "limit", "data": %s}
]`, knob, data(map[string]string{"path": work}), conf,
		data(map[string]any{"root": root, "path": conf, "existed": false, "uid": 0, "gid": 0, "new_sum": safefile.Sum(content), "made_dirs": []string{}}),
		data(map[string]any{"pid": ended.Process.Pid, "start": 1, "uid": 0, "gid": 0, "item": "nofile", "old": "1024:4096", "new": "4096:4096"}))
	file := filepath.Join(tmp, "journal.json")
	os.WriteFile(file, []byte(v1), 0o600)
	if err := change.Recover(file, change.Config{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(knob); string(b) != "60\n" {
		t.Errorf("kernel value %q after recover", b)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("scratch directory left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, conf)); !os.IsNotExist(err) {
		t.Errorf("file apply wrote left: %v", err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("journal left after a full recovery: %v", err)
	}
}

// TestRecoverVersion3Refused: a journal of a later format is kept and
// refused with its version named.
func TestRecoverVersion3Refused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "journal.json")
	os.WriteFile(file, []byte(`{"version":3,"changes":[{"kind":"kernel","data":{}}]}`), 0o600)
	err := change.Recover(file, change.Config{})
	if err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("Recover: %v", err)
	}
	if _, err := change.Open(file, change.Config{}); err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("Open: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal("version 3 journal removed")
	}
}

// TestKindsOnePerChangeKind: every change kind has its undo, and the
// caller's own kinds join them.
func TestKindsOnePerChangeKind(t *testing.T) {
	k := change.Kinds(change.Config{More: journal.Kinds{"test.own": nil}})
	for _, kind := range []string{change.KindKernel, change.KindSysfs, change.KindFile, change.KindSetting, change.KindRlimit,
		change.KindRestart, change.KindWorkDir, "experiment.workdir", "test.own"} {
		if _, ok := k[kind]; !ok {
			t.Errorf("no undo for kind %q", kind)
		}
	}
}
