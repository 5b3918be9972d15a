package journal

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// New journals are version 2; a version 1 file (a bare array, what earlier
// releases wrote) is recovered; a version this code does not know is
// refused by name and kept.
func TestVersions(t *testing.T) {
	undone = nil
	dir := t.TempDir()
	j, err := Open(filepath.Join(dir, "new"), testKinds)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record("test.note", "n", "two"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(j.File())
	if !strings.HasPrefix(string(b), "{\n \"version\": 2,") {
		t.Errorf("new journal starts %.40q", b)
	}
	if err := Recover(j.File(), testKinds); err != nil {
		t.Fatal(err)
	}

	knobFile := knob(t, "1\n")
	v1 := filepath.Join(dir, "v1")
	os.WriteFile(v1, []byte(`[{"path":"`+knobFile+`","old":"60","new":"1"},{"kind":"test.note","what":"n","data":"one"}]`), 0o600)
	if err := Recover(v1, testKinds); err != nil {
		t.Fatal(err)
	}
	if read(t, knobFile) != "60" || !reflect.DeepEqual(undone, []string{"two", "one"}) {
		t.Errorf("version 1 not recovered: knob %q, undone %v", read(t, knobFile), undone)
	}

	v3 := filepath.Join(dir, "v3")
	os.WriteFile(v3, []byte(`{"version":3,"changes":[]}`), 0o600)
	err = Recover(v3, testKinds)
	if err == nil || !strings.Contains(err.Error(), "journal version 3 is not known") {
		t.Fatalf("version 3: %v", err)
	}
	if _, err := os.Stat(v3); err != nil {
		t.Error("version 3 journal removed")
	}
}
