package host

import (
	"bytes"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FileStat is the part of stat(2) that shared-memory accounting needs: the
// identity of a file (device and inode) and its allocated blocks, which for
// a tmpfs or hugetlbfs file are the memory it holds.
type FileStat struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Mode   uint32 `json:"mode"`
	UID    uint32 `json:"uid"`
	Nlink  uint64 `json:"nlink"`
	Size   int64  `json:"size"`
	Blocks int64  `json:"blocks"` // in 512-byte units, as stat(2) counts them
}

// StatFile stats a path, following symbolic links (so that
// /proc/PID/map_files/START-END describes the mapped object itself).
func (h *Host) StatFile(p string) (FileStat, error) {
	key := rel(p)
	return probeValue(h, "statfile:"+key, func() (FileStat, error) {
		st, err := h.statKey(key, true)
		if err != nil {
			return FileStat{}, pathErr("stat", key, err)
		}
		return FileStat{Dev: st.Dev, Ino: st.Ino, Mode: st.Mode, UID: st.Uid, Nlink: st.Nlink, Size: st.Size, Blocks: st.Blocks}, nil
	})
}

// FSStat is the part of statfs(2) that says how much a filesystem holds.
type FSStat struct {
	Type   int64  `json:"type"`
	Bsize  int64  `json:"bsize"`
	Blocks uint64 `json:"blocks"`
	Bfree  uint64 `json:"bfree"`
}

// Used is the space in use, in bytes.
func (s FSStat) Used() uint64 {
	if s.Bfree > s.Blocks || s.Bsize <= 0 {
		return 0
	}
	return (s.Blocks - s.Bfree) * uint64(s.Bsize)
}

// Statfs reports the usage of the filesystem holding a path.
func (h *Host) Statfs(p string) (FSStat, error) {
	key := rel(p)
	return probeValue(h, "statfs:"+key, func() (FSStat, error) {
		fd, err := h.openKey(key, unix.O_PATH)
		if err != nil {
			return FSStat{}, pathErr("statfs", key, err)
		}
		defer unix.Close(fd)
		var st unix.Statfs_t
		if err := unix.Fstatfs(fd, &st); err != nil {
			return FSStat{}, pathErr("statfs", key, err)
		}
		return FSStat{Type: st.Type, Bsize: st.Bsize, Blocks: st.Blocks, Bfree: st.Bfree}, nil
	})
}

// ReadFileInto reads a whole file into buf, growing it when needed, and
// returns the filled slice. It is ReadFile for hot loops over /proc: one
// reused buffer and large reads, so a seq_file such as /proc/PID/smaps is
// produced in a few read calls instead of many small ones. Snapshots and
// collections read through ReadFile, so they record and replay the same.
func (h *Host) ReadFileInto(p string, buf []byte) ([]byte, error) {
	if !h.live || h.rec != nil || h.confined() {
		b, err := h.plain().ReadFile(p)
		return append(buf[:0], b...), err
	}
	fd, _, err := h.openRead(rel(p), MaxFileSize)
	if err != nil {
		return buf[:0], pathErr("open", rel(p), err)
	}
	defer syscall.Close(fd)
	if cap(buf) < 64<<10 {
		buf = make([]byte, 0, 64<<10)
	}
	buf = buf[:cap(buf)]
	n := 0
	for {
		if n == len(buf) {
			if n > MaxFileSize {
				return buf[:0], pathErr("read", rel(p), ErrTooLarge)
			}
			buf = append(buf, make([]byte, len(buf))...)
			buf = buf[:cap(buf)]
		}
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return buf[:0], pathErr("read", rel(p), err)
		}
		if m <= 0 {
			return buf[:n], nil
		}
		n += m
	}
}

// pm_scan_arg and page_region of <linux/fs.h> (Linux 6.7+).
type pmScanArg struct {
	Size, Flags, Start, End, WalkEnd, Vec, VecLen, MaxPages       uint64
	CategoryInverted, CategoryMask, CategoryAnyofMask, ReturnMask uint64
}

type pageRegion struct{ Start, End, Categories uint64 }

const (
	pagemapScan   = 0xC0606610 // _IOWR('f', 16, struct pm_scan_arg)
	pageIsPresent = 1 << 3
)

// PresentPages reports, for each address range of a process, the sub-ranges
// whose pages are present in its page tables, with the PAGEMAP_SCAN ioctl
// of /proc/PID/pagemap (Linux 6.7+; the same access as smaps). It walks only
// those ranges and returns compact runs, where smaps formats every mapping
// of the process. Only on the live system: elsewhere it returns ErrNotLive,
// and callers read smaps instead.
func (h *Host) PresentPages(pid int, ranges [][2]uint64) ([][][2]uint64, error) {
	fd, p, err := h.openLiveProc(pid, "pagemap")
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	vec := make([]pageRegion, 512)
	out := make([][][2]uint64, len(ranges))
	for i, r := range ranges {
		start := r[0]
		for start < r[1] {
			arg := pmScanArg{Size: uint64(unsafe.Sizeof(pmScanArg{})), Start: start, End: r[1],
				Vec: uint64(uintptr(unsafe.Pointer(&vec[0]))), VecLen: uint64(len(vec)),
				CategoryMask: pageIsPresent, ReturnMask: pageIsPresent}
			n, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), pagemapScan, uintptr(unsafe.Pointer(&arg)))
			if errno != 0 {
				return nil, pathErr("ioctl PAGEMAP_SCAN", p, errno)
			}
			runtime.KeepAlive(vec)
			for _, pr := range vec[:n] {
				out[i] = append(out[i], [2]uint64{pr.Start, pr.End})
			}
			if arg.WalkEnd <= start { // no progress: never loop forever
				break
			}
			start = arg.WalkEnd
		}
	}
	return out, nil
}

// openLiveProc opens /proc/PID/name for an ioctl, whose answer a snapshot
// does not hold: only on the live system and not while recording
// (ErrNotLive otherwise). p is the path for error messages.
func (h *Host) openLiveProc(pid int, name string) (fd int, p string, err error) {
	if !h.System() || h.rec != nil {
		return -1, "", ErrNotLive
	}
	p = "proc/" + itoa(pid) + "/" + name
	fd, err = syscall.Open(h.abs(p), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, p, pathErr("open", p, err)
	}
	return fd, p, nil
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// VMA is one mapping of a process as PROCMAP_QUERY reports it.
type VMA struct {
	Start, End, Offset uint64
	Major, Minor       uint32
	Inode              uint64
	Perms              [4]byte // as maps shows them: "rw-s"
	Name               string
}

// struct procmap_query of <linux/fs.h> (Linux 6.11+).
type procmapQuery struct {
	Size, QueryFlags, QueryAddr, VMAStart, VMAEnd, VMAFlags, VMAPageSize, VMAOffset, Inode uint64
	DevMajor, DevMinor, VMANameSize, BuildIDSize                                           uint32
	VMANameAddr, BuildIDAddr                                                               uint64
}

const (
	procmapQueryIoctl  = 0xC0686611 // _IOWR('f', 17, struct procmap_query)
	pmqVMAShared       = 0x08
	pmqCoveringOrNext  = 0x10
	pmqFileBackedVMA   = 0x20
	maxSharedMappings  = 1 << 16
	procmapNameMaxSize = 4096
)

// SharedFileMappings lists a process's MAP_SHARED mappings of files (shared
// memory objects are files: /dev/zero, /SYSV..., /memfd:..., /dev/shm/...)
// with the PROCMAP_QUERY ioctl of /proc/PID/maps (Linux 6.11+): the kernel
// skips every other mapping itself, so a process with none costs one call,
// where reading maps formats all of them. Only on the live system
// (ErrNotLive elsewhere); a kernel without it fails with ENOTTY: callers
// read maps instead.
func (h *Host) SharedFileMappings(pid int) ([]VMA, error) {
	fd, p, err := h.openLiveProc(pid, "maps")
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	name := make([]byte, procmapNameMaxSize)
	var out []VMA
	for addr := uint64(0); len(out) < maxSharedMappings; {
		q := procmapQuery{Size: uint64(unsafe.Sizeof(procmapQuery{})), QueryFlags: pmqVMAShared | pmqCoveringOrNext | pmqFileBackedVMA,
			QueryAddr: addr, VMANameSize: uint32(len(name)), VMANameAddr: uint64(uintptr(unsafe.Pointer(&name[0])))}
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), procmapQueryIoctl, uintptr(unsafe.Pointer(&q)))
		runtime.KeepAlive(name)
		if errno == syscall.ENOENT {
			return out, nil // no mapping at or after addr
		}
		if errno != 0 {
			return nil, pathErr("ioctl PROCMAP_QUERY", p, errno)
		}
		v := VMA{Start: q.VMAStart, End: q.VMAEnd, Offset: q.VMAOffset, Major: q.DevMajor, Minor: q.DevMinor,
			Inode: q.Inode, Perms: [4]byte{'-', '-', '-', 'p'}}
		for i, bit := range []uint64{0x01, 0x02, 0x04} {
			if q.VMAFlags&bit != 0 {
				v.Perms[i] = "rwx"[i]
			}
		}
		if q.VMAFlags&pmqVMAShared != 0 {
			v.Perms[3] = 's'
		}
		if n := int(q.VMANameSize); n > 0 && n <= len(name) {
			v.Name = string(bytes.TrimRight(name[:n], "\x00"))
		}
		out = append(out, v)
		if q.VMAEnd <= addr {
			break // no progress: never loop forever
		}
		addr = q.VMAEnd
	}
	return out, nil
}
