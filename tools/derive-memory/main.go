// Command derive-memory writes the memory fixtures this VM cannot record.
// The VM has one NUMA node and runs no database that creates System V huge
// page segments (MySQL 5.7, MariaDB 10.4), and its procfs never refuses a
// read. Each derived fixture starts from a real recording and edits only the
// entries that differ; the manifest note says "derived: ..." and what
// changed.
//
//	go run ./tools/derive-memory            # all derived fixtures
//	go run ./tools/derive-memory numa-2node
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

type derivation struct {
	name, base, note string
	edit             func(a *archive) error
}

// GiB in kB, for node meminfo.
const gibKB = 1 << 20

var derivations = []derivation{
	{
		name: "numa-2node",
		base: "mem-redis-big",
		note: "derived from mem-redis-big (a private Redis of about 3.5 GB): the single node0 split into two nodes of 12 GiB (node0 CPU 0 with 0.8 GiB free, node1 CPU 1 with 9 GiB free, distances 10/21), kernel.numa_balancing=1; every process's numa_maps keeps its real pages on N0 under the default policy",
		edit: func(a *archive) error {
			if err := a.twoNodes(800<<10, 9*gibKB); err != nil {
				return err
			}
			return a.setFile("proc/sys/kernel/numa_balancing", "1\n")
		},
	},
	{
		name: "numa-2node-interleave",
		base: "mem-redis-big",
		note: "derived from mem-redis-big: two nodes of 12 GiB as in numa-2node (node0 4 GiB free, node1 5 GiB free), kernel.numa_balancing=0, and every process's numa_maps rewritten to policy interleave:0-1 with each mapping's pages split evenly over N0 and N1 (as numactl --interleave=all leaves them)",
		edit: func(a *archive) error {
			if err := a.twoNodes(4*gibKB, 5*gibKB); err != nil {
				return err
			}
			if err := a.setFile("proc/sys/kernel/numa_balancing", "0\n"); err != nil {
				return err
			}
			return a.eachNUMAMaps(interleave)
		},
	},
	{
		name: "mem-hugepages-sysv",
		base: "mem-hugepages-mariadb",
		note: "derived from mem-hugepages-mariadb: the private MariaDB's two MAP_HUGETLB buffer-pool mappings (/anon_hugepage, private) rewritten as shared System V SHM_HUGETLB segments (/SYSV00000000, rw-s, shmid = inode) with matching /proc/sysvipc/shm lines, as MySQL 5.7 and MariaDB 10.4 create them; vm.hugetlb_shm_group stays 0 and the memlock limit stays at 8 MiB",
		edit: func(a *archive) error {
			return a.sysvHugetlb()
		},
	},
	{
		name: "mem-hugepages-sysv-group",
		base: "mem-hugepages-mariadb",
		note: "derived from mem-hugepages-mariadb: as mem-hugepages-sysv, and vm.hugetlb_shm_group set to the mysql group",
		edit: func(a *archive) error {
			if err := a.sysvHugetlb(); err != nil {
				return err
			}
			gid, err := a.groupID("mysql")
			if err != nil {
				return err
			}
			return a.setFile("proc/sys/vm/hugetlb_shm_group", strconv.Itoa(gid)+"\n")
		},
	},
	{
		name: "mem-denied",
		base: "mem-dirty-low",
		note: "derived from mem-dirty-low: every memory file (/proc/meminfo, /proc/swaps, /proc/sysvipc/shm, the vm.* and kernel.shm*/numa_balancing parameters, /sys/kernel/mm, /sys/devices/system/node) replaced by a permission-denied error, as a locked-down sandbox (gVisor, a hardened container) reports them",
		edit: func(a *archive) error {
			return a.denyMemory()
		},
	},
}

func main() {
	dir := flag.String("dir", "testdata/hosts", "fixture directory")
	flag.Parse()
	want := map[string]bool{}
	for _, n := range flag.Args() {
		want[n] = true
	}
	failed := false
	for _, d := range derivations {
		if len(want) > 0 && !want[d.name] {
			continue
		}
		if err := derive(*dir, d); err != nil {
			fmt.Fprintf(os.Stderr, "derive %s: %v\n", d.name, err)
			failed = true
			continue
		}
		fmt.Println("derived", filepath.Join(*dir, d.name+".tar.gz"))
	}
	if failed {
		os.Exit(1)
	}
}

func derive(dir string, d derivation) error {
	a, err := readArchive(filepath.Join(dir, d.base+".tar.gz"))
	if err != nil {
		return err
	}
	if err := d.edit(a); err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(a.files["manifest.json"], &m); err != nil {
		return err
	}
	m["note"] = d.note
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	a.files["manifest.json"] = b
	return a.write(filepath.Join(dir, d.name+".tar.gz"))
}

// archive is a snapshot held in memory: manifest.json, probes.json,
// errors.json and fs/... files.
type archive struct {
	order []string
	files map[string][]byte
	hdr   map[string]*tar.Header
}

func readArchive(p string) (*archive, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	a := &archive{files: map[string][]byte{}, hdr: map[string]*tar.Header{}}
	for {
		h, err := tr.Next()
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
		a.order = append(a.order, h.Name)
		a.files[h.Name] = b
		a.hdr[h.Name] = h
	}
	return a, nil
}

func (a *archive) write(p string) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	meta := a.hdr["manifest.json"]
	names := append([]string(nil), a.order...)
	// Keep the three JSON files first, then fs/ sorted, as collect writes.
	sort.SliceStable(names, func(i, j int) bool {
		fi, fj := strings.HasPrefix(names[i], "fs/"), strings.HasPrefix(names[j], "fs/")
		if fi != fj {
			return !fi
		}
		if fi {
			return names[i] < names[j]
		}
		return false
	})
	for _, n := range names {
		b, ok := a.files[n]
		if !ok {
			continue // removed
		}
		h := &tar.Header{Name: n, Mode: 0o600, Size: int64(len(b)), ModTime: meta.ModTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(p, buf.Bytes(), 0o644)
}

func (a *archive) setFile(rel, content string) error {
	name := "fs/" + rel
	if _, ok := a.files[name]; !ok {
		a.order = append(a.order, name)
	}
	a.files[name] = []byte(content)
	return nil
}

func (a *archive) file(rel string) (string, bool) {
	b, ok := a.files["fs/"+rel]
	return string(b), ok
}

// probes edits probes.json.
func (a *archive) probes(fn func(map[string]map[string]any) error) error {
	var p map[string]map[string]any
	if err := json.Unmarshal(a.files["probes.json"], &p); err != nil {
		return err
	}
	if err := fn(p); err != nil {
		return err
	}
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return err
	}
	a.files["probes.json"] = b
	return nil
}

// errorsJSON edits errors.json (path → error text).
func (a *archive) errorsJSON(fn func(map[string]string)) error {
	e := map[string]string{}
	if b := a.files["errors.json"]; len(b) > 0 {
		if err := json.Unmarshal(b, &e); err != nil {
			return err
		}
	}
	if e == nil {
		e = map[string]string{}
	}
	fn(e)
	b, err := json.MarshalIndent(e, "", " ")
	if err != nil {
		return err
	}
	a.files["errors.json"] = b
	return nil
}

const nodeDir = "sys/devices/system/node"

// twoNodes turns the recorded node0 into node0 + node1 of 12 GiB each with
// the given free memory (kB), and lists node1 in the directory probe.
func (a *archive) twoNodes(free0, free1 uint64) error {
	mi, ok := a.file(nodeDir + "/node0/meminfo")
	if !ok {
		return fmt.Errorf("base has no %s/node0/meminfo", nodeDir)
	}
	for id, free := range []uint64{free0, free1} {
		n := fmt.Sprintf("%s/node%d", nodeDir, id)
		a.setFile(n+"/cpulist", fmt.Sprintf("%d\n", id))
		a.setFile(n+"/distance", []string{"10 21\n", "21 10\n"}[id])
		a.setFile(n+"/meminfo", nodeMeminfo(mi, id, 12*gibKB, free))
	}
	return a.probes(func(p map[string]map[string]any) error {
		key := "readdir:" + nodeDir
		pr, ok := p[key]
		if !ok {
			return fmt.Errorf("no %s probe", key)
		}
		out, err := probeOut(pr)
		if err != nil {
			return err
		}
		names := strings.Split(out, "\n")
		if !contains(names, "node1") {
			names = append(names, "node1")
			sort.Strings(names)
		}
		pr["out"] = []byte(strings.Join(names, "\n"))
		return nil
	})
}

// probeOut decodes a probe's output (JSON base64 bytes).
func probeOut(pr map[string]any) (string, error) {
	b, err := json.Marshal(pr["out"])
	if err != nil {
		return "", err
	}
	var out []byte
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return string(out), nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// nodeMeminfo rewrites a node meminfo for node id with MemTotal/MemFree
// (kB) set and MemUsed derived; other lines keep their recorded values.
func nodeMeminfo(src string, id int, total, free uint64) string {
	var b strings.Builder
	for _, ln := range strings.Split(strings.TrimRight(src, "\n"), "\n") {
		f := strings.Fields(ln)
		if len(f) < 4 {
			continue
		}
		key := f[2]
		val := f[3]
		switch key {
		case "MemTotal:":
			val = strconv.FormatUint(total, 10)
		case "MemFree:":
			val = strconv.FormatUint(free, 10)
		case "MemUsed:":
			val = strconv.FormatUint(total-free, 10)
		}
		unit := ""
		if len(f) > 4 {
			unit = " " + f[4]
		}
		fmt.Fprintf(&b, "Node %d %-15s %8s%s\n", id, key, val, unit)
	}
	return b.String()
}

var nodeCount = regexp.MustCompile(`\bN(\d+)=(\d+)`)

// eachNUMAMaps rewrites every recorded /proc/PID/numa_maps line.
func (a *archive) eachNUMAMaps(fn func(line string) string) error {
	n := 0
	for name, b := range a.files {
		if !strings.HasPrefix(name, "fs/proc/") || !strings.HasSuffix(name, "/numa_maps") {
			continue
		}
		lines := strings.Split(string(b), "\n")
		for i, ln := range lines {
			if strings.TrimSpace(ln) != "" {
				lines[i] = fn(ln)
			}
		}
		a.files[name] = []byte(strings.Join(lines, "\n"))
		n++
	}
	if n == 0 {
		return fmt.Errorf("base has no numa_maps")
	}
	return nil
}

// interleave sets a numa_maps line's policy to interleave:0-1 and splits its
// pages over N0 and N1.
func interleave(ln string) string {
	f := strings.SplitN(ln, " ", 3)
	if len(f) < 2 {
		return ln
	}
	rest := ""
	if len(f) == 3 {
		rest = f[2]
	}
	var total uint64
	for _, m := range nodeCount.FindAllStringSubmatch(rest, -1) {
		v, _ := strconv.ParseUint(m[2], 10, 64)
		total += v
	}
	rest = strings.TrimSpace(nodeCount.ReplaceAllString(rest, ""))
	rest = strings.Join(strings.Fields(rest), " ")
	counts := ""
	if total > 0 {
		counts = fmt.Sprintf("N0=%d", total-total/2)
		if total/2 > 0 {
			counts += fmt.Sprintf(" N1=%d", total/2)
		}
	}
	// Node counts come before kernelpagesize_kB, as the kernel prints them.
	if i := strings.Index(rest, "kernelpagesize_kB="); i >= 0 && counts != "" {
		rest = strings.TrimSpace(rest[:i]) + " " + counts + " " + rest[i:]
	} else if counts != "" {
		rest += " " + counts
	}
	return f[0] + " interleave:0-1 " + strings.TrimSpace(rest)
}

var mapsLine = regexp.MustCompile(`^([0-9a-f]+)-([0-9a-f]+) (\S{4}) (\S+) (\S+) (\d+)\s+(.*)$`)

// sysvHugetlb rewrites the private MAP_HUGETLB mappings of the process that
// has them as SysV SHM_HUGETLB segments and lists them in /proc/sysvipc/shm.
func (a *archive) sysvHugetlb() error {
	var pid string
	for name := range a.files {
		if strings.HasPrefix(name, "fs/proc/") && strings.HasSuffix(name, "/maps") && strings.Contains(string(a.files[name]), "/anon_hugepage") {
			pid = strings.Split(name, "/")[2]
		}
	}
	if pid == "" {
		return fmt.Errorf("base has no process with /anon_hugepage mappings")
	}
	uid := a.statusField(pid, "Uid")
	mapsName := "fs/proc/" + pid + "/maps"
	lines := strings.Split(string(a.files[mapsName]), "\n")
	shm, _ := a.file("proc/sysvipc/shm")
	if shm == "" {
		shm = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n"
	}
	gid := a.statusField(pid, "Gid")
	id := 131072
	for i, ln := range lines {
		m := mapsLine.FindStringSubmatch(ln)
		if m == nil || !strings.HasPrefix(m[7], "/anon_hugepage") {
			continue
		}
		start, _ := strconv.ParseUint(m[1], 16, 64)
		end, _ := strconv.ParseUint(m[2], 16, 64)
		perms := strings.Replace(m[3], "p", "s", 1)
		lines[i] = fmt.Sprintf("%s-%s %s %s %s %-26d%s", m[1], m[2], perms, m[4], m[5], id, "/SYSV00000000 (deleted)")
		shm += fmt.Sprintf("%10d %10d %5d %21d %5s %5s %6d %5s %5s %5s %5s %10d %10d %10d %21d %21d\n",
			0, id, 600, end-start, pid, pid, 1, uid, gid, uid, gid, 0, 0, 1795277863, 0, 0)
		id++
	}
	a.files[mapsName] = []byte(strings.Join(lines, "\n"))
	return a.setFile("proc/sysvipc/shm", shm)
}

// statusField returns the first value of a /proc/PID/status line.
func (a *archive) statusField(pid, key string) string {
	st, _ := a.file("proc/" + pid + "/status")
	for _, ln := range strings.Split(st, "\n") {
		if k, v, ok := strings.Cut(ln, ":"); ok && k == key {
			if f := strings.Fields(v); len(f) > 0 {
				return f[0]
			}
		}
	}
	return "0"
}

func (a *archive) groupID(name string) (int, error) {
	g, _ := a.file("etc/group")
	for _, ln := range strings.Split(g, "\n") {
		f := strings.Split(ln, ":")
		if len(f) > 2 && f[0] == name {
			return strconv.Atoi(f[2])
		}
	}
	return 0, fmt.Errorf("no group %s in etc/group", name)
}

// deniedFiles are the memory domain's files; deniedDirs its directory
// listings (probes).
var (
	deniedPrefixes = []string{"proc/meminfo", "proc/swaps", "proc/sysvipc/", "proc/sys/vm/", "proc/sys/kernel/shm", "proc/sys/kernel/numa_balancing", "sys/kernel/mm/", nodeDir + "/"}
	deniedDirs     = []string{"sys/kernel/mm/hugepages", nodeDir}
)

// denyMemory replaces the memory files by recorded permission errors.
func (a *archive) denyMemory() error {
	var denied []string
	for name := range a.files {
		rel, ok := strings.CutPrefix(name, "fs/")
		if !ok {
			continue
		}
		for _, p := range deniedPrefixes {
			if strings.HasPrefix(rel, p) {
				denied = append(denied, rel)
				delete(a.files, name)
				break
			}
		}
	}
	// Files gatherers read that were absent in the base are denied too.
	for _, rel := range []string{"proc/meminfo", "proc/swaps", "proc/sysvipc/shm"} {
		if !contains(denied, rel) {
			denied = append(denied, rel)
		}
	}
	if err := a.errorsJSON(func(e map[string]string) {
		for _, rel := range denied {
			e[rel] = "permission denied"
		}
	}); err != nil {
		return err
	}
	return a.probes(func(p map[string]map[string]any) error {
		for _, d := range deniedDirs {
			p["readdir:"+d] = map[string]any{"err": "open /" + d + ": permission denied", "errno": 13}
		}
		return nil
	})
}
