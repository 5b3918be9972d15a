package host

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// SnapshotFormat names the archive layout; readers refuse other formats.
const SnapshotFormat = "dbhost-snapshot/1"

// SnapshotInfo is what the writer of a snapshot adds to its manifest.
type SnapshotInfo struct {
	Note        string // free text: what the snapshot shows
	ToolVersion string // the version of the program that wrote it
}

// Limits on a snapshot archive. A collection of a real host is far smaller
// (the largest recorded here: 0.7 MB unpacked in 442 entries and 211
// directories, a 104 KB file, a 27 KB probe, a 218 KB probes.json with
// 459 probes); the limits leave room for busy hosts with thousands of
// processes, and keep a hostile archive from costing more than a second or
// a few tens of MB (docs/json-schema.md). WriteSnapshot keeps to them.
const (
	maxSnapshotBytes     = 64 << 20 // all entries, unpacked
	maxSnapshotFiles     = 50000    // entries and the directories they need
	maxSnapshotFile      = 8 << 20  // one fs/ file
	maxManifestBytes     = 64 << 10 // manifest.json (its note is free text)
	maxProbesBytes       = 16 << 20 // probes.json
	maxProbeValue        = 4 << 20  // one probe's output, decoded
	maxErrorsBytes       = 4 << 20  // errors.json
	maxRecordedEntries   = 50000    // probes in probes.json, errors in errors.json
	maxEntryName         = 1024     // bytes in an entry's name
	maxAfterEndOfArchive = 64 << 10 // padding after tar's end marker, then the gzip trailer
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
	// Claims: collected with the rules of views (For), whose walks it
	// records; a snapshot without them is read by a view as by its host.
	Claims bool `json:"claims,omitempty"`
	// Note is free text given at collection (e.g. what the fixture shows).
	Note string `json:"note,omitempty"`
}

// AsRoot reports whether the observations were made with root privileges.
func (m Manifest) AsRoot() bool { return m.EUID == 0 }

func liveManifest(h *Host) Manifest {
	m := Manifest{Format: SnapshotFormat, EUID: os.Geteuid(), Arch: runtime.GOARCH, CollectedAt: time.Now().UTC(), Claims: true}
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

// WriteSnapshot writes everything recorded since StartRecording, with the
// writer's note and version in the manifest, as a gzipped
// tar: manifest.json, probes.json (commands, system calls, database queries,
// directory listings, links), errors.json, and fs/ with the files read.
func (h *Host) WriteSnapshot(w io.Writer, info SnapshotInfo) error {
	if h.rec == nil {
		return errors.New("host is not recording")
	}
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	m := h.manifest
	m.Note, m.ToolVersion = info.Note, info.ToolVersion
	// What OpenSnapshot would refuse is kept as an error instead, so a
	// collection of an unusual host still opens and says what is missing.
	errs := make(map[string]string, len(h.rec.errs))
	for k, e := range h.rec.errs {
		errs[k] = e
	}
	files := make(map[string][]byte, len(h.rec.files))
	for k, b := range h.rec.files {
		if h.rec.redact[k] {
			b = Redact(b)
		}
		if len(b) > maxSnapshotFile {
			errs[k] = errNotKept.Error()
			continue
		}
		files[k] = b
	}
	probes := make(map[string]probeResult, len(h.rec.probes))
	for k, p := range h.rec.probes {
		if len(p.Out) > maxProbeValue || len(p.Err) > maxProbeValue {
			p = probeResult{Err: "output larger than 4 MiB: not kept in snapshots"}
		}
		probes[k] = p
	}
	if len(probes) > maxRecordedEntries || len(errs) > maxRecordedEntries {
		return fmt.Errorf("the snapshot would not open: %d probes and %d errors, more than %d", len(probes), len(errs), maxRecordedEntries)
	}
	return WriteArchive(w, m.CollectedAt, m, probes, errs, files)
}

// errNotKept replays a file a collection read but did not store.
var errNotKept error = tooLargeError("file larger than 8 MiB: not kept in snapshots")

// WriteArchive writes a snapshot archive in WriteSnapshot's layout:
// manifest.json, probes.json and errors.json as indented JSON, then files
// (keyed by root-relative path) under fs/ sorted by name, each entry a
// regular file of mode 0600 with modification time mtime. The same input
// gives the same bytes. Fixture tools that edit a recording (tools/derive-*)
// write it back with this, so that it stays what collect would write. An
// archive OpenSnapshot would refuse is not written.
func WriteArchive(w io.Writer, mtime time.Time, manifest, probes, errs any, files map[string][]byte) error {
	var lim archiveLimits
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name string, b []byte) error {
		if err := lim.admit(name, int64(len(b))); err != nil {
			return fmt.Errorf("the snapshot would not open: %w", err)
		}
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
	dirs := map[string]bool{}
	for k := range files {
		keys = append(keys, k)
		for d := path.Dir("fs/" + k); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	sort.Strings(keys)
	if err := lim.addDirs(len(dirs)); err != nil {
		return fmt.Errorf("the snapshot would not open: %w", err)
	}
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

// OpenSnapshot unpacks a snapshot archive into a private directory and
// returns a Host that reads it. Close removes the directory; one left by a
// process that died (kill -9) is removed by the next OpenSnapshot.
func OpenSnapshot(file string) (*Host, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := &Host{state: &state{rootFD: -1, procFD: -1, sysFD: -1, snapshot: file, snap: newRecording()}}
	if err := h.unpack(f); err != nil {
		h.Close()
		return nil, fmt.Errorf("%s is not a usable dbhost snapshot: %w", file, err)
	}
	if err := os.MkdirAll(h.root, 0o700); err != nil {
		h.Close()
		return nil, err
	}
	h.proc, _ = procfs.NewFS(filepath.Join(h.root, "proc"))
	if h.rootFD, err = openRoot(h.root); err != nil {
		h.Close()
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
	u := &unpacker{h: h, dirs: map[string]bool{}, copyBuf: make([]byte, 32<<10)}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
	// tar stops at its end marker. The gzip trailer (checksum and length)
	// follows the padding of the last record; more than that is not part
	// of a snapshot and is not decompressed.
	if n, err := io.Copy(io.Discard, io.LimitReader(gz, maxAfterEndOfArchive+1)); err != nil {
		return err
	} else if n > maxAfterEndOfArchive {
		return errors.New("data after the end of the archive")
	}
	if h.tmpdir == "" {
		return errors.New("no manifest.json")
	}
	// Every collection reads the process table; an archive without it
	// observed nothing, and judging it would mistake absence for evidence.
	if _, ok := h.snap.probes["readdir:proc"]; !ok {
		return errors.New("it holds no observations of a host (no process table)")
	}
	return nil
}

// unpacker is one archive being unpacked into a snapshot host.
type unpacker struct {
	h       *Host
	lim     archiveLimits
	dirs    map[string]bool // directories made under the host's tmpdir
	copyBuf []byte
}

// entry admits and unpacks one archive entry.
func (u *unpacker) entry(hdr *tar.Header, tr io.Reader) error {
	h := u.h
	if err := u.lim.admit(hdr.Name, hdr.Size); err != nil {
		return err
	}
	files := u.lim.files
	// The manifest comes first, as collect writes it: nothing is
	// unpacked before the archive says what it is.
	if files == 1 && (hdr.Name != "manifest.json" || hdr.Typeflag != tar.TypeReg) {
		return fmt.Errorf("the first entry is %q, not manifest.json", hdr.Name)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil // only regular files: no links that could point outside
	}
	name := path.Clean(hdr.Name)
	if strings.HasPrefix(name, "/") || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("unsafe entry %q", hdr.Name)
	}
	switch {
	case name == "manifest.json":
		if files != 1 {
			return errors.New("a second manifest.json")
		}
		return h.unpackManifest(tr)
	case name == "probes.json":
		err := decodeEntries(tr, maxProbesBytes, h.snap.probes, func(k string, p probeResult) error {
			if len(p.Out) > maxProbeValue || len(p.Err) > maxProbeValue {
				return fmt.Errorf("probe %.60q holds more than %d MiB", k, maxProbeValue>>20)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("probes.json: %w", err)
		}
	case name == "errors.json":
		if err := decodeEntries(tr, maxErrorsBytes, h.snap.errs, nil); err != nil {
			return fmt.Errorf("errors.json: %w", err)
		}
	case strings.HasPrefix(name, "fs/"):
		return u.file(name, tr, hdr.Size)
	}
	return nil
}

// unpackManifest reads the manifest and, for a known format, makes the
// private directory the files are unpacked into.
func (h *Host) unpackManifest(r io.Reader) error {
	if err := json.NewDecoder(io.LimitReader(r, maxManifestBytes)).Decode(&h.manifest); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if h.manifest.Format != SnapshotFormat {
		return fmt.Errorf("unknown format %q", h.manifest.Format)
	}
	dir, err := h.makePrivateDir("snapshot-")
	if err != nil {
		return err
	}
	h.tmpdir, h.root = dir, filepath.Join(dir, "fs")
	return nil
}

// file writes an fs/ entry (its name clean and relative) under the
// host's private directory, counting the directories it makes.
func (u *unpacker) file(name string, r io.Reader, size int64) error {
	if u.h.tmpdir == "" {
		return errors.New("no manifest.json")
	}
	dst := filepath.Join(u.h.tmpdir, filepath.FromSlash(name))
	made, err := mkdirs(filepath.Dir(dst), u.dirs)
	if err != nil {
		return err
	}
	if err := u.lim.addDirs(made); err != nil {
		return err
	}
	return writeEntry(dst, r, size, u.copyBuf)
}

// mkdirs is os.MkdirAll that says how many directories it made: each is
// an inode in tmpfs, and counts as an entry of the archive. known holds
// the directories this unpack already made or found: nothing else writes
// in the private directory, so they are not looked at again.
func mkdirs(dir string, known map[string]bool) (int, error) {
	var missing []string
	for d := dir; !known[d]; d = filepath.Dir(d) {
		st, err := os.Lstat(d)
		if err == nil {
			if !st.IsDir() {
				return 0, fmt.Errorf("%s is not a directory", d)
			}
			known[d] = true
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil {
			return len(missing) - 1 - i, err
		}
		known[missing[i]] = true
	}
	return len(missing), nil
}

// writeEntry writes one fs/ entry of the archive. The descriptor is used
// as is, not through an *os.File (see readKey): an unpack writes hundreds
// of small files.
func writeEntry(dst string, r io.Reader, size int64, buf []byte) error {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(dst, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: dst, Err: err}
	}
	err = writeAll(fd, io.LimitReader(r, size), buf)
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = &fs.PathError{Op: "close", Path: dst, Err: cerr}
	}
	return err
}

// writeAll copies r to the descriptor fd through buf.
func writeAll(fd int, r io.Reader, buf []byte) error {
	for {
		n, rerr := r.Read(buf)
		for p := buf[:n]; len(p) > 0; {
			var w int
			err := ignoringEINTR(func() (err error) {
				w, err = unix.Write(fd, p)
				return err
			})
			if err != nil {
				return err
			}
			p = p[w:]
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// size writes a byte count for a person to read.
func size(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// archiveLimits counts an archive's entries against the limits, from tar
// headers, before a byte of an entry is read (or written).
type archiveLimits struct {
	files int
	total int64
}

func (l *archiveLimits) admit(name string, n int64) error {
	l.files++
	l.total += n
	if len(name) > maxEntryName {
		return fmt.Errorf("an entry's name is %d bytes long, more than the %d a snapshot allows", len(name), maxEntryName)
	}
	if max, ok := entryLimit(name); ok && n > max {
		return fmt.Errorf("%s is %s, more than the %s a snapshot allows for it", name, size(n), size(max))
	}
	switch {
	case l.files > maxSnapshotFiles:
		return fmt.Errorf("more than %d entries (a snapshot of a real host has hundreds)", maxSnapshotFiles)
	case l.total > maxSnapshotBytes:
		return fmt.Errorf("more than %d MiB unpacked (a snapshot of a real host has a few MB)", maxSnapshotBytes>>20)
	}
	return nil
}

// addDirs counts the directories unpacking needs as entries.
func (l *archiveLimits) addDirs(n int) error {
	l.files += n
	if l.files > maxSnapshotFiles {
		return fmt.Errorf("more than %d entries and directories (a snapshot of a real host has hundreds)", maxSnapshotFiles)
	}
	return nil
}

// entryLimit is the size an entry may have, judged from its tar header
// before a byte of it is read.
func entryLimit(name string) (int64, bool) {
	switch {
	case name == "manifest.json":
		return maxManifestBytes, true
	case name == "probes.json":
		return maxProbesBytes, true
	case name == "errors.json":
		return maxErrorsBytes, true
	case strings.HasPrefix(name, "fs/"):
		return maxSnapshotFile, true
	}
	return 0, false
}

// decodeEntries decodes a JSON object of at most maxBytes into m one
// member at a time, so that an object of a million tiny members is
// refused at maxRecordedEntries instead of being built; check, when set,
// judges each member as it arrives.
func decodeEntries[V any](r io.Reader, maxBytes int64, m map[string]V, check func(string, V) error) error {
	dec := json.NewDecoder(io.LimitReader(r, maxBytes))
	if t, err := dec.Token(); err != nil {
		return err
	} else if t != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	for dec.More() {
		if len(m) >= maxRecordedEntries {
			return fmt.Errorf("more than %d entries (a snapshot of a real host has hundreds)", maxRecordedEntries)
		}
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		var v V
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if check != nil {
			if err := check(k, v); err != nil {
				return err
			}
		}
		m[k] = v
	}
	_, err := dec.Token() // the closing brace
	return err
}

func marshal(v any) ([]byte, error) { return json.Marshal(v) }

func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
