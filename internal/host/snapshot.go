package host

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// SnapshotFormat names the archive layout; readers refuse other formats.
const SnapshotFormat = "dbhost-snapshot/1"

// Version is the tool version written into manifests (set by cmd/dbhost).
var Version = "dev"

// Limits that keep a hostile or corrupt archive from filling the disk.
const (
	maxSnapshotBytes = 1 << 30
	maxSnapshotFiles = 200000
)

// Manifest describes a snapshot: which host, when, by whom.
type Manifest struct {
	Format      string    `json:"format"`
	Hostname    string    `json:"hostname"`
	Kernel      string    `json:"kernel"`
	Arch        string    `json:"arch"`
	CollectedAt time.Time `json:"collected_at"`
	ToolVersion string    `json:"tool_version"`
	EUID        int       `json:"euid"`
	// Note is free text given at collection (e.g. what the fixture shows).
	Note string `json:"note,omitempty"`
}

// AsRoot reports whether the observations were made with root privileges.
func (m Manifest) AsRoot() bool { return m.EUID == 0 }

func liveManifest(h *Host) Manifest {
	m := Manifest{Format: SnapshotFormat, ToolVersion: Version, EUID: os.Geteuid(), Arch: runtime.GOARCH, CollectedAt: time.Now().UTC()}
	if b, err := h.readKey("proc/sys/kernel/hostname", 4096); err == nil {
		m.Hostname = strings.TrimSpace(string(b))
	}
	if b, err := h.readKey("proc/sys/kernel/osrelease", 4096); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// StartRecording makes the live host remember everything read from now on,
// for WriteSnapshot. Recording is cheap but not free: use it for collect only.
func (h *Host) StartRecording() error {
	if !h.live {
		return errors.New("cannot record a snapshot of a snapshot")
	}
	h.rec = newRecording()
	h.manifest = liveManifest(h)
	return nil
}

// WriteSnapshot writes everything recorded since StartRecording as a gzipped
// tar: manifest.json, probes.json (commands, system calls, database queries,
// directory listings, links), errors.json, and fs/ with the files read.
func (h *Host) WriteSnapshot(w io.Writer, note string) error {
	if h.rec == nil {
		return errors.New("host is not recording")
	}
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	m := h.manifest
	m.Note = note
	files := make(map[string][]byte, len(h.rec.files))
	for k, b := range h.rec.files {
		if h.rec.redact[k] {
			b = Redact(b)
		}
		files[k] = b
	}
	return WriteArchive(w, m.CollectedAt, m, h.rec.probes, h.rec.errs, files)
}

// WriteArchive writes a snapshot archive in WriteSnapshot's layout:
// manifest.json, probes.json and errors.json as indented JSON, then files
// (keyed by root-relative path) under fs/ sorted by name, each entry a
// regular file of mode 0600 with modification time mtime. The same input
// gives the same bytes. Fixture tools that edit a recording (tools/derive-*)
// write it back with this, so that it stays what collect would write.
func WriteArchive(w io.Writer, mtime time.Time, manifest, probes, errs any, files map[string][]byte) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name string, b []byte) error {
		hdr := &tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, part := range []struct {
		name string
		v    any
	}{{"manifest.json", manifest}, {"probes.json", probes}, {"errors.json", errs}} {
		b, err := json.MarshalIndent(part.v, "", " ")
		if err != nil {
			return err
		}
		if err := add(part.name, b); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := add("fs/"+k, files[k]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// OpenSnapshot unpacks a snapshot archive into a private temporary directory
// and returns a Host that reads it. Close removes the directory.
func OpenSnapshot(file string) (*Host, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir, err := os.MkdirTemp(unpackDir(), "dbhost-snapshot-")
	if err != nil {
		return nil, err
	}
	h := &Host{root: filepath.Join(dir, "fs"), rootFD: -1, snapshot: file, tmpdir: dir, snap: newRecording()}
	if err := h.unpack(f); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s is not a usable dbhost snapshot: %w", file, err)
	}
	if err := os.MkdirAll(h.root, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	h.proc, _ = procfs.NewFS(filepath.Join(h.root, "proc"))
	if h.rootFD, err = openRoot(h.root); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return h, nil
}

func (h *Host) unpack(r io.Reader) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	var total int64
	var files int
	var sawManifest bool
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			// tar stops at its end marker; the gzip trailer (checksum and
			// length) is only checked when the stream is read to its end.
			if _, err := io.Copy(io.Discard, gz); err != nil {
				return err
			}
			break
		}
		if err != nil {
			return err
		}
		files++
		total += hdr.Size
		if files > maxSnapshotFiles || total > maxSnapshotBytes {
			return errors.New("archive too large")
		}
		if hdr.Typeflag != tar.TypeReg {
			continue // only regular files: no links that could point outside
		}
		name := path.Clean(hdr.Name)
		if strings.HasPrefix(name, "/") || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("unsafe entry %q", hdr.Name)
		}
		switch {
		case name == "manifest.json":
			if err := decodeJSON(tr, &h.manifest); err != nil {
				return fmt.Errorf("manifest: %w", err)
			}
			if h.manifest.Format != SnapshotFormat {
				return fmt.Errorf("unknown format %q", h.manifest.Format)
			}
			sawManifest = true
		case name == "probes.json":
			if err := decodeJSON(tr, &h.snap.probes); err != nil {
				return fmt.Errorf("probes: %w", err)
			}
		case name == "errors.json":
			if err := decodeJSON(tr, &h.snap.errs); err != nil {
				return fmt.Errorf("errors: %w", err)
			}
		case strings.HasPrefix(name, "fs/"):
			dst := filepath.Join(h.tmpdir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				return err
			}
			out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, io.LimitReader(tr, hdr.Size))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	if !sawManifest {
		return errors.New("no manifest.json")
	}
	// Every collection reads the process table; an archive without it
	// observed nothing, and judging it would mistake absence for evidence.
	if _, ok := h.snap.probes["readdir:proc"]; !ok {
		return errors.New("it holds no observations of a host (no process table)")
	}
	return nil
}

// unpackDir prefers tmpfs: a snapshot is hundreds of small files, read once
// and removed, so there is no reason to send them to a disk. TMPDIR wins
// when set.
func unpackDir() string {
	if os.Getenv("TMPDIR") == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && st.Mode().Perm()&0o002 != 0 {
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

func decodeJSON(r io.Reader, v any) error {
	return json.NewDecoder(io.LimitReader(r, maxSnapshotBytes)).Decode(v)
}

func marshal(v any) ([]byte, error) { return json.Marshal(v) }

func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
