package facts

import (
	"context"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Storage describes mounts, block devices and ZFS.
type Storage struct {
	// Mounts are the host's mounts as PID 1 sees them.
	Mounts    []Mount `json:"mounts,omitempty"`
	MountsErr string  `json:"mounts_error,omitempty"`
	// Devices are the block devices that back a mounted filesystem or a
	// database path, by kernel name (vda, nvme0n1, sda, dm-0, md0).
	Devices map[string]*BlockDevice `json:"devices,omitempty"`
	ZFS     *ZFS                    `json:"zfs,omitempty"`
	// Fstab is /etc/fstab, for fixes that edit a mount's line in it.
	Fstab host.Reading `json:"-"`
}

// Mount is one line of mountinfo.
type Mount struct {
	ID         int    `json:"id"`
	Parent     int    `json:"parent"`
	MajorMinor string `json:"major_minor"`
	// Root is the directory of the filesystem mounted here: "/" for a whole
	// filesystem, a subdirectory for a bind mount.
	Root       string `json:"root"`
	MountPoint string `json:"mount_point"`
	FSType     string `json:"fstype"`
	Source     string `json:"source"`
	// Options are per-mount options (noatime, ro); SuperOptions are the
	// filesystem's (barrier, data=writeback, rsize, vers, proto, hard).
	Options      map[string]string `json:"options"`
	SuperOptions map[string]string `json:"super_options"`
	// File is the mountinfo file the line was read from.
	File string `json:"file,omitempty"`
}

// Option returns a mount or superblock option and whether it is set.
func (m Mount) Option(name string) (string, bool) {
	if v, ok := m.Options[name]; ok {
		return v, true
	}
	v, ok := m.SuperOptions[name]
	return v, ok
}

// OptionString renders the options as mountinfo shows them, per-mount
// first, then the superblock's, each sorted: for evidence.
func (m Mount) OptionString() string {
	return joinOpts(m.Options) + " | " + joinOpts(m.SuperOptions)
}

func joinOpts(o map[string]string) string {
	out := make([]string, 0, len(o))
	for k, v := range o {
		if v != "" {
			k += "=" + v
		}
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Network reports a network filesystem (NFS, CIFS, Ceph, GlusterFS).
func (m Mount) Network() bool {
	switch m.FSType {
	case "nfs", "nfs4", "cifs", "smb3", "ceph", "glusterfs", "fuse.glusterfs", "9p", "fuse.sshfs":
		return true
	}
	return false
}

// NFS reports an NFS mount.
func (m Mount) NFS() bool { return m.FSType == "nfs" || m.FSType == "nfs4" }

// BlockDevice is one kernel block device and its queue settings.
type BlockDevice struct {
	Name       string `json:"name"`
	MajorMinor string `json:"major_minor"`
	// SysPath is the device's directory under /sys/devices.
	SysPath string `json:"sys_path,omitempty"`
	// Kind: nvme, virtio, xen, scsi (sd*: SATA/SAS/virtual SCSI), ata, mmc,
	// loop, dm, md, zram, ram, pmem, rbd, nbd, other.
	Kind string `json:"kind"`
	// Virtual reports a device presented by a hypervisor or cloud (virtio,
	// xen, a SCSI or NVMe disk whose vendor or model is a hypervisor's or
	// a cloud's).
	Virtual bool   `json:"virtual"`
	Model   string `json:"model,omitempty"`
	Vendor  string `json:"vendor,omitempty"`
	// Scheduler is the raw queue/scheduler line ("none [mq-deadline] bfq").
	// Partitions have no queue of their own: their parent's applies.
	Scheduler   host.Reading `json:"scheduler"`
	Rotational  host.Reading `json:"rotational"`
	ReadAheadKB host.Reading `json:"read_ahead_kb"`
	NrRequests  host.Reading `json:"nr_requests"`
	// WriteCache is "write back" (a volatile cache the kernel flushes at
	// fsync and journal commits) or "write through" (no flushes are sent).
	WriteCache host.Reading `json:"write_cache"`
	// Slaves are the devices below a dm or md device; Parent is the whole
	// disk of a partition.
	Slaves []string `json:"slaves,omitempty"`
	Parent string   `json:"parent,omitempty"`
	// Partition is true for a partition (its queue is its parent's).
	Partition bool   `json:"partition"`
	DMName    string `json:"dm_name,omitempty"`
	// BackingFile is the file behind a loop device; BackingDevice the
	// device of the filesystem that file lives on.
	BackingFile   string `json:"backing_file,omitempty"`
	BackingDevice string `json:"backing_device,omitempty"`
	Err           string `json:"error,omitempty"`
}

// ActiveScheduler returns the bracketed choice of the scheduler line
// ("mq-deadline" of "none [mq-deadline] bfq"), or the only word when the
// queue offers one.
func (d *BlockDevice) ActiveScheduler() (string, bool) {
	if d == nil || !d.Scheduler.OK() {
		return "", false
	}
	return ActiveChoice(d.Scheduler.Value)
}

// ActiveChoice extracts the bracketed word of a sysfs selector line.
func ActiveChoice(line string) (string, bool) {
	f := strings.Fields(line)
	for _, w := range f {
		if strings.HasPrefix(w, "[") && strings.HasSuffix(w, "]") {
			return strings.Trim(w, "[]"), true
		}
	}
	if len(f) == 1 && schedulers[f[0]] {
		return f[0], true
	}
	return "", false
}

// schedulers are the kernel's I/O schedulers, which a queue with no choice
// shows alone, without brackets.
var schedulers = map[string]bool{"none": true, "noop": true, "mq-deadline": true, "deadline": true, "bfq": true, "cfq": true, "kyber": true}

// PathStorage follows one database path down to physical devices.
type PathStorage struct {
	// Role: data, wal, binlog, redo, tmp, log.
	Role string `json:"role"`
	Path string `json:"path"`
	// Resolved is Path with symbolic links resolved.
	Resolved string `json:"resolved,omitempty"`
	Mount    *Mount `json:"mount,omitempty"`
	// FSPath is the path inside the mounted filesystem: it differs from
	// Resolved below a bind mount (Mount.Root is not "/").
	FSPath string `json:"fs_path,omitempty"`
	// MountsFrom names the mountinfo the mount was looked up in: the
	// instance process's own (/proc/PID/mountinfo) or PID 1's.
	MountsFrom string `json:"mounts_from,omitempty"`
	// Device is the device the filesystem is mounted from, a partition
	// resolved to its disk: its read-ahead is the one the filesystem uses.
	Device string `json:"device,omitempty"`
	// Stack is the chain from the mounted device to the physical ones
	// ("dm-0", "md0", "sda1", "sda"); Physical are the whole disks whose
	// queues matter.
	Stack    []string `json:"stack,omitempty"`
	Physical []string `json:"physical,omitempty"`
	// ZFSDataset is set when the path lives on ZFS.
	ZFSDataset string `json:"zfs_dataset,omitempty"`
	// Notes are caveats that do not stop a verdict (symlinks unresolved,
	// PID 1's mounts used instead of the process's).
	Notes []string `json:"notes,omitempty"`
	// Err says why the path could not be followed.
	Err string `json:"error,omitempty"`
}

// ZFS holds `zfs get` and `zpool status` output and ARC statistics.
type ZFS struct {
	// Datasets maps dataset → property → value (parsable values: record
	// sizes in bytes); Sources → property → "local", "default",
	// "inherited from POOL/DS".
	Datasets map[string]map[string]string `json:"datasets,omitempty"`
	Sources  map[string]map[string]string `json:"sources,omitempty"`
	// DatasetsErr says why `zfs get` failed.
	DatasetsErr string            `json:"datasets_error,omitempty"`
	Pools       []ZPool           `json:"pools,omitempty"`
	PoolsErr    string            `json:"pools_error,omitempty"`
	ARC         map[string]uint64 `json:"arc,omitempty"`
	ARCErr      string            `json:"arc_error,omitempty"`
	// Err is kept for a ZFS that could not be looked at at all.
	Err string `json:"error,omitempty"`
}

// Property returns a dataset's property and its source.
func (z *ZFS) Property(dataset, prop string) (value, source string, ok bool) {
	if z == nil {
		return "", "", false
	}
	v, ok := z.Datasets[dataset][prop]
	return v, z.Sources[dataset][prop], ok
}

// ZPool is one pool and its log (SLOG) and cache (L2ARC) vdevs.
type ZPool struct {
	Name  string   `json:"name"`
	State string   `json:"state"`
	Logs  []string `json:"logs,omitempty"`
	Cache []string `json:"cache,omitempty"`
}

func init() {
	registerHost(DomainStorage, gatherStorage)
	registerInstance("storage", gatherInstanceStorage)
}

// gatherStorage reads the host's mounts, walks the device stack of every
// mounted block device (a few sysfs files each) and, where ZFS is loaded,
// its datasets, pools and ARC.
func gatherStorage(ctx context.Context, h *host.Host, f *Facts) {
	s := &f.Storage
	mounts, err := readMounts(h, 1)
	if err != nil {
		s.MountsErr = host.Explain(err)
	}
	s.Mounts = mounts
	s.Fstab = readFstab(h)
	w := newDevWalker(h, f)
	zfsSeen := false
	for _, m := range mounts {
		if m.FSType == "zfs" {
			zfsSeen = true
		}
		if _, ro := m.Options["ro"]; ro || imageFS[m.FSType] {
			continue // snap/ISO images on loop devices never hold a database
		}
		w.walkMount(m)
	}
	if zfsSeen || h.Exists(zfsKstatDir) {
		s.ZFS = gatherZFS(ctx, h)
	}
}

// gatherInstanceStorage follows each database path of an instance to its
// mount, as the instance's own mount namespace shows it, and to the devices
// below.
func gatherInstanceStorage(_ context.Context, h *host.Host, f *Facts, in *Instance) {
	paths := instancePaths(in.Instance)
	if len(paths) == 0 {
		return
	}
	mounts, from, note := instanceMounts(h, f, in.PID)
	w := newDevWalker(h, f)
	for _, rp := range paths {
		ps := PathStorage{Role: rp.role, Path: rp.path, MountsFrom: from}
		if note != "" {
			ps.Notes = append(ps.Notes, note)
		}
		followPath(h, w, mounts, &ps)
		in.Storage = append(in.Storage, ps)
	}
}

// imageFS are read-only image filesystems (snaps, live media).
var imageFS = map[string]bool{"squashfs": true, "erofs": true, "iso9660": true, "udf": true}

type rolePath struct{ role, path string }

// instancePaths lists the data directory and the other paths by role,
// data first. PostgreSQL's WAL lives in pg_wal inside the data directory
// unless moved (usually by a symlink, which Realpath follows).
func instancePaths(in *engine.Instance) []rolePath {
	var out []rolePath
	seen := map[string]bool{}
	add := func(role, p string) {
		if p == "" || !strings.HasPrefix(p, "/") || seen[role] {
			return
		}
		seen[role] = true
		out = append(out, rolePath{role, cleanPath(p)})
	}
	add("data", in.DataDir)
	if in.Engine == engine.Postgres && in.Paths["wal"] == "" && in.DataDir != "" {
		add("wal", in.DataDir+"/pg_wal")
	}
	roles := make([]string, 0, len(in.Paths))
	for r := range in.Paths {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		add(r, in.Paths[r])
	}
	return out
}

// instanceMounts returns the mounts the instance's process sees. A process
// in its own mount namespace (a container, a systemd unit with
// PrivateTmp or ReadWritePaths) can see a different filesystem at the same
// path; when its mountinfo cannot be read, PID 1's is used and the result
// says so.
func instanceMounts(h *host.Host, f *Facts, pid int) ([]Mount, string, string) {
	file := procFile(pid, "mountinfo")
	ms, err := readMounts(h, pid)
	if err == nil && len(ms) > 0 {
		return ms, file, ""
	}
	why := "empty"
	if err != nil {
		why = host.Explain(err)
	}
	if len(f.Storage.Mounts) == 0 {
		return nil, file, "cannot read " + file + " (" + why + ") nor PID 1's mounts (" + orEmpty(f.Storage.MountsErr, "empty") + ")"
	}
	return f.Storage.Mounts, "/proc/1/mountinfo",
		"could not read " + file + " (" + why + "): judged with PID 1's mounts, which differ if the server runs in its own mount namespace"
}

func orEmpty(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// followPath resolves a path's symlinks, finds its mount and walks the
// devices below it.
func followPath(h *host.Host, w *devWalker, mounts []Mount, ps *PathStorage) {
	ps.Resolved = ps.Path
	if r, err := h.Realpath(ps.Path); err == nil {
		ps.Resolved = r
	} else if host.IsNotExist(err) {
		// The server sees the path, so it exists in its own mount
		// namespace (a container, a unit with private mounts): look it up
		// in the process's mount table unresolved.
		ps.Notes = append(ps.Notes, "symbolic links not resolved: "+ps.Path+" does not exist in dbhost's mount namespace (the server may run in its own)")
	} else {
		ps.Notes = append(ps.Notes, "symbolic links not resolved: "+host.Explain(err))
	}
	if len(mounts) == 0 {
		ps.Err = strings.Join(ps.Notes, "; ")
		ps.Notes = nil
		return
	}
	m := FindMount(mounts, ps.Resolved)
	if m == nil {
		ps.Err = "no mount contains " + ps.Resolved
		return
	}
	mc := *m
	ps.Mount = &mc
	ps.FSPath = fsPath(m, ps.Resolved)
	switch {
	case m.FSType == "zfs":
		ps.ZFSDataset = m.Source
	case m.Network():
		// No local block device: the server's storage is out of sight.
	default:
		st := w.walkMount(*m)
		ps.Device, ps.Stack, ps.Physical = st.top, st.stack, st.physical
		if st.err != "" && len(ps.Stack) == 0 {
			ps.Notes = append(ps.Notes, st.err)
		}
	}
}

// readFstab reads /etc/fstab untrimmed (a fix quotes its lines exactly),
// with password-bearing options (cifs password=) redacted.
func readFstab(h *host.Host) host.Reading {
	b, err := h.ReadConfig("/etc/fstab")
	if err != nil {
		return host.Missing("/etc/fstab", host.Explain(err))
	}
	return host.Reading{Source: "/etc/fstab", Value: string(b)}
}
