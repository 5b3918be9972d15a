// Package derive holds what the fixture-derivation tools (tools/derive-*)
// share: a snapshot archive held in memory, edited entry by entry and
// written back deterministically, and the command line that derives named
// fixtures from real recordings. Each tool keeps only its derivations.
package derive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/host"
)

// Derivation is one derived fixture: Base's recording edited by Edit,
// written as Name with Note as its manifest note (which should start with
// "derived from ...").
type Derivation struct {
	Name, Base, Note string
	Edit             func(a *Archive) error
}

// Main is a derive tool's command line: -dir names the fixture directory
// (testdata/hosts), the arguments the derivations to write (all when none).
// It exits 1 when any derivation fails, after trying the others.
func Main(derivations []Derivation) {
	dir := flag.String("dir", "testdata/hosts", "fixture directory")
	flag.Parse()
	want := map[string]bool{}
	for _, n := range flag.Args() {
		want[n] = true
	}
	failed := false
	for _, d := range derivations {
		if len(want) > 0 && !want[d.Name] {
			continue
		}
		if err := Derive(*dir, d); err != nil {
			fmt.Fprintf(os.Stderr, "derive %s: %v\n", d.Name, err)
			failed = true
			continue
		}
		fmt.Println("derived", filepath.Join(*dir, d.Name+".tar.gz"))
	}
	if failed {
		os.Exit(1)
	}
}

// Derive reads dir/Base.tar.gz, applies the edit, sets the note and writes
// dir/Name.tar.gz.
func Derive(dir string, d Derivation) error {
	a, err := Read(filepath.Join(dir, d.Base+".tar.gz"))
	if err != nil {
		return err
	}
	if err := d.Edit(a); err != nil {
		return err
	}
	a.Manifest["note"] = d.Note
	return a.Write(filepath.Join(dir, d.Name+".tar.gz"))
}

// Archive is a snapshot held in memory, in the layout host.WriteSnapshot
// writes: the manifest, the probes (everything not a file), the read errors
// (root-relative path → error text) and the files under fs/ (the only other
// entries a snapshot has).
type Archive struct {
	// Files holds the fs/ entries by archive name ("fs/proc/meminfo");
	// File, SetFile and Deny take root-relative paths instead.
	Files  map[string][]byte
	Probes map[string]Probe
	Errors map[string]string
	// Manifest is kept as generic JSON so that fields this package does not
	// know survive an edit.
	Manifest map[string]any
	// ModTime is every entry's modification time, the recording's
	// collected_at as collect wrote it.
	ModTime time.Time
}

// Probe is the JSON form of one recorded probe (host.probeResult).
type Probe struct {
	Out   []byte `json:"out,omitempty"`
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"`
}

// Read loads a snapshot archive.
func Read(p string) (*Archive, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	a := &Archive{Files: map[string][]byte{}}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		a.ModTime = hdr.ModTime
		switch hdr.Name {
		case "manifest.json":
			err = json.Unmarshal(b, &a.Manifest)
		case "probes.json":
			err = json.Unmarshal(b, &a.Probes)
		case "errors.json":
			err = json.Unmarshal(b, &a.Errors)
		default:
			if !strings.HasPrefix(hdr.Name, "fs/") {
				err = errors.New("not a snapshot entry")
			}
			a.Files[hdr.Name] = b
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
	if a.Manifest == nil || a.Probes == nil {
		return nil, fmt.Errorf("%s is not a dbhost snapshot", p)
	}
	if a.Errors == nil {
		a.Errors = map[string]string{}
	}
	return a, nil
}

// Write writes the archive as collect does (host.WriteArchive): the same
// edit gives the same bytes.
func (a *Archive) Write(p string) error {
	files := make(map[string][]byte, len(a.Files))
	for name, b := range a.Files {
		files[strings.TrimPrefix(name, "fs/")] = b
	}
	var buf bytes.Buffer
	if err := host.WriteArchive(&buf, a.ModTime, a.Manifest, a.Probes, a.Errors, files); err != nil {
		return err
	}
	return os.WriteFile(p, buf.Bytes(), 0o644)
}

// File returns the recorded content of root-relative path rel.
func (a *Archive) File(rel string) (string, bool) {
	b, ok := a.Files["fs/"+rel]
	return string(b), ok
}

// SetFile records content for root-relative path rel, adding the file when
// the base did not read it.
func (a *Archive) SetFile(rel, content string) { a.Files["fs/"+rel] = []byte(content) }

// Deny makes root-relative path rel read as "permission denied", whether or
// not the base recorded it.
func (a *Archive) Deny(rel string) {
	delete(a.Files, "fs/"+rel)
	a.Errors[rel] = "permission denied"
}

// SetProbe records a probe's answer: its output, or its error text and
// errno.
func (a *Archive) SetProbe(key string, out []byte, err string, errno int) {
	a.Probes[key] = Probe{Out: out, Err: err, Errno: errno}
}

// EditProcLines passes every line of each recorded /proc/.../file (one per
// process) through edit and returns how many such files there were.
func (a *Archive) EditProcLines(file string, edit func(line string) string) int {
	n := 0
	for name, b := range a.Files {
		if !strings.HasPrefix(name, "fs/proc/") || !strings.HasSuffix(name, "/"+file) {
			continue
		}
		lines := strings.Split(string(b), "\n")
		for i, ln := range lines {
			lines[i] = edit(ln)
		}
		a.Files[name] = []byte(strings.Join(lines, "\n"))
		n++
	}
	return n
}
