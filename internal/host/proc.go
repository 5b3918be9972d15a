package host

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// PIDs lists the processes in /proc.
func (h *Host) PIDs() ([]int, error) {
	pids, err := h.readIDs("/proc")
	if err != nil {
		return nil, err
	}
	sort.Ints(pids)
	return pids, nil
}

// readIDs lists the names in a directory that are positive numbers (PIDs,
// thread IDs), as numbers, in the directory's order.
func (h *Host) readIDs(dir string) ([]int, error) {
	names, err := h.plain().ReadDir(dir)
	if err != nil {
		return nil, err
	}
	ids := make([]int, 0, len(names))
	for _, n := range names {
		if id, err := strconv.Atoi(n); err == nil && id > 0 {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func procPath(pid int, name string) string { return fmt.Sprintf("/proc/%d/%s", pid, name) }

// Comm is the process's command name (/proc/PID/comm).
func (h *Host) Comm(pid int) (string, error) {
	b, err := h.plain().ReadFile(procPath(pid, "comm"))
	return strings.TrimSpace(string(b)), err
}

// Cmdline returns the process's arguments with secrets redacted. dbhost never
// needs a password from a command line, so it never keeps one.
func (h *Host) Cmdline(pid int) ([]string, error) {
	return probeValue(h, fmt.Sprintf("cmdline:%d", pid), func() ([]string, error) {
		b, err := h.readKey(rel(procPath(pid, "cmdline")), MaxFileSize)
		if err != nil {
			return nil, pathErr("open", rel(procPath(pid, "cmdline")), err)
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 1 && args[0] == "" {
			args = nil
		}
		return RedactArgs(args), nil
	})
}

// Exe is the target of /proc/PID/exe (needs the same user or root).
func (h *Host) Exe(pid int) (string, error) {
	t, err := h.plain().Readlink(procPath(pid, "exe"))
	return strings.TrimSuffix(t, " (deleted)"), err
}

// Status parses /proc/PID/status with procfs.
func (h *Host) Status(pid int) (procfs.ProcStatus, error) {
	return parseProc(h, pid, "status", procfs.Proc.NewStatus)
}

// Cgroups parses /proc/PID/cgroup with procfs.
func (h *Host) Cgroups(pid int) ([]procfs.Cgroup, error) {
	return parseProc(h, pid, "cgroup", procfs.Proc.Cgroups)
}

// parseProc parses /proc/PID/name with procfs, after Touch declared the
// file (so that collection records it and a snapshot replays its error).
func parseProc[T any](h *Host, pid int, name string, parse func(procfs.Proc) (T, error)) (T, error) {
	var zero T
	if err := h.Touch(procPath(pid, name)); err != nil {
		return zero, err
	}
	p, err := h.proc.Proc(pid)
	if err != nil {
		return zero, err
	}
	return parse(p)
}

// MountInfo parses /proc/PID/mountinfo with procfs: the mounts as that
// process sees them, which is what matters for its data directory.
//
// Processes of one mount namespace print the same table, and an audit asks
// for PID 1's and each server's several times: a table is parsed once per
// content, so a host (or a snapshot) with many servers pays one parse per
// distinct table. Callers must not modify the result.
func (h *Host) MountInfo(pid int) ([]*procfs.MountInfo, error) {
	return h.mountInfo(procPath(pid, "mountinfo"), func() ([]*procfs.MountInfo, error) { return h.proc.GetProcMounts(pid) })
}

// SelfMountInfo is MountInfo for dbhost's own process (/proc/self), whose
// mounts say where the cgroup hierarchies are.
func (h *Host) SelfMountInfo() ([]*procfs.MountInfo, error) {
	return h.mountInfo("/proc/self/mountinfo", h.proc.GetMounts)
}

func (h *Host) mountInfo(p string, parse func() ([]*procfs.MountInfo, error)) ([]*procfs.MountInfo, error) {
	if err := h.Touch(p); err != nil {
		return nil, err
	}
	b, err := h.plain().ReadFile(p)
	if err != nil {
		return parse()
	}
	key := sha256.Sum256(b)
	h.mountsMu.Lock()
	m, ok := h.mounts[key]
	h.mountsMu.Unlock()
	if ok {
		return m, nil
	}
	m, err = parse()
	if err != nil {
		return nil, err
	}
	h.mountsMu.Lock()
	if h.mounts == nil {
		h.mounts = map[[sha256.Size]byte][]*procfs.MountInfo{}
	}
	h.mounts[key] = m
	h.mountsMu.Unlock()
	return m, nil
}

// Meminfo parses /proc/meminfo with procfs.
func (h *Host) Meminfo() (procfs.Meminfo, error) {
	if err := h.Touch("/proc/meminfo"); err != nil {
		return procfs.Meminfo{}, err
	}
	return h.proc.Meminfo()
}

// Swaps parses /proc/swaps with procfs.
func (h *Host) Swaps() ([]*procfs.Swap, error) {
	if err := h.Touch("/proc/swaps"); err != nil {
		return nil, err
	}
	return h.proc.Swaps()
}

// CPUInfo parses /proc/cpuinfo with procfs.
func (h *Host) CPUInfo() ([]procfs.CPUInfo, error) {
	if err := h.Touch("/proc/cpuinfo"); err != nil {
		return nil, err
	}
	return h.proc.CPUInfo()
}

// CmdLine parses the kernel command line (/proc/cmdline) with procfs.
func (h *Host) CmdLine() ([]string, error) {
	if err := h.Touch("/proc/cmdline"); err != nil {
		return nil, err
	}
	return h.proc.CmdLine()
}

// NetTCP returns the IPv4 and IPv6 TCP sockets (/proc/net/tcp, tcp6).
// A missing tcp6 (IPv6 disabled) is not an error.
func (h *Host) NetTCP() (procfs.NetTCP, error) {
	if err := h.Touch("/proc/net/tcp", "/proc/net/tcp6"); err != nil {
		return nil, err
	}
	// The socket tables as files: readable without privileges and carried
	// by snapshots. (procfs deprecates them in favour of netlink, which
	// sockdiag.go uses for what the files lack: the accept backlog.)
	//lint:ignore SA1019 see above
	v4, err := h.proc.NetTCP()
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 see above
	v6, err := h.proc.NetTCP6()
	if err == nil {
		v4 = append(v4, v6...)
	}
	return v4, nil
}

// SocketInodes lists the inodes of the sockets a process has open, read from
// its /proc/PID/fd links (root or the same user is needed).
func (h *Host) SocketInodes(pid int) ([]uint64, error) {
	return probeValue(h, fmt.Sprintf("sockets:%d", pid), func() ([]uint64, error) {
		dir := procPath(pid, "fd")
		p, err := h.proc.Proc(pid)
		if err != nil {
			return nil, pathErr("open", rel(dir), err)
		}
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			return nil, pathErr("open", rel(dir), err)
		}
		var inodes []uint64
		for _, t := range targets {
			if s, ok := strings.CutPrefix(t, "socket:["); ok {
				if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
					inodes = append(inodes, n)
				}
			}
		}
		return inodes, nil
	})
}

// Sysctl reads a kernel parameter by its dotted name (vm.swappiness),
// trimmed. Tabs between fields (ip_local_port_range) become single spaces.
func (h *Host) Sysctl(name string) (string, error) {
	b, err := h.plain().ReadFile(SysctlPath(name))
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

// SysctlPath maps a sysctl name to its file: vm.swappiness to
// /proc/sys/vm/swappiness. Dots separate components unless the name uses
// slashes, which lets a component hold a dot (net/ipv4/conf/eth0.100/rp_filter),
// as sysctl(8) does.
func SysctlPath(name string) string {
	if strings.Contains(name, "/") {
		return "/proc/sys/" + strings.Trim(name, "/")
	}
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

// ReadString reads a small file and trims surrounding whitespace.
func (h *Host) ReadString(p string) (string, error) {
	b, err := h.ReadFile(p)
	return strings.TrimSpace(string(b)), err
}

// ProcStat parses /proc/PID/stat with procfs (PPID, state, CPU times).
func (h *Host) ProcStat(pid int) (procfs.ProcStat, error) {
	return parseProc(h, pid, "stat", procfs.Proc.Stat)
}

// ProcMaps parses /proc/PID/maps with procfs: the process's mappings with
// their address ranges, permissions and backing files (needs the same user
// or root).
func (h *Host) ProcMaps(pid int) ([]*procfs.ProcMap, error) {
	return parseProc(h, pid, "maps", procfs.Proc.ProcMaps)
}

// HugePagesRoot holds one directory per huge page size the kernel offers.
const HugePagesRoot = "/sys/kernel/mm/hugepages"

// HugePagesDir is the sysfs directory of the pool of one page size.
func HugePagesDir(sizeKB uint64) string {
	return fmt.Sprintf("%s/hugepages-%dkB", HugePagesRoot, sizeKB)
}

// HugePageSizeKB reads the page size from a directory name under
// HugePagesRoot ("hugepages-2048kB"); ok is false for any other name.
func HugePageSizeKB(name string) (kb uint64, ok bool) {
	s, ok := strings.CutPrefix(name, "hugepages-")
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, "kB"); !ok {
		return 0, false
	}
	kb, err := strconv.ParseUint(s, 10, 64)
	return kb, err == nil && kb > 0
}

// ProcIDs is what a process table holds of a process: its name, parent
// and effective user and group.
type ProcIDs struct {
	Name     string
	PPID     int
	UID, GID int
}

// ProcIDs reads a process's name, parent and effective IDs. A live read
// that records nothing parses /proc/PID/status alone (it holds the parent
// too), into buf, which is returned for reuse: a table of hundreds of
// processes costs one read each. Otherwise /proc/PID/stat and status are
// read through procfs, as collections record them and snapshots replay.
func (h *Host) ProcIDs(pid int, buf []byte) (ProcIDs, []byte, error) {
	if !h.live || h.rec != nil || h.confined() || h.view != nil {
		st, err := h.ProcStat(pid)
		if err != nil {
			return ProcIDs{}, buf, err
		}
		status, err := h.Status(pid)
		if err != nil {
			return ProcIDs{}, buf, err
		}
		return ProcIDs{Name: status.Name, PPID: st.PPID, UID: int(status.UIDs[1]), GID: int(status.GIDs[1])}, buf, nil
	}
	buf, err := h.ReadFileInto(procPath(pid, "status"), buf)
	if err != nil {
		return ProcIDs{}, buf, err
	}
	ids, err := parseStatusIDs(buf)
	if err != nil {
		return ProcIDs{}, buf, pathErr("parse", rel(procPath(pid, "status")), err)
	}
	return ids, buf, nil
}

// parseStatusIDs reads Name, PPid, Uid and Gid from /proc/PID/status as
// procfs does: a value is trimmed of spaces and of a " kB" suffix (even a
// name's); of the real, effective, saved and filesystem IDs the effective
// one is kept.
func parseStatusIDs(b []byte) (ProcIDs, error) {
	var ids ProcIDs
	var seen int
	for len(b) > 0 && seen != 0b1111 {
		var ln []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			ln, b = b[:i], b[i+1:]
		} else {
			ln, b = b, nil
		}
		k, v, ok := bytes.Cut(ln, []byte(":"))
		if !ok {
			continue
		}
		val := strings.TrimSuffix(string(bytes.TrimSpace(v)), " kB")
		var err error
		switch string(bytes.TrimSpace(k)) {
		case "Name":
			ids.Name, seen = val, seen|1
		case "PPid":
			ids.PPID, err = strconv.Atoi(val)
			seen |= 2
		case "Uid":
			ids.UID, err = effectiveID(val)
			seen |= 4
		case "Gid":
			ids.GID, err = effectiveID(val)
			seen |= 8
		}
		if err != nil {
			return ProcIDs{}, err
		}
	}
	if seen != 0b1111 {
		return ProcIDs{}, errors.New("no Name, PPid, Uid or Gid line")
	}
	return ids, nil
}

// effectiveID is the second of the four IDs of a Uid or Gid line.
func effectiveID(v string) (int, error) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return 0, fmt.Errorf("%d IDs, want 4", len(f))
	}
	id, err := strconv.ParseUint(f[1], 10, 32)
	return int(id), err
}
