package facts

import (
	"path"
	"strings"
	"sync"

	"github.com/dbhost/dbhost/internal/host"
)

// devicesMu guards Facts.Storage.Devices: the host gatherer and every
// instance gatherer (which run in parallel) add the devices they walk.
var devicesMu sync.Mutex

// devWalker follows a mounted device down to the physical disks:
// partition → disk, dm/md → slaves, loop → the device of its backing file.
type devWalker struct {
	h *host.Host
	f *Facts
}

func newDevWalker(h *host.Host, f *Facts) *devWalker { return &devWalker{h: h, f: f} }

// stackResult is the device chain below one mount.
type stackResult struct {
	top      string   // mounted device, a partition resolved to its disk
	stack    []string // every device from the mounted one down
	physical []string // leaves: the disks whose queues do the I/O
	err      string
}

// maxStackDepth bounds the walk: real stacks (dm-crypt on LVM on md on
// partitions) are about five deep; sysfs loops must not hang the scan.
const maxStackDepth = 12

// walkMount walks the device stack of a mount with a local block device;
// network filesystems, ZFS and pseudo filesystems have none.
func (w *devWalker) walkMount(m Mount) stackResult {
	if m.Network() || m.FSType == "zfs" {
		return stackResult{}
	}
	devicesMu.Lock()
	defer devicesMu.Unlock()
	if w.f.Storage.Devices == nil {
		w.f.Storage.Devices = map[string]*BlockDevice{}
	}
	return w.walkMountLocked(m, 0)
}

func (w *devWalker) walkMountLocked(m Mount, depth int) stackResult {
	name, sys, err := w.mountDevice(m)
	if err != "" || name == "" {
		return stackResult{err: err}
	}
	var res stackResult
	w.walk(name, sys, depth, &res, map[string]bool{})
	res.top = name
	if d := w.f.Storage.Devices[name]; d != nil && d.Partition && d.Parent != "" {
		res.top = d.Parent
	}
	return res
}

// mountDevice finds the kernel name and sysfs directory of the device a
// filesystem is mounted from: by its device number, or, for filesystems
// that report an anonymous number (btrfs: 0:N), by the /dev source.
func (w *devWalker) mountDevice(m Mount) (name, sys, err string) {
	major, _, _ := strings.Cut(m.MajorMinor, ":")
	if major != "" && major != "0" {
		return w.byNumber(m.MajorMinor)
	}
	if !strings.HasPrefix(m.Source, "/dev/") || pseudoFS[m.FSType] {
		return "", "", ""
	}
	dev := m.Source
	if r, e := w.h.Realpath(dev); e == nil {
		dev = r
	}
	if !strings.HasPrefix(dev, "/dev/") {
		return "", "", ""
	}
	return w.byName(path.Base(dev))
}

var pseudoFS = map[string]bool{"tmpfs": true, "devtmpfs": true, "devpts": true, "mqueue": true,
	"hugetlbfs": true, "ramfs": true, "overlay": true}

// byNumber resolves MAJ:MIN through /sys/dev/block.
func (w *devWalker) byNumber(majmin string) (string, string, string) {
	return w.byLink("/sys/dev/block", majmin)
}

// byName resolves a kernel name through /sys/class/block.
func (w *devWalker) byName(name string) (string, string, string) {
	return w.byLink("/sys/class/block", name)
}

// byLink follows the link dir/id to the device's sysfs directory.
func (w *devWalker) byLink(dir, id string) (string, string, string) {
	link, err := w.h.Readlink(dir + "/" + id)
	if err != nil {
		return "", "", "block device " + id + ": " + host.Explain(err)
	}
	sys := path.Clean(path.Join(dir, link))
	return path.Base(sys), sys, ""
}

func (w *devWalker) walk(name, sys string, depth int, res *stackResult, seen map[string]bool) {
	if depth > maxStackDepth || seen[name] {
		return
	}
	seen[name] = true
	d := w.device(name, sys)
	res.stack = append(res.stack, name)
	switch {
	case d.Partition && d.Parent != "":
		w.walk(d.Parent, path.Dir(sys), depth+1, res, seen)
	case len(d.Slaves) > 0:
		for _, s := range d.Slaves {
			sname, ssys, err := w.byName(s)
			if err != "" {
				res.err = err
				continue
			}
			w.walk(sname, ssys, depth+1, res, seen)
		}
	case d.BackingFile != "":
		// The loop device's I/O lands on the filesystem holding its
		// backing file: that device's queue does the work.
		before := len(res.physical)
		if m := FindMount(w.f.Storage.Mounts, d.BackingFile); m != nil && !m.Network() && m.FSType != "zfs" {
			if bname, bsys, err := w.mountDevice(*m); err == "" && bname != "" {
				d.BackingDevice = bname
				w.walk(bname, bsys, depth+1, res, seen)
			}
		}
		if len(res.physical) == before {
			res.physical = appendUniq(res.physical, name)
		}
	default:
		res.physical = appendUniq(res.physical, name)
	}
}

func appendUniq(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// device reads a block device's attributes once per gathering, each file on
// its own: one missing attribute must not hide the others.
func (w *devWalker) device(name, sys string) *BlockDevice {
	if d, ok := w.f.Storage.Devices[name]; ok {
		return d
	}
	h := w.h
	d := &BlockDevice{Name: name, SysPath: sys, Kind: DeviceKind(name)}
	w.f.Storage.Devices[name] = d
	d.MajorMinor, _ = h.ReadString(sys + "/dev")
	if h.Exists(sys + "/partition") {
		d.Partition = true
		d.Parent = path.Base(path.Dir(sys))
		return d
	}
	// Queue attributes under /sys/block/NAME: the path a fix writes to.
	base := "/sys/block/" + name
	d.Scheduler = h.Read(base + "/queue/scheduler")
	d.Rotational = h.Read(base + "/queue/rotational")
	d.ReadAheadKB = h.Read(base + "/queue/read_ahead_kb")
	d.NrRequests = h.Read(base + "/queue/nr_requests")
	d.WriteCache = h.Read(base + "/queue/write_cache")
	d.Model, _ = h.ReadString(base + "/device/model")
	d.Vendor, _ = h.ReadString(base + "/device/vendor")
	switch d.Kind {
	case "dm":
		d.DMName, _ = h.ReadString(base + "/dm/name")
	case "loop":
		if b, err := h.ReadString(base + "/loop/backing_file"); err == nil {
			d.BackingFile = strings.TrimSuffix(b, " (deleted)")
		}
	}
	if d.Kind == "dm" || d.Kind == "md" || d.Kind == "other" {
		if s, err := h.ReadDir(base + "/slaves"); err == nil {
			d.Slaves = s
		}
	}
	d.Virtual = virtualDevice(d.Kind, d.Vendor, d.Model)
	if !d.Scheduler.OK() && !d.Rotational.OK() && !d.ReadAheadKB.OK() {
		d.Err = d.ReadAheadKB.Err
	}
	return d
}

// DeviceKind classifies a block device by its kernel name.
func DeviceKind(name string) string {
	for _, k := range []struct{ prefix, kind string }{
		{"nvme", "nvme"}, {"xvd", "xen"}, {"vd", "virtio"}, {"sd", "scsi"}, {"hd", "ata"},
		{"mmcblk", "mmc"}, {"loop", "loop"}, {"dm-", "dm"}, {"md", "md"}, {"zram", "zram"},
		{"ram", "ram"}, {"pmem", "pmem"}, {"rbd", "rbd"}, {"nbd", "nbd"},
	} {
		if strings.HasPrefix(name, k.prefix) {
			return k.kind
		}
	}
	return "other"
}

// hypervisorVendors are SCSI vendor strings (and model fragments) of disks
// a hypervisor or cloud presents.
var hypervisorVendors = []string{"QEMU", "VMware", "Msft", "Google", "Amazon", "Red Hat", "VBOX", "Xen", "XENSRC", "Virtual"}

var cloudModels = []string{"Elastic Block Store", "PersistentDisk", "nvme_card-pd", "Virtual Disk", "VBOX HARDDISK", "QEMU HARDDISK", "VMware Virtual"}

// virtualDevice reports a device a hypervisor presents: its queue reaches
// a host that schedules again.
func virtualDevice(kind, vendor, model string) bool {
	switch kind {
	case "virtio", "xen", "rbd", "nbd":
		return true
	case "scsi", "nvme", "ata":
		for _, v := range hypervisorVendors {
			if strings.HasPrefix(strings.TrimSpace(vendor), v) {
				return true
			}
		}
		for _, m := range cloudModels {
			if strings.Contains(strings.ToLower(model), strings.ToLower(m)) {
				return true
			}
		}
	}
	return false
}
