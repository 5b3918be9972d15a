package host_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/cli"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/fixture/derive"
	"github.com/dbhost/dbhost/internal/host"
)

// bomb writes a snapshot-shaped archive whose decompressed size can be
// gigabytes: gzip streams may be concatenated, so a chunk compressed once
// is appended as many times as wanted.
type bomb struct {
	t   *testing.T
	out bytes.Buffer
	tar int64 // bytes of the tar stream so far
}

func (b *bomb) member(p []byte) {
	gz, _ := gzip.NewWriterLevel(&b.out, gzip.BestSpeed)
	gz.Write(p)
	gz.Close()
	b.tar += int64(len(p))
}

// repeat appends chunk n times, compressed once.
func (b *bomb) repeat(chunk []byte, n int) {
	var c bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&c, gzip.BestSpeed)
	gz.Write(chunk)
	gz.Close()
	for range n {
		b.out.Write(c.Bytes())
	}
	b.tar += int64(len(chunk)) * int64(n)
}

// header starts a regular file entry of the given size.
func (b *bomb) header(name string, size int64) {
	var h bytes.Buffer
	tw := tar.NewWriter(&h)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		b.t.Fatal(err)
	}
	b.member(h.Bytes())
}

// pad ends an entry on a 512-byte block.
func (b *bomb) pad() {
	if r := b.tar % 512; r != 0 {
		b.member(make([]byte, 512-r))
	}
}

func (b *bomb) file(name, content string) {
	b.header(name, int64(len(content)))
	b.member([]byte(content))
	b.pad()
}

// end writes tar's end marker.
func (b *bomb) end() { b.member(make([]byte, 1024)) }

func (b *bomb) manifest() {
	b.file("manifest.json", `{"format":"`+host.SnapshotFormat+`","hostname":"bomb","euid":0}`)
}

func (b *bomb) save(dir, name string) string {
	p := filepath.Join(dir, name+".tar.gz")
	if err := os.WriteFile(p, b.out.Bytes(), 0o600); err != nil {
		b.t.Fatal(err)
	}
	return p
}

const mib = 1 << 20

var aChunk = bytes.Repeat([]byte("A"), mib) // base64 of zeros: valid probe output

// bigProbes is probes.json holding n values of size MiB each (valid JSON).
func (b *bomb) bigProbes(n, size int) {
	var parts [][]byte
	for i := range n {
		parts = append(parts, []byte(fmt.Sprintf(`%s"cmd:x%d":{"out":"`, map[bool]string{true: "{", false: ","}[i == 0], i)))
	}
	length := int64(0)
	for _, p := range parts {
		length += int64(len(p)) + int64(size)*mib + 2
	}
	length += 1 + int64(len(`,"readdir:proc":{"out":"MQ=="}`))
	b.header("probes.json", length)
	for _, p := range parts {
		b.member(p)
		b.repeat(aChunk, size)
		b.member([]byte(`"}`))
	}
	b.member([]byte(`,"readdir:proc":{"out":"MQ=="}}`))
	b.pad()
}

// fixtureArchive is a real recorded snapshot, to which a bomb adds.
func fixtureArchive(t *testing.T) []byte {
	b, err := os.ReadFile(fixture.Path("baseline"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBombChild audits the source in DBHOST_BOMB ("--from FILE" or
// "--root DIR"); the parent test measures it. It does nothing in a normal
// run.
func TestBombChild(t *testing.T) {
	src := strings.SplitN(os.Getenv("DBHOST_BOMB"), " ", 2)
	if len(src) != 2 {
		return
	}
	defer peakRSS()
	var out, errb bytes.Buffer
	switch code := cli.Main([]string{"dbhost", "audit", src[0], src[1], "--format", "json", "-v"}, cli.Env{Stdout: &out, Stderr: &errb}); code {
	case cli.ExitOK, cli.ExitFindings:
		fmt.Printf("judged: %d bytes of findings\n", out.Len())
		if os.Getenv("DBHOST_BOMB_PRINT") != "" {
			os.Stdout.Write(out.Bytes())
		}
	default:
		fmt.Println("refused:", errb.String())
	}
}

// peakRSS prints this process's peak resident set (VmHWM): the parent's
// rusage would include what the forked child inherited before exec.
func peakRSS() {
	b, _ := os.ReadFile("/proc/self/status")
	for _, ln := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(ln, "VmHWM:") {
			fmt.Println("peak", strings.TrimSpace(strings.TrimPrefix(ln, "VmHWM:")))
		}
	}
}

type bombResult struct {
	out     string
	elapsed time.Duration
	cpu     time.Duration // user and system time of the child
	rssMB   float64
}

// openInChild opens a snapshot in a fresh process and measures it.
func openInChild(t *testing.T, file string) bombResult {
	t.Helper()
	return auditInChild(t, "--from "+file, "DBHOST_BOMB_PRINT=1")
}

// auditInChild audits source ("--from FILE", "--root DIR") in a fresh
// process and measures it: peak RSS from the child's own VmHWM, as the
// rusage of a child started with vfork counts the parent's pages too.
func auditInChild(t *testing.T, source string, env ...string) bombResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBombChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), "DBHOST_BOMB="+source), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}

	var kb float64
	if i := strings.Index(string(out), "peak "); i >= 0 {
		fmt.Sscanf(string(out)[i:], "peak %f kB", &kb)
	}
	if kb == 0 {
		t.Fatalf("the child did not report its peak RSS:\n%s", out)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return bombResult{out: string(out), elapsed: elapsed, cpu: cpu, rssMB: kb / 1024}
}

// TestSnapshotBombs: hostile archives under 64 MB are judged or refused in
// under 5 s and 200 MB of memory.
func TestSnapshotBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process per archive")
	}
	dir := t.TempDir()
	real := fixtureArchive(t)
	cases := []struct {
		name, want string
		build      func(b *bomb)
	}{
		{"77 probe values of 10 MB", "probes.json is 770.0 MiB, more than the 16.0 MiB", func(b *bomb) {
			b.manifest()
			b.bigProbes(77, 10)
			b.end()
		}},
		{"900 MB probes.json", "probes.json is 900.0 MiB", func(b *bomb) {
			b.manifest()
			b.bigProbes(1, 900)
			b.end()
		}},
		{"probe value over the limit", "holds more than", func(b *bomb) {
			b.manifest()
			b.bigProbes(1, 6)
			b.end()
		}},
		{"900 MB manifest note", "manifest.json is 900.0 MiB, more than the 64.0 KiB", func(b *bomb) {
			const head = `{"format":"dbhost-snapshot/1","note":"`
			b.header("manifest.json", int64(len(head))+900*mib+2)
			b.member([]byte(head))
			b.repeat(aChunk, 900)
			b.member([]byte(`"}`))
			b.pad()
			b.end()
		}},
		{"500 MB after the end marker", "data after the end", func(b *bomb) {
			b.out.Write(real)
			b.repeat(make([]byte, mib), 500)
		}},
		{"60000 files", "entries", func(b *bomb) {
			gz, _ := gzip.NewWriterLevel(&b.out, gzip.BestSpeed)
			tw := tar.NewWriter(gz)
			m := `{"format":"` + host.SnapshotFormat + `"}`
			tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o600, Size: int64(len(m)), Typeflag: tar.TypeReg})
			tw.Write([]byte(m))
			for i := range 60000 {
				tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("fs/proc/%d/comm", i), Mode: 0o600, Size: 2, Typeflag: tar.TypeReg})
				tw.Write([]byte("x\n"))
			}
			tw.Close()
			gz.Close()
		}},
		{"a million tiny probes", "probes", func(b *bomb) {
			b.manifest()
			b.file("probes.json", tinyEntries(16*mib-64, `{}`))
			b.end()
		}},
		{"300000 tiny errors", "errors", func(b *bomb) {
			b.manifest()
			b.file("probes.json", `{"readdir:proc":{"out":"MQ=="}}`)
			b.file("errors.json", tinyEntries(4*mib-64, `""`))
			b.end()
		}},
		{"120 paths 500 deep", "entries and directories", func(b *bomb) {
			b.manifest()
			deep := strings.Repeat("d/", 490)
			for i := range 120 {
				b.file(fmt.Sprintf("fs/%d/%sf", i, deep), "x")
			}
			b.end()
		}},
		{"a 4000-byte name", "more than the 1024", func(b *bomb) {
			b.manifest()
			b.file("fs/"+strings.Repeat("d/", 2000)+"f", "x")
			b.end()
		}},
		{"a 20 MB file", "fs/etc/my.cnf is 20.0 MiB, more than the 8.0 MiB", func(b *bomb) {
			b.manifest()
			b.header("fs/etc/my.cnf", 20*mib)
			b.repeat(aChunk, 20)
			b.end()
		}},
		{"70 MB of files", "more than 64 MiB unpacked", func(b *bomb) {
			b.manifest()
			for i := range 10 {
				b.header(fmt.Sprintf("fs/var/f%d", i), 7*mib)
				b.repeat(aChunk, 7)
			}
			b.end()
		}},
		{"7 MiB mountinfo files", "mountinfo larger than 2 MiB", func(b *bomb) {
			b.out.Write(grownFiles(t, dir, 7*mib, "proc/self/mountinfo", "proc/1/mountinfo"))
		}},
		{"a real snapshot", "judged:", func(b *bomb) { b.out.Write(real) }},
		{"a real snapshot, files grown", "judged:", func(b *bomb) { b.out.Write(grown(t, dir)) }},
		{"costliest files at limits", "judged:", func(b *bomb) { b.out.Write(atLimits(t, dir)) }},
	}
	for _, c := range cases {
		b := &bomb{t: t}
		c.build(b)
		file := b.save(dir, strings.ReplaceAll(c.name, " ", "-"))
		fi, _ := os.Stat(file)
		r := openInChild(t, file)
		t.Logf("%-28s %6.1f MB archive: %-9s in %5.0f ms (CPU %5.0f ms), peak RSS %5.1f MB", c.name, float64(fi.Size())/mib,
			strings.SplitN(r.out, ":", 2)[0], float64(r.elapsed.Microseconds())/1000, float64(r.cpu.Microseconds())/1000, r.rssMB)
		if fi.Size() >= 64*mib {
			t.Errorf("%s: the archive is %d MB, not a small bomb", c.name, fi.Size()/mib)
		}
		if !strings.Contains(r.out, c.want) {
			t.Errorf("%s: want %q, got %.2000s", c.name, c.want, r.out)
		}
		// The CPU the child used is what the archive costs; the time on
		// the clock also counts waiting for the other tests' processes.
		if r.cpu > 5*time.Second || r.rssMB > 200 {
			t.Errorf("%s: %v of CPU (%v on the clock) and %.0f MB RSS, want < 5 s and < 200 MB", c.name, r.cpu, r.elapsed, r.rssMB)
		}
	}
}

// tinyEntries is a JSON object of about size bytes holding as many keys
// as fit, each with value v.
func tinyEntries(size int, v string) string {
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; sb.Len() < size; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, "%q:%s", strconv.Itoa(i), v)
	}
	sb.WriteString("}")
	return sb.String()
}

// grownFiles is the baseline recording with the named files grown to at
// most size bytes by repeating their lines.
func grownFiles(t *testing.T, dir string, size int, names ...string) []byte {
	a, err := derive.Read(fixture.Path("baseline"))
	if err != nil {
		t.Fatal(err)
	}
	grow(t, a, size, names...)
	return writeDerived(t, dir, a)
}

// grow repeats the lines (but the first) of the named files of a, up to
// at most size bytes each.
func grow(t *testing.T, a *derive.Archive, size int, names ...string) {
	t.Helper()
	for _, name := range names {
		c := a.Files["fs/"+name]
		lines := bytes.SplitAfter(c, []byte("\n"))
		if len(lines) < 3 {
			t.Fatalf("%s: %d lines", name, len(lines))
		}
		g := append([]byte(nil), c...)
	fill:
		for {
			for _, ln := range lines[1:] {
				if len(g)+len(ln) > size {
					break fill
				}
				g = append(g, ln...)
			}
		}
		a.Files["fs/"+name] = g
	}
}

// atLimits is the baseline recording with the files whose parsing costs
// the most memory per byte (measured by growing each in turn) at their
// limits: every mountinfo just under 2 MiB and six others just under the
// 8 MiB of one file, 57 MiB in all.
func atLimits(t *testing.T, dir string) []byte {
	a, err := derive.Read(fixture.Path("baseline"))
	if err != nil {
		t.Fatal(err)
	}
	var mountinfo []string
	for name := range a.Files {
		if strings.HasSuffix(name, "/mountinfo") {
			mountinfo = append(mountinfo, strings.TrimPrefix(name, "fs/"))
		}
	}
	grow(t, a, 2*mib-4096, mountinfo...)
	grow(t, a, 8*mib-65536, "usr/lib/udev/rules.d/99-systemd.rules", "usr/lib/udev/rules.d/55-dm.rules",
		"usr/lib/udev/rules.d/70-uaccess.rules", "usr/lib/tmpfiles.d/systemd-pstore.conf",
		"sys/devices/system/node/node0/meminfo", "proc/3798/numa_maps")
	return writeDerived(t, dir, a)
}

func writeDerived(t *testing.T, dir string, a *derive.Archive) []byte {
	t.Helper()
	p := filepath.Join(dir, "derived.tar.gz")
	if err := a.Write(p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// grown is the baseline recording with every file of 1 KB or more grown,
// by repeating its lines, to about 3 MiB (7 MiB for one), staying under
// the limits: what the gatherers parse must stay cheap at that size.
func grown(t *testing.T, dir string) []byte {
	a, err := derive.Read(fixture.Path("baseline"))
	if err != nil {
		t.Fatal(err)
	}
	var total int
	for name, c := range a.Files {
		if len(c) < 1024 || total > 50*mib {
			continue
		}
		want := 3 * mib
		if total == 0 {
			want = 7 * mib
		}
		lines := bytes.SplitAfter(c, []byte("\n"))
		var g []byte
		for len(g) < want {
			for _, ln := range lines[1:] {
				g = append(g, ln...)
			}
		}
		a.Files[name] = append(append([]byte(nil), c...), g...)
		total += len(a.Files[name])
	}
	p := filepath.Join(dir, "grown.tar.gz")
	if err := a.Write(p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
