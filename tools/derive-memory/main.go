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
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/fixture/derive"
)

// GiB in kB, for node meminfo.
const gibKB = 1 << 20

var derivations = []derive.Derivation{
	{
		Name: "numa-2node",
		Base: "mem-redis-big",
		Note: "derived from mem-redis-big (a private Redis of about 3.5 GB): the single node0 split into two nodes of 12 GiB (node0 CPU 0 with 0.8 GiB free, node1 CPU 1 with 9 GiB free, distances 10/21), kernel.numa_balancing=1; every process's numa_maps keeps its real pages on N0 under the default policy",
		Edit: func(a *derive.Archive) error {
			if err := twoNodes(a, 800<<10, 9*gibKB); err != nil {
				return err
			}
			a.SetFile("proc/sys/kernel/numa_balancing", "1\n")
			return nil
		},
	},
	{
		Name: "numa-2node-interleave",
		Base: "mem-redis-big",
		Note: "derived from mem-redis-big: two nodes of 12 GiB as in numa-2node (node0 4 GiB free, node1 5 GiB free), kernel.numa_balancing=0, and every process's numa_maps rewritten to policy interleave:0-1 with each mapping's pages split evenly over N0 and N1 (as numactl --interleave=all leaves them)",
		Edit: func(a *derive.Archive) error {
			if err := twoNodes(a, 4*gibKB, 5*gibKB); err != nil {
				return err
			}
			a.SetFile("proc/sys/kernel/numa_balancing", "0\n")
			return eachNUMAMaps(a, interleave)
		},
	},
	{
		Name: "mem-hugepages-sysv",
		Base: "mem-hugepages-mariadb",
		Note: "derived from mem-hugepages-mariadb: the private MariaDB's two MAP_HUGETLB buffer-pool mappings (/anon_hugepage, private) rewritten as shared System V SHM_HUGETLB segments (/SYSV00000000, rw-s, shmid = inode) with matching /proc/sysvipc/shm lines, as MySQL 5.7 and MariaDB 10.4 create them; vm.hugetlb_shm_group stays 0 and the memlock limit stays at 8 MiB",
		Edit: sysvHugetlb,
	},
	{
		Name: "mem-hugepages-sysv-group",
		Base: "mem-hugepages-mariadb",
		Note: "derived from mem-hugepages-mariadb: as mem-hugepages-sysv, and vm.hugetlb_shm_group set to the mysql group",
		Edit: func(a *derive.Archive) error {
			if err := sysvHugetlb(a); err != nil {
				return err
			}
			gid, err := groupID(a, "mysql")
			if err != nil {
				return err
			}
			a.SetFile("proc/sys/vm/hugetlb_shm_group", strconv.Itoa(gid)+"\n")
			return nil
		},
	},
	{
		Name: "mem-denied",
		Base: "mem-dirty-low",
		Note: "derived from mem-dirty-low: every memory file (/proc/meminfo, /proc/swaps, /proc/sysvipc/shm, the vm.* and kernel.shm*/numa_balancing parameters, /sys/kernel/mm, /sys/devices/system/node) replaced by a permission-denied error, as a locked-down sandbox (gVisor, a hardened container) reports them",
		Edit: denyMemory,
	},
}

func main() { derive.Main(derivations) }

const nodeDir = "sys/devices/system/node"

// twoNodes turns the recorded node0 into node0 + node1 of 12 GiB each with
// the given free memory (kB), and lists node1 in the directory probe.
func twoNodes(a *derive.Archive, free0, free1 uint64) error {
	mi, ok := a.File(nodeDir + "/node0/meminfo")
	if !ok {
		return fmt.Errorf("base has no %s/node0/meminfo", nodeDir)
	}
	for id, free := range []uint64{free0, free1} {
		n := fmt.Sprintf("%s/node%d", nodeDir, id)
		a.SetFile(n+"/cpulist", fmt.Sprintf("%d\n", id))
		a.SetFile(n+"/distance", []string{"10 21\n", "21 10\n"}[id])
		a.SetFile(n+"/meminfo", nodeMeminfo(mi, id, 12*gibKB, free))
	}
	key := "readdir:" + nodeDir
	pr, ok := a.Probes[key]
	if !ok {
		return fmt.Errorf("no %s probe", key)
	}
	names := strings.Split(string(pr.Out), "\n")
	if !slices.Contains(names, "node1") {
		names = append(names, "node1")
		sort.Strings(names)
	}
	pr.Out = []byte(strings.Join(names, "\n"))
	a.Probes[key] = pr
	return nil
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
func eachNUMAMaps(a *derive.Archive, fn func(line string) string) error {
	n := a.EditProcLines("numa_maps", func(ln string) string {
		if strings.TrimSpace(ln) == "" {
			return ln
		}
		return fn(ln)
	})
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
func sysvHugetlb(a *derive.Archive) error {
	var pid string
	for name := range a.Files {
		if strings.HasPrefix(name, "fs/proc/") && strings.HasSuffix(name, "/maps") && strings.Contains(string(a.Files[name]), "/anon_hugepage") {
			pid = strings.Split(name, "/")[2]
		}
	}
	if pid == "" {
		return fmt.Errorf("base has no process with /anon_hugepage mappings")
	}
	uid := statusField(a, pid, "Uid")
	mapsName := "fs/proc/" + pid + "/maps"
	lines := strings.Split(string(a.Files[mapsName]), "\n")
	shm, _ := a.File("proc/sysvipc/shm")
	if shm == "" {
		shm = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n"
	}
	gid := statusField(a, pid, "Gid")
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
	a.Files[mapsName] = []byte(strings.Join(lines, "\n"))
	a.SetFile("proc/sysvipc/shm", shm)
	return nil
}

// statusField returns the first value of a /proc/PID/status line.
func statusField(a *derive.Archive, pid, key string) string {
	st, _ := a.File("proc/" + pid + "/status")
	for _, ln := range strings.Split(st, "\n") {
		if k, v, ok := strings.Cut(ln, ":"); ok && k == key {
			if f := strings.Fields(v); len(f) > 0 {
				return f[0]
			}
		}
	}
	return "0"
}

func groupID(a *derive.Archive, name string) (int, error) {
	g, _ := a.File("etc/group")
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
func denyMemory(a *derive.Archive) error {
	var denied []string
	for name := range a.Files {
		rel, ok := strings.CutPrefix(name, "fs/")
		if !ok {
			continue
		}
		for _, p := range deniedPrefixes {
			if strings.HasPrefix(rel, p) {
				denied = append(denied, rel)
				break
			}
		}
	}
	// Files gatherers read that were absent in the base are denied too.
	for _, rel := range []string{"proc/meminfo", "proc/swaps", "proc/sysvipc/shm"} {
		if !slices.Contains(denied, rel) {
			denied = append(denied, rel)
		}
	}
	for _, rel := range denied {
		a.Deny(rel)
	}
	for _, d := range deniedDirs {
		a.SetProbe("readdir:"+d, nil, "open /"+d+": permission denied", 13)
	}
	return nil
}
