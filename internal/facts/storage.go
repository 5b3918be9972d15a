package facts

import (
	"context"

	"github.com/dbhost/dbhost/internal/host"
)

// Storage describes mounts, block devices and ZFS.
type Storage struct {
	// Mounts are the host's mounts as PID 1 sees them.
	Mounts    []Mount `json:"mounts,omitempty"`
	MountsErr string  `json:"mounts_error,omitempty"`
	// Devices are the block devices that back a database path, by kernel
	// name (vda, nvme0n1, sda, dm-0, md0).
	Devices map[string]*BlockDevice `json:"devices,omitempty"`
	ZFS     *ZFS                    `json:"zfs,omitempty"`
}

// Mount is one line of mountinfo.
type Mount struct {
	ID         int    `json:"id"`
	Parent     int    `json:"parent"`
	MajorMinor string `json:"major_minor"`
	Root       string `json:"root"`
	MountPoint string `json:"mount_point"`
	FSType     string `json:"fstype"`
	Source     string `json:"source"`
	// Options are per-mount options (noatime, ro); SuperOptions are the
	// filesystem's (barrier, data=writeback, rsize, vers, proto, hard).
	Options      map[string]string `json:"options"`
	SuperOptions map[string]string `json:"super_options"`
}

// Option returns a mount or superblock option and whether it is set.
func (m Mount) Option(name string) (string, bool) {
	if v, ok := m.Options[name]; ok {
		return v, true
	}
	v, ok := m.SuperOptions[name]
	return v, ok
}

// BlockDevice is one kernel block device and its queue settings.
type BlockDevice struct {
	Name       string `json:"name"`
	MajorMinor string `json:"major_minor"`
	// Kind: nvme, virtio, xen, scsi (sd*: SATA/SAS/virtual SCSI), mmc,
	// loop, dm, md, zram, rbd, nbd, other.
	Kind string `json:"kind"`
	// Virtual reports a device presented by a hypervisor or cloud (virtio,
	// xen, a SCSI disk whose vendor is a hypervisor).
	Virtual bool   `json:"virtual"`
	Model   string `json:"model,omitempty"`
	Vendor  string `json:"vendor,omitempty"`
	// Scheduler is the raw queue/scheduler line ("none [mq-deadline] bfq").
	Scheduler   host.Reading `json:"scheduler"`
	Rotational  host.Reading `json:"rotational"`
	ReadAheadKB host.Reading `json:"read_ahead_kb"`
	NrRequests  host.Reading `json:"nr_requests"`
	// Slaves are the devices below a dm or md device; Parent is the whole
	// disk of a partition.
	Slaves []string `json:"slaves,omitempty"`
	Parent string   `json:"parent,omitempty"`
	// Partition is true for a partition (its queue is its parent's).
	Partition bool   `json:"partition"`
	DMName    string `json:"dm_name,omitempty"`
	Err       string `json:"error,omitempty"`
}

// PathStorage follows one database path down to physical devices.
type PathStorage struct {
	// Role: data, wal, binlog, redo, tmp, log.
	Role string `json:"role"`
	Path string `json:"path"`
	// Resolved is Path with symbolic links resolved.
	Resolved string `json:"resolved,omitempty"`
	Mount    *Mount `json:"mount,omitempty"`
	// Stack is the chain from the mounted device to the physical ones
	// ("dm-0", "md0", "sda1", "sda"); Physical are the whole disks whose
	// queues matter.
	Stack    []string `json:"stack,omitempty"`
	Physical []string `json:"physical,omitempty"`
	// ZFSDataset is set when the path lives on ZFS.
	ZFSDataset string `json:"zfs_dataset,omitempty"`
	Err        string `json:"error,omitempty"`
}

// ZFS holds `zfs get` and `zpool status` output and ARC statistics.
type ZFS struct {
	// Datasets maps dataset → property → value.
	Datasets map[string]map[string]string `json:"datasets,omitempty"`
	Pools    []ZPool                      `json:"pools,omitempty"`
	ARC      map[string]uint64            `json:"arc,omitempty"`
	Err      string                       `json:"error,omitempty"`
}

// ZPool is one pool and its log (SLOG) and cache (L2ARC) vdevs.
type ZPool struct {
	Name  string   `json:"name"`
	State string   `json:"state"`
	Logs  []string `json:"logs,omitempty"`
	Cache []string `json:"cache,omitempty"`
}

func init() {
	registerHost("storage", gatherStorage)
	registerInstance("storage", gatherInstanceStorage)
}

func gatherStorage(_ context.Context, h *host.Host, f *Facts) {}

func gatherInstanceStorage(_ context.Context, h *host.Host, f *Facts, in *Instance) {}
