package journal

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// undone collects what the test kinds undid, in order.
var undone []string

// failing makes the "flaky" kind fail while set.
var failing = true

var testKinds = Kinds{
	"test.note": func(data json.RawMessage) error {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		undone = append(undone, s)
		return nil
	},
	"test.flaky": func(json.RawMessage) error {
		if failing {
			return errors.New("server not reachable")
		}
		undone = append(undone, "flaky")
		return nil
	},
}

func TestRecordUndoneNewestFirst(t *testing.T) {
	undone = nil
	a := knob(t, "60\n")
	j, err := Open(filepath.Join(t.TempDir(), "j"), testKinds)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record("test.note", "first", "first"); err != nil {
		t.Fatal(err)
	}
	if err := j.Set(a, "1"); err != nil {
		t.Fatal(err)
	}
	if err := j.Record("test.note", "second", "second"); err != nil {
		t.Fatal(err)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(undone, []string{"second", "first"}) || read(t, a) != "60" {
		t.Errorf("undone %v, knob %q", undone, read(t, a))
	}
	if _, err := os.Stat(j.File()); !os.IsNotExist(err) {
		t.Errorf("journal left after a full restore: %v", err)
	}
}

func TestRecordUnknownKindRefused(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j"), testKinds)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record("no.such.kind", "x", 1); err == nil {
		t.Fatal("an action nobody can undo was journaled")
	}
	if len(j.Changes()) != 0 {
		t.Fatal("refused action kept")
	}
}

// A failed undo stays in the journal for the next Recover; what succeeded
// is not redone.
func TestFailedUndoKeptForRecover(t *testing.T) {
	undone, failing = nil, true
	defer func() { failing = true }()
	file := filepath.Join(t.TempDir(), "j")
	j, err := Open(file, testKinds)
	if err != nil {
		t.Fatal(err)
	}
	j.Record("test.note", "note", "note")
	j.Record("test.flaky", "flaky", nil)
	err = j.Restore()
	if err == nil || !strings.Contains(err.Error(), "server not reachable") {
		t.Fatalf("Restore: %v", err)
	}
	left, err := Pending(file)
	if b, _ := os.ReadFile(file); err != nil || len(left) != 1 || left[0].Kind != "test.flaky" {
		t.Fatalf("journal after a failed undo: %s (%v)", b, err)
	}
	failing = false
	if err := Recover(file, testKinds); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(undone, []string{"note", "flaky"}) {
		t.Errorf("undone %v", undone)
	}
}

// A journal written by a program that knew a kind this one does not is
// kept, not dropped.
func TestRecoverUnknownKindKeepsJournal(t *testing.T) {
	file := filepath.Join(t.TempDir(), "j")
	b, _ := json.Marshal([]Change{{Kind: "other.program", What: "cluster /tmp/x", Data: json.RawMessage(`{}`)}})
	os.WriteFile(file, b, 0o600)
	err := Recover(file, testKinds)
	if err == nil || !strings.Contains(err.Error(), "unknown to this program") {
		t.Fatalf("Recover: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal("journal with an unknown kind removed")
	}
}
