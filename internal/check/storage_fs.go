package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

func init() {
	Register(Check{
		ID:        "storage.filesystem",
		Title:     "Data directory filesystem suits the database",
		Problem:   "Data directory filesystem does not suit the database",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads the filesystem type of the mount holding each data directory (from the
server process's own /proc/PID/mountinfo). XFS and ext4 pass. ext3 is
warned: no extents, block-by-block allocation and a journal that orders
every data write make fsync-heavy databases slow and fragmented. MongoDB
with WiredTiger is warned on anything but XFS: MongoDB strongly advises
XFS because WiredTiger stalls on ext4 during checkpoints. btrfs (without
nodatacow) is warned: copy-on-write rewrites every page a database updates
in place to a new location, fragmenting data files and amplifying writes.
tmpfs/ramfs (lost at reboot) and overlay (a container's writable layer)
are warned. ZFS and NFS are judged by the storage.zfs.* and storage.nfs.*
checks.`,
		Refs: []string{"https://www.mongodb.com/docs/manual/administration/production-notes/#kernel-and-file-systems",
			"https://btrfs.readthedocs.io/en/latest/Administration.html#mount-options"},
		Run: checkFilesystem,
	})
	Register(Check{
		ID:        "storage.noatime",
		Title:     "Database filesystems do not write access times",
		Problem:   "Database filesystems write access times",
		Severity:  Info,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads the per-mount options of every mount holding a database path. With
strictatime every read of a data file dirties its inode, turning reads
into metadata writes. relatime (the default) writes the access time only
when it is older than the last change or a day old; on XFS that is almost
as cheap as noatime and passes. On other filesystems relatime still costs
an inode update on the first read after each write, which for constantly
written database files is most reads: noatime is recommended. NFS and ZFS
mounts are judged by their own checks.`,
		Refs: []string{"https://man7.org/linux/man-pages/man8/mount.8.html"},
		Run:  checkNoatime,
	})
	Register(Check{
		ID:        "storage.barrier",
		Title:     "Write barriers are on under database files",
		Problem:   "Write barriers are off under database files",
		Severity:  Critical,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads the superblock options of every mount holding a database path for
nobarrier / barrier=0 and ext4's data=writeback. Without barriers the
filesystem no longer forces the device's volatile write cache to media at
journal commits and fsync; with data=writeback the journal commits
metadata before the data it points to. On power loss either can leave a
database whose fsync returned with corrupted or stale pages. They are
safe only behind a controller cache that survives power loss (battery or
flash backed), which dbhost cannot see: it reports them and never
recommends them. The barrier options are moot when every device under the mount
reports no volatile write cache (/sys/block/DEV/queue/write_cache "write through"):
the block layer then sends no flushes whatever the options say, and the check
passes and says so; data=writeback is judged regardless, as it is about the
journal's ordering, not the cache.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/ext4.html",
			"https://www.postgresql.org/docs/current/wal-reliability.html",
			"https://docs.kernel.org/block/queue-sysfs.html",
			"https://docs.kernel.org/block/writeback_cache_control.html"},
		Run: checkBarrier,
	})
	Register(Check{
		ID:        "storage.data_on_root",
		Title:     "Data directory is not on the root filesystem",
		Problem:   "Data directory is on the root filesystem",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Finds the mount of each data directory. On "/" a growing database can fill
the filesystem the OS, its logs and package manager need (and a full /
can stop the host), the data cannot get its own mount options, scheduler
or read-ahead, and OS and database I/O share one queue. A dedicated
filesystem (or volume) for data is the usual layout.`,
		Refs: []string{"https://www.postgresql.org/docs/current/creating-cluster.html"},
		Run:  checkDataOnRoot,
	})
}

// stMountUse is a mount and the database paths on it.
type stMountUse struct {
	m    facts.Mount
	uses []stPathUse
}

// stUsesByMount groups the database paths (of the given roles; all when
// none) by the mount holding them.
func stUsesByMount(f *facts.Facts, roles ...string) []stMountUse {
	idx := map[string]*stMountUse{}
	for _, in := range f.Instances {
		for _, ps := range in.Storage {
			if ps.Mount == nil || (len(roles) > 0 && !stHas(roles, ps.Role)) {
				continue
			}
			k := ps.Mount.MountPoint
			u, ok := idx[k]
			if !ok {
				u = &stMountUse{m: *ps.Mount}
				idx[k] = u
			}
			u.uses = append(u.uses, stPathUse{in, ps})
		}
	}
	out := make([]stMountUse, 0, len(idx))
	for _, u := range idx {
		out = append(out, *u)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].m.MountPoint < out[b].m.MountPoint })
	return out
}

func stMountEvidence(m facts.Mount) []Evidence {
	file := m.File
	if file == "" {
		file = "mountinfo"
	}
	return []Evidence{
		Ev("mount", fmt.Sprintf("%s on %s type %s", m.Source, m.MountPoint, m.FSType), file),
		Ev("options", m.OptionString(), file),
	}
}

func checkFilesystem(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		if r, bad := stPathUnknown(in, false); bad {
			out = append(out, r)
			continue
		}
		ps := stDataPath(in)
		m := ps.Mount
		ev := append(stPathEvidence(*ps), stMountEvidence(*m)...)
		subj := in.Name()
		wiredTiger := in.Engine == engine.MongoDB && (in.Mongo == nil || in.Mongo.StorageEngine == "" || strings.EqualFold(in.Mongo.StorageEngine, "wiredTiger"))
		manual := func(what string) *fix.Fix {
			return &fix.Fix{Summary: "Move the data directory of " + subj + " to " + what,
				Manual: "Create an " + what + " filesystem on a dedicated volume, stop the server, copy the data directory there (preserving ownership and permissions), mount it at the data directory's path and start the server."}
		}
		switch {
		case m.NFS() || m.FSType == "zfs":
			out = append(out, PassR(subj, "data on "+m.FSType+": judged by the storage."+map[bool]string{true: "nfs", false: "zfs"}[m.NFS()]+".* checks.", ev...))
		case wiredTiger && m.FSType != "xfs":
			out = append(out, FailR(subj, "MongoDB's WiredTiger data is on "+m.FSType+"; MongoDB strongly recommends XFS, on which WiredTiger avoids the checkpoint stalls it shows on ext4 and others.", manual("XFS"), ev...))
		case m.FSType == "ext3":
			out = append(out, FailR(subj, "the data is on ext3: no extents, block-by-block allocation and a journal that orders every data write make an fsync-heavy database slow and its files fragmented. Use XFS or ext4.", manual("XFS (or ext4)"), ev...))
		case m.FSType == "btrfs":
			if _, ok := m.Option("nodatacow"); ok {
				out = append(out, PassR(subj, "btrfs mounted nodatacow: pages are rewritten in place (btrfs checksums and compression are off for these files).", ev...))
				continue
			}
			fx := manual("XFS (or ext4)")
			fx.Manual += " Or keep btrfs and disable copy-on-write for the data: chattr +C on the empty data directory before the files are created (it only applies to new files), or mount with nodatacow."
			out = append(out, FailR(subj, "the data is on btrfs with copy-on-write: every page the database updates in place is written to a new location, fragmenting data files that are read in order and amplifying writes.", fx, ev...))
		case m.FSType == "tmpfs" || m.FSType == "ramfs":
			out = append(out, FailR(subj, "the data is on "+m.FSType+", which lives in memory: it is lost at every reboot and competes with the database for RAM.", manual("XFS (or ext4)"), ev...))
		case m.FSType == "overlay":
			out = append(out, FailR(subj, "the data is in an overlay filesystem (a container's writable layer): copy-up on first write and layered lookups slow it, and it goes away with the container. Mount a volume at the data directory.", manual("a volume with XFS (or ext4)"), ev...))
		case m.FSType == "xfs" || m.FSType == "ext4":
			out = append(out, PassR(subj, "the data is on "+m.FSType+", a recommended filesystem for databases.", ev...))
		default:
			out = append(out, PassR(subj, "the data is on "+m.FSType+"; dbhost has no rule against it (XFS and ext4 are the usual choices).", ev...))
		}
	}
	return out
}

// stAtimeMode reads the access-time mode of a mount's per-mount options.
func stAtimeMode(m facts.Mount) string {
	for _, o := range []string{"noatime", "relatime", "strictatime"} {
		if _, ok := m.Options[o]; ok {
			return o
		}
	}
	return "strictatime" // the kernel prints nothing for strictatime
}

func checkNoatime(f *facts.Facts) []Result {
	var out []Result
	for _, u := range stUsesByMount(f) {
		m := u.m
		if m.Network() || m.FSType == "zfs" || stPseudoFS(m.FSType) {
			continue
		}
		subj := "mount:" + m.MountPoint
		ev := append(stMountEvidence(m), stUsesEvidence(u.uses))
		mode := stAtimeMode(m)
		fx := &fix.Fix{Summary: "Mount " + m.MountPoint + " with noatime", Mount: []fix.MountChange{{MountPoint: m.MountPoint, Source: m.Source, Add: []string{"noatime"}}}}
		switch {
		case mode == "noatime":
			out = append(out, PassR(subj, m.MountPoint+" is mounted noatime: reads write no access times.", ev...))
		case mode == "relatime" && m.FSType == "xfs":
			out = append(out, PassR(subj, m.MountPoint+" is XFS mounted relatime, which updates an access time at most once per change or day: on XFS almost as cheap as noatime.", ev...))
		case mode == "relatime":
			out = append(out, FailR(subj, m.MountPoint+" ("+m.FSType+") is mounted relatime: the first read after each write still dirties the inode, and database files are written constantly, so many reads become metadata writes. Mount with noatime.", fx, ev...))
		default:
			out = append(out, FailR(subj, m.MountPoint+" ("+m.FSType+") updates the access time on every read (strictatime): each read of a data file becomes an inode write. Mount with noatime.", fx, ev...))
		}
	}
	return append(out, stUnfollowed(f)...)
}

// stUnfollowed says, per instance, that its mount options were not judged
// because its data directory could not be followed to a mount: silence
// would read as "nothing wrong".
func stUnfollowed(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		if r, bad := stPathUnknown(in, false); bad {
			out = append(out, r)
		}
	}
	return out
}

func checkBarrier(f *facts.Facts) []Result {
	var out []Result
	for _, u := range stUsesByMount(f) {
		m := u.m
		if m.Network() || m.FSType == "zfs" || stPseudoFS(m.FSType) {
			continue
		}
		subj := "mount:" + m.MountPoint
		ev := append(stMountEvidence(m), stUsesEvidence(u.uses))
		var bad, remove []string
		if _, ok := m.Option("nobarrier"); ok {
			bad, remove = append(bad, "nobarrier"), append(remove, "nobarrier")
		}
		if v, ok := m.Option("barrier"); ok && v == "0" {
			bad, remove = append(bad, "barrier=0"), append(remove, "barrier=0")
		}
		moot := ""
		if len(bad) > 0 {
			if wt, wev := stWriteThrough(f, u.uses); wt != "" {
				ev = append(ev, wev...)
				moot = fmt.Sprintf(" %s is moot: the device it is mounted from (%s) reports no volatile write cache (queue/write_cache \"write through\"), so the kernel sends it no cache flushes with or without barriers. That holds as long as the device itself reported it: the file is writable, and \"write through\" written over a volatile cache stops every flush whatever the mount options.", strings.Join(bad, ", "), wt)
				bad, remove = nil, nil
			}
		}
		writeback := false
		if v, ok := m.Option("data"); ok && v == "writeback" {
			bad, remove, writeback = append(bad, "data=writeback"), append(remove, "data=writeback"), true
		}
		switch {
		case len(bad) == 0 && moot != "":
			out = append(out, PassR(subj, m.MountPoint+" orders data before metadata, and its"+moot, ev...))
			continue
		case len(bad) == 0:
			out = append(out, PassR(subj, m.MountPoint+" keeps write barriers on and orders data before metadata: an fsync'ed write reaches stable media.", ev...))
			continue
		}
		fx := &fix.Fix{Summary: "Remove " + strings.Join(bad, ", ") + " from " + m.MountPoint,
			Mount: []fix.MountChange{{MountPoint: m.MountPoint, Source: m.Source, Remove: remove}}}
		if len(bad) > 1 || !writeback {
			fx.Runtime = append(fx.Runtime, "mount -o remount,barrier "+m.MountPoint)
		}
		if writeback {
			fx.Manual = "ext4 cannot change its data mode on remount: remove data=writeback from /etc/fstab, stop the database, then umount and mount " + m.MountPoint + " (data=ordered is the default)."
		}
		out = append(out, FailR(subj, fmt.Sprintf("%s is mounted with %s: without barriers the device's volatile write cache is not flushed at journal commits and fsync, and with data=writeback metadata can be committed before the data it points to. On power loss the database can find corrupted or stale pages although fsync returned. This is safe only behind a controller cache with a battery or flash backup, which dbhost cannot see; if yours has one, keep this as a known exception.%s", m.MountPoint, strings.Join(bad, ", "), moot), fx, ev...))
	}
	return append(out, stUnfollowed(f)...)
}

// stWriteThrough names the devices the filesystems are mounted from when
// every one reports no volatile write cache ("" otherwise, or when one is
// unread): the filesystem's flushes go to that device, which drops them,
// so barrier options change nothing.
func stWriteThrough(f *facts.Facts, uses []stPathUse) (string, []Evidence) {
	var names []string
	var ev []Evidence
	for _, pu := range uses {
		name := pu.ps.Device
		d := f.Storage.Devices[name]
		if d == nil || !d.WriteCache.OK() || strings.TrimSpace(d.WriteCache.Value) != "write through" {
			return "", nil
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
			ev = append(ev, EvReading("write_cache ("+name+")", d.WriteCache))
		}
	}
	return strings.Join(names, ", "), ev
}

func checkDataOnRoot(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		if r, bad := stPathUnknown(in, false); bad {
			out = append(out, r)
			continue
		}
		ps := stDataPath(in)
		ev := stPathEvidence(*ps)
		if ps.Mount.MountPoint != "/" {
			out = append(out, PassR(in.Name(), "the data directory is on its own filesystem, "+ps.Mount.MountPoint+".", ev...))
			continue
		}
		out = append(out, FailR(in.Name(),
			"the data directory "+ps.Path+" is on the root filesystem: a growing database can fill / (which the OS, its logs and package manager need), the data cannot get its own mount options, scheduler or read-ahead, and OS and database I/O share one queue.",
			&fix.Fix{Summary: "Give the data directory of " + in.Name() + " its own filesystem",
				Manual: "Create a filesystem (XFS or ext4) on a dedicated volume, stop the server, copy the data directory onto it preserving ownership, mount it at " + ps.Path + " through /etc/fstab and start the server."}, ev...))
	}
	return out
}
