// Command ttar converts the recorded hosts of testdata/hosts between their
// text form (NAME.ttar, what the repository holds) and the snapshot archive
// `dbhost collect` writes and `dbhost audit --from` reads (NAME.tar.gz).
//
//	go run ./tools/ttar build                    # every host, testdata/hosts/NAME.tar.gz
//	go run ./tools/ttar build -o /tmp baseline   # one host, /tmp/baseline.tar.gz
//	go run ./tools/ttar text db1.tar.gz          # testdata/hosts/db1.ttar
//	go run ./tools/ttar text -base limits-nofile-1024 derived.tar.gz
//	go run ./tools/ttar sums baseline            # after editing baseline.ttar by hand
//
// text stores an archive whose manifest note starts "derived from NAME" as
// its changes against host NAME when the directory holds it (-base none
// stores it in full). sums records in SHA256SUMS the archives that hosts
// edited by hand now build.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dbhost/dbhost/internal/fixture/ttar"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "text":
		err = text(os.Args[2:])
	case "sums":
		err = sums(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ttar:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: ttar build [-dir DIR] [-o OUTDIR] [NAME...] | ttar text [-dir DIR] [-base NAME|auto|none] FILE.tar.gz... | ttar sums [-dir DIR] NAME...")
	os.Exit(2)
}

func build(args []string) error {
	fl := flag.NewFlagSet("build", flag.ExitOnError)
	dir := fl.String("dir", "testdata/hosts", "directory of the text forms")
	out := fl.String("o", "", "directory for the archives (default: -dir)")
	fl.Parse(args)
	if *out == "" {
		*out = *dir
	}
	names := fl.Args()
	if len(names) == 0 {
		var err error
		if names, err = ttar.Names(*dir); err != nil {
			return err
		}
	}
	for _, n := range names {
		n = strings.TrimSuffix(filepath.Base(n), ttar.Ext)
		t, err := ttar.Load(*dir, n)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := t.WriteArchive(&buf); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		p := filepath.Join(*out, n+".tar.gz")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Println("built", p)
	}
	return nil
}

func sums(args []string) error {
	fl := flag.NewFlagSet("sums", flag.ExitOnError)
	dir := fl.String("dir", "testdata/hosts", "directory of the text forms")
	fl.Parse(args)
	if fl.NArg() == 0 {
		usage()
	}
	for _, n := range fl.Args() {
		n = strings.TrimSuffix(filepath.Base(n), ttar.Ext)
		t, err := ttar.Load(*dir, n)
		if err != nil {
			return err
		}
		base, err := ttar.Base(*dir, n)
		if err != nil {
			return err
		}
		// Written again: the text as the tools write it, and its sum.
		if err := ttar.Write(*dir, n, base, t); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		fmt.Println("summed", filepath.Join(*dir, n+ttar.Ext))
	}
	return nil
}

var derivedFrom = regexp.MustCompile(`^derived from ([A-Za-z0-9._-]+)`)

func text(args []string) error {
	fl := flag.NewFlagSet("text", flag.ExitOnError)
	dir := fl.String("dir", "testdata/hosts", "directory of the text forms")
	base := fl.String("base", "auto", `host to store the changes against: auto (from the manifest note "derived from NAME"), none, or a name`)
	fl.Parse(args)
	if fl.NArg() == 0 {
		usage()
	}
	var jobs []job
	for _, p := range fl.Args() {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		t, err := ttar.ReadArchive(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		j := job{name: strings.TrimSuffix(filepath.Base(p), ".tar.gz"), t: t}
		switch *base {
		case "none":
		case "auto":
			j.base = NoteBase(t)
		default:
			j.base = *base
		}
		jobs = append(jobs, j)
	}
	// Full recordings first: they are the bases of the others.
	done := map[string]bool{}
	for len(jobs) > 0 {
		var later []job
		for _, j := range jobs {
			if j.base != "" && !done[j.base] && pending(jobs, j.base) {
				later = append(later, j)
				continue
			}
			if err := ttar.Write(*dir, j.name, j.base, j.t); err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
			done[j.name] = true
			fmt.Println("wrote", filepath.Join(*dir, j.name+ttar.Ext))
		}
		if len(later) == len(jobs) {
			return fmt.Errorf("%s: its base %s is among the archives and never written (a loop)", later[0].name, later[0].base)
		}
		jobs = later
	}
	return nil
}

// job is one archive to store as text.
type job struct {
	name, base string
	t          *ttar.Tree
}

// pending reports whether host name is among the jobs still to write.
func pending(jobs []job, name string) bool {
	for _, j := range jobs {
		if j.name == name {
			return true
		}
	}
	return false
}

// NoteBase is the host a derived recording names in its manifest note.
func NoteBase(t *ttar.Tree) string {
	e := t.Entries["manifest.json"]
	if e == nil {
		return ""
	}
	var m struct {
		Note string `json:"note"`
	}
	if json.Unmarshal(e.Data, &m) != nil {
		return ""
	}
	if s := derivedFrom.FindStringSubmatch(m.Note); s != nil {
		return s[1]
	}
	return ""
}
