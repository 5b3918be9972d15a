package fix

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/safefile"
)

// stateFile lists what the last WriteTree wrote, so a rerun can remove files
// whose findings are gone and the tree always equals the current fixes.
const stateFile = ".dbhost-fix-files"

// Notes collects the manual steps and host-only remarks of fixes, for the
// README written next to the files.
func Notes(items []Item) []string {
	var out []string
	seen := map[string]bool{}
	for _, it := range items {
		var n string
		switch {
		case it.Fix.Manual != "":
			n = fmt.Sprintf("%s: %s", it.tag(), it.Fix.Manual)
		case len(it.Fix.Config) > 0 && len(it.Fix.Sysctl) == 0 && len(it.Fix.Udev) == 0:
			continue
		}
		if it.Fix.HostOnly {
			n = strings.TrimSpace(n + " (apply on the container's host)")
			if n == "(apply on the container's host)" {
				n = it.tag() + ": apply on the container's host"
			}
		}
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// stateHeader starts a state file that records each file's SHA-256; an
// older state file (paths only) proves nothing about content, so nothing
// listed in it is deleted.
const stateHeader = "# dbhost fix state v2: sha256 path"

// maxStateFile bounds the state file read back (a real one lists a dozen
// files).
const maxStateFile = 1 << 20

// WriteTree writes files under dir, mirroring their absolute paths
// (dir/etc/sysctl.d/60-dbhost.conf), plus README.txt. dir may have been
// prepared by someone else: it must belong to the effective user and be
// writable by nobody else, on a path nobody else can change, and nothing
// inside it is reached through a symbolic link (see safefile.OpenDir). Each
// file is written atomically with its mode. Files of an earlier run that
// are no longer produced are removed only if their content is still what
// dbhost wrote (the state file keeps each file's checksum); others are kept
// and reported in kept, one sentence each. It returns the paths written,
// relative to dir.
func WriteTree(dir string, files []File, notes, sequence []string) (written, kept []string, err error) {
	d, err := safefile.OpenDir(dir)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	// Refuse the tree as a whole before the first write: an unsafe
	// directory inside leaves the output as it was.
	rels := treePaths(files)
	for _, rel := range append(rels[:len(rels):len(rels)], "README.txt", stateFile) {
		if err := d.Check(rel); err != nil {
			return nil, nil, err
		}
	}
	sums := map[string]string{}
	for i, f := range files {
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		if err := d.WriteFile(rels[i], mode, []byte(f.Content)); err != nil {
			return written, kept, err
		}
		written = append(written, rels[i])
		sums[rels[i]] = safefile.Sum([]byte(f.Content))
	}
	readme := []byte(readmeText(files, notes, sequence))
	if err := d.WriteFile("README.txt", 0o644, readme); err != nil {
		return written, kept, err
	}
	written = append(written, "README.txt")
	sums["README.txt"] = safefile.Sum(readme)
	kept = removeStale(d, sums)
	sort.Strings(written)
	var b strings.Builder
	b.WriteString(stateHeader + "\n")
	for _, w := range written {
		fmt.Fprintf(&b, "%s  %s\n", sums[w], w)
	}
	return written, kept, d.WriteFile(stateFile, 0o644, []byte(b.String()))
}

// treePaths are the files' places under the output directory: their
// absolute paths made relative.
func treePaths(files []File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = strings.TrimPrefix(filepath.Clean("/"+f.Path), "/")
	}
	return out
}

// removeStale removes what the previous run wrote and this one did not
// (sums holds this run's files), and says what it kept and why.
func removeStale(d *safefile.Dir, sums map[string]string) (kept []string) {
	old, err := d.ReadFile(stateFile, maxStateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return []string{fmt.Sprintf("%v: files of an earlier run are not removed", err)}
	}
	entries, ok := parseState(old)
	if !ok {
		return []string{fmt.Sprintf("%s has no checksums (an older dbhost wrote it): files it lists are not removed",
			filepath.Join(d.Path(), stateFile))}
	}
	for _, e := range entries {
		if _, now := sums[e.path]; now {
			continue
		}
		if _, err := d.RemoveIfUnchanged(e.path, e.sum); err != nil {
			kept = append(kept, fmt.Sprintf("not removed: %v", err))
		}
	}
	return kept
}

type stateEntry struct{ sum, path string }

// parseState reads a state file; ok is false for the first format (paths
// without checksums), which never leads to a deletion. Entries with a path
// that is not beneath the directory, or malformed, are dropped.
func parseState(b []byte) (entries []stateEntry, ok bool) {
	lines := strings.Split(string(b), "\n")
	if lines[0] != stateHeader {
		return nil, false
	}
	for _, ln := range lines[1:] {
		sum, p, ok := strings.Cut(ln, "  ")
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" || safefile.Local(p) != nil {
			continue
		}
		entries = append(entries, stateEntry{sum, p})
	}
	return entries, true
}

func readmeText(files []File, notes, sequence []string) string {
	var b strings.Builder
	b.WriteString("Files rendered by `dbhost fix`. Nothing on the host was changed.\n")
	b.WriteString("Each path below mirrors where the file belongs on the host; every\n")
	b.WriteString("setting inside names the finding it fixes. Review, then install.\n\n")
	if len(files) == 0 {
		b.WriteString("No finding needs a persistent file.\n")
	}
	for _, f := range files {
		fmt.Fprintf(&b, "  %s\n", comment(f.Path))
	}
	if len(sequence) > 0 {
		b.WriteString("\nAfter installing the files, apply all fixes now: run these top to bottom (one\n")
		b.WriteString("command per setting, with the value the files keep; restarts last):\n")
		for _, s := range sequence {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nSteps no file can do:\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "  - %s\n", noteText(n))
		}
	}
	return b.String()
}

// noteText keeps a note one item of the list: its further lines indented,
// every other control character escaped.
func noteText(n string) string {
	lines := strings.Split(n, "\n")
	for i, l := range lines {
		lines[i] = comment(l)
	}
	return strings.Join(lines, "\n    ")
}
