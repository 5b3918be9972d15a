package mem

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/textio"
)

// Kinds of shared memory objects.
const (
	KindAnon      = "anon"      // mmap(MAP_SHARED|MAP_ANONYMOUS): "/dev/zero (deleted)"
	KindSysV      = "sysv"      // shmget/shmat: "/SYSV%08x (deleted)", inode = shmid
	KindPOSIX     = "posix"     // shm_open: a file in /dev/shm
	KindMemfd     = "memfd"     // memfd_create: "/memfd:NAME (deleted)"
	KindHugetlb   = "hugetlb"   // mmap(MAP_SHARED|MAP_HUGETLB): "/anon_hugepage (deleted)"
	KindHugetlbfs = "hugetlbfs" // a file on a hugetlbfs mount
	KindTmpfs     = "tmpfs"     // any other tmpfs file mapped shared
)

// objKey identifies a shared object: the device and inode of the file
// behind the mapping. Every shared anonymous region and memfd has its own
// inode on the kernel's internal shm mount; a System V segment's inode
// number is its shmid, which can equal one of those, hence the flag.
type objKey struct {
	major, minor uint32
	ino          uint64
	sysv         bool
}

// mount is one line of mountinfo that matters here.
type mount struct {
	major, minor uint32
	point        string
	fstype       string
}

// mountTable maps devices to the shared-memory filesystems mounted on them.
type mountTable struct {
	byDev map[[2]uint32]mount
	list  []mount // tmpfs, devtmpfs and hugetlbfs mounts, one per device and mount point
}

// parseMountinfo keeps the tmpfs, devtmpfs and hugetlbfs mounts of a
// mountinfo file, the first mount point of each device.
func parseMountinfo(b []byte) *mountTable {
	t := &mountTable{byDev: map[[2]uint32]mount{}}
	atPoint := map[string]int{}
	for _, ln := range bytes.Split(b, []byte{'\n'}) {
		f := strings.Fields(string(ln))
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		sep := -1
		for i, s := range f {
			if s == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(f) {
			continue
		}
		fstype := f[sep+1]
		if fstype != "tmpfs" && fstype != "devtmpfs" && fstype != "hugetlbfs" {
			continue
		}
		maj, min, ok := strings.Cut(f[2], ":")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		m := mount{major: uint32(a), minor: uint32(b), point: textio.UnescapeOctal(f[4]), fstype: fstype}
		k := [2]uint32{m.major, m.minor}
		if _, dup := t.byDev[k]; dup {
			continue // a bind mount of the same filesystem
		}
		t.byDev[k] = m
		if i, ok := atPoint[m.point]; ok {
			// Mounted over an earlier one (mountinfo lists parents
			// first): the path reaches only the top one.
			t.list[i] = m
			continue
		}
		atPoint[m.point] = len(t.list)
		t.list = append(t.list, m)
	}
	return t
}

// classify decides whether a mapping is a shared memory object and of
// which kind. Only MAP_SHARED mappings are: a private mapping of anything
// is the process's own memory (and a private MAP_HUGETLB mapping its own
// hugetlb pages). An ordinary file mapped shared (a data file) is page
// cache, not shared memory.
func (t *mountTable) classify(h *Header) (string, bool) {
	if !h.Shared() {
		return "", false
	}
	p := h.Path
	switch {
	case bytes.HasPrefix(p, []byte("/dev/zero")):
		return KindAnon, true
	case bytes.HasPrefix(p, []byte("/SYSV")):
		return KindSysV, true
	case bytes.HasPrefix(p, []byte("/memfd:")):
		return KindMemfd, true
	case bytes.HasPrefix(p, []byte("/anon_hugepage")):
		return KindHugetlb, true
	case len(p) == 0 || p[0] != '/':
		return "", false // [vdso] and friends, or a mapping without a file
	}
	m, ok := t.byDev[[2]uint32{h.Major, h.Minor}]
	if !ok {
		return "", false
	}
	switch m.fstype {
	case "hugetlbfs":
		return KindHugetlbfs, true
	case "tmpfs":
		if m.point == "/dev/shm" || bytes.HasPrefix(p, []byte("/dev/shm/")) {
			return KindPOSIX, true
		}
		if bytes.HasPrefix(p, []byte("/dev/")) {
			return "", false // device nodes on a tmpfs /dev (containers)
		}
		return KindTmpfs, true
	}
	return "", false // devtmpfs holds device nodes, not memory objects
}

// sysvSeg is one row of /proc/sysvipc/shm.
type sysvSeg struct {
	Key    int64
	ID     uint64
	Size   uint64
	CPID   int
	LPID   int
	Nattch int
	UID    int
	RSS    uint64
	Swap   uint64
	HasRSS bool // the rss/swap columns exist (Linux 4.0+)
}

// parseSysVShm reads /proc/sysvipc/shm:
//
//	key shmid perms size cpid lpid nattch uid gid cuid cgid atime dtime ctime rss swap
func parseSysVShm(b []byte) map[uint64]sysvSeg {
	out := map[uint64]sysvSeg{}
	lines := bytes.Split(b, []byte{'\n'})
	if len(lines) == 0 {
		return out
	}
	col := map[string]int{}
	for i, name := range strings.Fields(string(lines[0])) {
		col[name] = i
	}
	need := []string{"key", "shmid", "size", "cpid", "lpid", "nattch", "uid"}
	for _, n := range need {
		if _, ok := col[n]; !ok {
			return out
		}
	}
	for _, ln := range lines[1:] {
		f := strings.Fields(string(ln))
		if len(f) < len(col) {
			continue
		}
		num := func(name string) (uint64, bool) {
			v, err := strconv.ParseUint(f[col[name]], 10, 64)
			return v, err == nil
		}
		key, err := strconv.ParseInt(f[col["key"]], 10, 64)
		id, ok1 := num("shmid")
		size, ok2 := num("size")
		if err != nil || !ok1 || !ok2 {
			continue
		}
		s := sysvSeg{Key: key, ID: id, Size: size}
		if v, ok := num("cpid"); ok {
			s.CPID = int(v)
		}
		if v, ok := num("lpid"); ok {
			s.LPID = int(v)
		}
		if v, ok := num("nattch"); ok {
			s.Nattch = int(v)
		}
		if v, ok := num("uid"); ok {
			s.UID = int(v)
		}
		if _, ok := col["rss"]; ok {
			r, ok1 := num("rss")
			w, ok2 := num("swap")
			if ok1 && ok2 {
				s.RSS, s.Swap, s.HasRSS = r, w, true
			}
		}
		out[id] = s
	}
	return out
}
