package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/textio"
)

var idRe = textio.LazyRegexp(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4}$`)

// makeSetDir creates the change set's directory (and the state directory),
// mode 0700, and checks that nobody else owns or can write to them.
func makeSetDir(state, id string) (string, error) {
	dir := filepath.Join(state, id)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(state, 0o700); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	d, err := safefile.OpenDir(dir)
	if err != nil {
		return "", err
	}
	d.Close()
	return dir, nil
}

func saveMeta(dir string, cs *ChangeSet) error {
	b, err := json.MarshalIndent(cs, "", "  ")
	if err != nil {
		return err
	}
	return safefile.WriteBytes(filepath.Join(dir, "meta.json"), 0o600, append(b, '\n'))
}

func loadMeta(dir string) (*ChangeSet, error) {
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	var cs ChangeSet
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &cs, nil
}

// History lists the change sets in state, oldest first.
func History(state string) ([]*ChangeSet, error) {
	ents, err := os.ReadDir(state)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*ChangeSet
	for _, e := range ents {
		if !e.IsDir() || !idRe.MatchString(e.Name()) {
			continue
		}
		cs, err := loadMeta(filepath.Join(state, e.Name()))
		if err != nil {
			return out, err
		}
		out = append(out, cs)
	}
	sort.Slice(out, func(a, b int) bool { return before(out[a], out[b]) })
	return out, nil
}

// before orders change sets by when they were made: IDs of one second
// differ only in their random part.
func before(a, b *ChangeSet) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.ID < b.ID
}

// Recover rolls back every change set an interrupted run left unfinished
// (an apply or a rollback killed halfway), newest first, and returns their
// IDs. opts says how to reach what the undos put back (opts.Engine for
// the servers). The caller holds the host lock.
func Recover(state string, opts Options) ([]string, error) {
	sets, err := History(state)
	if err != nil {
		return nil, err
	}
	var done []string
	for i := len(sets) - 1; i >= 0; i-- {
		cs := sets[i]
		if cs.Status != StatusApplying && cs.Status != StatusRollingBack {
			continue
		}
		if err := undo(state, cs, "recover", opts); err != nil {
			return done, fmt.Errorf("change set %s: %w", cs.ID, err)
		}
		done = append(done, cs.ID)
	}
	return done, nil
}

// Rollback puts back the change set id ("" the latest applied one):
// files byte for byte with their mode and owner, files that did not exist
// removed, kernel values as they were. The caller holds the host lock.
func Rollback(state, id string, opts Options) (*ChangeSet, error) {
	if _, err := Recover(state, opts); err != nil {
		return nil, err
	}
	sets, err := History(state)
	if err != nil {
		return nil, err
	}
	var cs *ChangeSet
	for i := len(sets) - 1; i >= 0; i-- {
		if (id == "" && sets[i].Status == StatusApplied) || sets[i].ID == id {
			cs = sets[i]
			break
		}
	}
	switch {
	case cs == nil && id == "":
		return nil, errors.New("no applied change set to roll back")
	case cs == nil:
		return nil, fmt.Errorf("no change set %q", id)
	case cs.Status != StatusApplied:
		return nil, fmt.Errorf("change set %s is %s, not applied", cs.ID, cs.Status)
	}
	// A later applied set may have replaced the same files: its undo
	// would put back this set's content, so it must be rolled back first.
	for _, later := range sets {
		if before(cs, later) && later.Status == StatusApplied {
			return nil, fmt.Errorf("change set %s was applied after %s: roll it back first", later.ID, cs.ID)
		}
	}
	_, by, sudo := who()
	if sudo != "" {
		by += " (sudo by " + sudo + ")"
	}
	return cs, undo(state, cs, by, opts)
}

// undo restores a change set's journal and marks it rolled back.
func undo(state string, cs *ChangeSet, by string, opts Options) error {
	dir := filepath.Join(state, cs.ID)
	if cs.Status == StatusApplied {
		cs.Status = StatusRollingBack
		if err := saveMeta(dir, cs); err != nil {
			return err
		}
	}
	if err := change.Recover(filepath.Join(dir, "journal.json"), opts.config()); err != nil {
		return err
	}
	udevReload(cs)
	cs.Status, cs.RolledBack, cs.RolledBackBy = StatusRolledBack, time.Now().UTC(), by
	return saveMeta(dir, cs)
}
