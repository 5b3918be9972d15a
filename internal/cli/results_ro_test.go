package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/results"
)

// listing names every file under dir with its size and modification time.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %s %d %s", strings.TrimPrefix(p, dir), fi.Mode(), fi.Size(), fi.ModTime().Format(time.RFC3339Nano)))
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestResultsReadOnlyNoDatabase: the read-only subcommands create no
// directory and no database where there is none.
func TestResultsReadOnlyNoDatabase(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "not", "yet", "results.db")
	code, out, stderr := runCLI(t, "results", "list", "--db", db)
	if code != ExitOK || !strings.Contains(out, "no experiments stored (no database at "+db+")") {
		t.Errorf("list: exit %d, out %q, err %q", code, out, stderr)
	}
	code, out, _ = runCLI(t, "results", "list", "--db", db, "--format", "json")
	if code != ExitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("list json: exit %d, out %q", code, out)
	}
	for _, args := range [][]string{
		{"results", "show", "last", "--db", db},
		{"results", "compare", "a", "b", "--db", db},
		{"results", "report", "last", "--db", db, "-o", filepath.Join(dir, "r.html")},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != ExitError || !strings.Contains(stderr, "no results database at "+db) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "not")); !os.IsNotExist(err) {
		t.Errorf("a read-only subcommand created %s: %v", filepath.Join(dir, "not"), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files created: %v", ents)
	}
}

// TestResultsReadOnlyExisting reads a database the experiment writer left
// (WAL mode) without changing a byte or adding a file next to it.
func TestResultsReadOnlyExisting(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	st, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	e := &results.Experiment{ID: "20261125-aaaa", Name: "stored", Created: time.Now(), Status: results.Done}
	if err := st.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	st.Close()
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) < 20 || before[18] != 2 || before[19] != 2 {
		t.Fatal("the writer did not leave the database in WAL mode")
	}
	beforeList := listing(t, dir)
	code, out, stderr := runCLI(t, "results", "list", "--db", db)
	if code != ExitOK || !strings.Contains(out, "20261125-aaaa") {
		t.Fatalf("list: exit %d, out %q, err %q", code, out, stderr)
	}
	runCLI(t, "results", "show", "last", "--db", db)
	after, _ := os.ReadFile(db)
	if !bytes.Equal(before, after) {
		t.Error("the database file changed")
	}
	if got := listing(t, dir); got != beforeList {
		t.Errorf("the directory changed:\nbefore\n%s\nafter\n%s", beforeList, got)
	}

	// A writer that is still open (its -wal exists): readers see its data.
	w, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e2 := &results.Experiment{ID: "20261125-bbbb", Name: "running", Created: time.Now(), Status: results.Running}
	if err := w.Create(context.Background(), e2); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "results", "list", "--db", db)
	if code != ExitOK || !strings.Contains(out, "20261125-bbbb") {
		t.Errorf("list beside a writer: exit %d, out %q, err %q", code, out, stderr)
	}
}
