package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

func init() {
	Register(Check{
		ID:        "storage.zfs.recordsize",
		Title:     "ZFS recordsize matches the database page size",
		Problem:   "ZFS recordsize does not match the database page size",
		Severity:  Warning,
		AppliesTo: []string{"zfs", "postgres", "mysql"},
		Doc: `Reads recordsize (zfs get -p) of the dataset holding each database path.
ZFS reads, checksums and rewrites whole records: with the default 128K a
16 KB InnoDB page write becomes a 128K read-modify-write. Data datasets
want the engine's page size: 16K for InnoDB (innodb_page_size), 8K for
PostgreSQL (block_size). Log datasets (WAL, binlog, redo) are written
sequentially and want a large recordsize (128K) for throughput and
compression. A changed recordsize applies to files written afterwards.`,
		Refs: []string{"https://openzfs.github.io/openzfs-docs/Performance%20and%20Tuning/Workload%20Tuning.html#database-workloads"},
		Run:  checkZFSRecordsize,
	})
	Register(Check{
		ID:        "storage.zfs.primarycache",
		Title:     "ZFS ARC does not double-cache what the database caches",
		Problem:   "ZFS ARC caching does not suit the database's own cache",
		Severity:  Warning,
		AppliesTo: []string{"zfs", "postgres", "mysql"},
		Doc: `Reads primarycache of the dataset holding each data directory. InnoDB caches
data pages in its buffer pool; with primarycache=all the ARC keeps a
second copy of the same pages, taking memory the buffer pool should have:
metadata is right for InnoDB data. PostgreSQL is the opposite: its
shared_buffers is deliberately small and it relies on the OS cache (here
the ARC), so it wants primarycache=all.`,
		Refs: []string{"https://openzfs.github.io/openzfs-docs/Performance%20and%20Tuning/Workload%20Tuning.html#innodb"},
		Run:  checkZFSPrimarycache,
	})
	Register(Check{
		ID:        "storage.zfs.atime",
		Title:     "ZFS datasets under databases have atime off",
		Problem:   "ZFS datasets under databases have atime on",
		Severity:  Info,
		AppliesTo: []string{"zfs"},
		Doc: `Reads atime of each dataset holding a database path. With atime=on every
read of a data file updates its access time, a metadata write in a
copy-on-write filesystem. atime=off is the database setting.`,
		Refs: []string{"https://openzfs.github.io/openzfs-docs/man/master/7/zfsprops.7.html"},
		Run:  checkZFSAtime,
	})
	Register(Check{
		ID:        "storage.zfs.compression",
		Title:     "ZFS compression is on for database datasets",
		Problem:   "ZFS compression is off for database datasets",
		Severity:  Info,
		AppliesTo: []string{"zfs"},
		Doc: `Reads compression of each dataset holding a database path. Compression
(lz4 is the usual cheap choice; gzip reached a 4x ratio on MySQL data in
the ZFS seed article at more CPU) shrinks I/O and space; lz4 gives up
quickly on incompressible blocks, so it costs little. off is flagged.`,
		Refs: []string{"https://openzfs.github.io/openzfs-docs/man/master/7/zfsprops.7.html"},
		Run:  checkZFSCompression,
	})
	Register(Check{
		ID:        "storage.zfs.slog_volatile",
		Title:     "ZFS log device is not on volatile memory",
		Problem:   "ZFS log device is on volatile memory",
		Severity:  Critical,
		AppliesTo: []string{"zfs"},
		Doc: `Reads the log vdevs (SLOG) of every pool holding a database path from
zpool status -P and finds where each lives: a file on tmpfs or ramfs
(/dev/shm), a RAM disk (/dev/ram*, /dev/zram*). The SLOG holds
synchronous writes ZFS has acknowledged but not yet written to the pool;
after a crash they are replayed from it. On volatile memory they are gone
after a crash: acknowledged commits are lost and the pool can fail to
import. A RAM SLOG makes fsync look free, which is why it is tempting for
a lagging replica; in production the SLOG belongs on a mirrored pair of
power-loss-protected SSDs.`,
		Refs: []string{"https://openzfs.github.io/openzfs-docs/man/master/7/zpoolconcepts.7.html#Intent_Log"},
		Run:  checkZFSSlog,
	})
}

// zfsUse is a dataset and the database paths on it.
type zfsUse struct {
	dataset string
	mount   facts.Mount
	uses    []stPathUse
}

func zfsDatasets(f *facts.Facts) []zfsUse {
	idx := map[string]*zfsUse{}
	for _, in := range f.Instances {
		for _, ps := range in.Storage {
			if ps.ZFSDataset == "" {
				continue
			}
			u, ok := idx[ps.ZFSDataset]
			if !ok {
				u = &zfsUse{dataset: ps.ZFSDataset, mount: *ps.Mount}
				idx[ps.ZFSDataset] = u
			}
			u.uses = append(u.uses, stPathUse{in, ps})
		}
	}
	out := make([]zfsUse, 0, len(idx))
	for _, u := range idx {
		out = append(out, *u)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].dataset < out[b].dataset })
	return out
}

const zfsGetSource = "zfs get -Hp"

// zfsProp reads a dataset property as evidence, or says why it cannot.
func zfsProp(f *facts.Facts, ds, prop string) (string, Evidence, string) {
	z := f.Storage.ZFS
	if z == nil {
		return "", Ev(prop, "unknown", zfsGetSource), "ZFS was not examined (no zfs mount or /proc/spl/kstat/zfs seen)"
	}
	v, src, ok := z.Property(ds, prop)
	if !ok {
		why := "dataset " + ds + " not in the zfs get output"
		if z.DatasetsErr != "" {
			why = z.DatasetsErr
		}
		return "", Ev(prop, "unknown", zfsGetSource), why
	}
	shown := v
	if src != "" {
		shown += " (" + src + ")"
	}
	return v, Ev(ds+" "+prop, shown, zfsGetSource+" "+prop+" "+ds), ""
}

func zfsSetFix(prop, value, ds, note string) *fix.Fix {
	return &fix.Fix{Summary: fmt.Sprintf("Set %s=%s on %s", prop, value, ds),
		Runtime: []string{fmt.Sprintf("zfs set %s=%s %s", prop, value, ds)},
		Manual:  note}
}

// zfsSize prints a byte count the way zfs does: 16K, 128K, 1M.
func zfsSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

// zfsPageSize is the engine's data page size in bytes.
func zfsPageSize(in *facts.Instance) (int64, string) { return in.Profile().PageSize(in.Instance) }

// logRecordsize is what sequentially written log datasets want.
const logRecordsize = 128 << 10

func checkZFSRecordsize(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		page, pageWhy := zfsPageSize(in)
		if page == 0 {
			continue
		}
		data := stDataPath(in)
		dataDS := ""
		if data != nil {
			dataDS = data.ZFSDataset
		}
		var ev []Evidence
		var problems []string
		var fx *fix.Fix
		unknown := ""
		judged := false
		seen := map[string]bool{}
		for _, ps := range in.Storage {
			ds := ps.ZFSDataset
			logRole := ps.Role == "wal" || ps.Role == "binlog" || ps.Role == "redo"
			if ds == "" || seen[ds] || (ps.Role != "data" && (!logRole || ds == dataDS)) {
				continue
			}
			seen[ds] = true
			v, e, why := zfsProp(f, ds, "recordsize")
			ev = append(ev, e)
			if why != "" {
				unknown = why
				continue
			}
			rs, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				unknown = "recordsize of " + ds + " is not a number: " + v
				continue
			}
			judged = true
			note := "Applies to files written after the change: existing files keep their record size until rewritten (restore a backup or copy the files)."
			if ps.Role == "data" {
				if rs != page {
					problems = append(problems, fmt.Sprintf("the data dataset %s has recordsize %s but the pages are %s (%s): each page write becomes a read-modify-write of a whole record", ds, zfsSize(rs), zfsSize(page), pageWhy))
					if fx == nil {
						fx = zfsSetFix("recordsize", zfsSize(page), ds, note)
					}
				}
			} else if rs < logRecordsize {
				problems = append(problems, fmt.Sprintf("the %s dataset %s has recordsize %s; logs are written sequentially and want 128K for throughput and compression", ps.Role, ds, zfsSize(rs)))
				if fx == nil {
					fx = zfsSetFix("recordsize", "128K", ds, note)
				}
			}
		}
		switch {
		case len(seen) == 0:
			continue
		case len(problems) > 0:
			out = append(out, FailR(in.Name(), strings.Join(problems, "; ")+".", fx, ev...))
		case unknown != "" || !judged:
			out = append(out, UnknownR(in.Name(), "cannot read the ZFS recordsize: "+unknown, ev...))
		default:
			out = append(out, PassR(in.Name(), fmt.Sprintf("ZFS record sizes match: data records equal the %s page, log datasets use large records.", zfsSize(page)), ev...))
		}
	}
	return out
}

func checkZFSPrimarycache(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		if in.Engine != engine.Postgres && in.Engine != engine.MySQL {
			continue
		}
		ps := stDataPath(in)
		if ps == nil || ps.ZFSDataset == "" {
			continue
		}
		ds := ps.ZFSDataset
		v, e, why := zfsProp(f, ds, "primarycache")
		if why != "" {
			out = append(out, UnknownR(in.Name(), "cannot read primarycache: "+why, e))
			continue
		}
		switch {
		case in.Engine == engine.MySQL && v == "metadata":
			out = append(out, PassR(in.Name(), "primarycache=metadata: InnoDB's buffer pool caches the data pages and the ARC keeps only metadata.", e))
		case in.Engine == engine.MySQL:
			out = append(out, FailR(in.Name(), "primarycache="+v+" on the InnoDB data dataset "+ds+": the ARC keeps a second copy of the pages the buffer pool already caches, taking memory the buffer pool should have. Set primarycache=metadata.",
				zfsSetFix("primarycache", "metadata", ds, ""), e))
		case v == "all":
			out = append(out, PassR(in.Name(), "primarycache=all: PostgreSQL relies on the OS cache (the ARC) beyond shared_buffers.", e))
		default:
			out = append(out, FailR(in.Name(), "primarycache="+v+" on the PostgreSQL data dataset "+ds+": PostgreSQL keeps shared_buffers small and relies on the OS cache, which on ZFS is the ARC; without data in it, reads that miss shared_buffers go to disk. Set primarycache=all.",
				zfsSetFix("primarycache", "all", ds, ""), e))
		}
	}
	return out
}

func checkZFSAtime(f *facts.Facts) []Result {
	var out []Result
	for _, u := range zfsDatasets(f) {
		subj := "mount:" + u.mount.MountPoint
		v, e, why := zfsProp(f, u.dataset, "atime")
		ev := []Evidence{e, stUsesEvidence(u.uses)}
		switch {
		case why != "":
			out = append(out, UnknownR(subj, "cannot read atime: "+why, ev...))
		case v == "off":
			out = append(out, PassR(subj, u.dataset+" has atime=off.", ev...))
		default:
			out = append(out, FailR(subj, u.dataset+" has atime="+v+": reads of data files update access times, metadata writes in a copy-on-write filesystem. Set atime=off.",
				zfsSetFix("atime", "off", u.dataset, ""), ev...))
		}
	}
	return out
}

func checkZFSCompression(f *facts.Facts) []Result {
	var out []Result
	for _, u := range zfsDatasets(f) {
		subj := "mount:" + u.mount.MountPoint
		v, e, why := zfsProp(f, u.dataset, "compression")
		ev := []Evidence{e, stUsesEvidence(u.uses)}
		if r, _, ok := f.Storage.ZFS.Property(u.dataset, "compressratio"); ok {
			ev = append(ev, Ev(u.dataset+" compressratio", r, zfsGetSource+" compressratio "+u.dataset))
		}
		switch {
		case why != "":
			out = append(out, UnknownR(subj, "cannot read compression: "+why, ev...))
		case v == "off":
			out = append(out, FailR(subj, u.dataset+" stores blocks uncompressed: lz4 shrinks database I/O and space at little CPU cost and gives up quickly on incompressible blocks. Set compression=lz4 (applies to blocks written afterwards).",
				zfsSetFix("compression", "lz4", u.dataset, ""), ev...))
		default:
			out = append(out, PassR(subj, u.dataset+" compresses with "+v+".", ev...))
		}
	}
	return out
}

// zfsVolatileDevice says why a vdev path lives in memory, or "".
func zfsVolatileDevice(f *facts.Facts, p string) string {
	base := p[strings.LastIndex(p, "/")+1:]
	for _, pre := range []string{"ram", "zram"} {
		if strings.HasPrefix(p, "/dev/"+pre) || strings.HasPrefix(base, pre) && strings.HasPrefix(p, "/dev/") && !strings.HasPrefix(p, "/dev/disk/") {
			return p + " is a RAM disk"
		}
	}
	if m := facts.FindMount(f.Storage.Mounts, p); m != nil && (m.FSType == "tmpfs" || m.FSType == "ramfs") && m.MountPoint != "/dev" {
		return p + " is a file on " + m.FSType + " mounted at " + m.MountPoint
	}
	if strings.HasPrefix(p, "/dev/shm/") {
		return p + " is in /dev/shm, shared memory"
	}
	return ""
}

func checkZFSSlog(f *facts.Facts) []Result {
	z := f.Storage.ZFS
	pools := map[string][]stPathUse{}
	for _, u := range zfsDatasets(f) {
		pool, _, _ := strings.Cut(u.dataset, "/")
		pools[pool] = append(pools[pool], u.uses...)
	}
	var names []string
	for p := range pools {
		names = append(names, p)
	}
	sort.Strings(names)
	var out []Result
	for _, name := range names {
		subj := "zpool:" + name
		ev := []Evidence{stUsesEvidence(pools[name])}
		var pool *facts.ZPool
		if z != nil {
			for i := range z.Pools {
				if z.Pools[i].Name == name {
					pool = &z.Pools[i]
				}
			}
		}
		if pool == nil {
			why := "pool " + name + " not in the zpool status output"
			if z != nil && z.PoolsErr != "" {
				why = z.PoolsErr
			}
			out = append(out, UnknownR(subj, "cannot read the pool's log devices: "+why, ev...))
			continue
		}
		ev = append(ev, Ev("log devices", stOr(strings.Join(pool.Logs, ", "), "none"), "zpool status -P"))
		var bad []string
		for _, l := range pool.Logs {
			if why := zfsVolatileDevice(f, l); why != "" {
				bad = append(bad, why)
			}
		}
		if len(bad) == 0 {
			msg := "pool " + name + " has no separate log device: synchronous writes go to the in-pool ZIL."
			if len(pool.Logs) > 0 {
				msg = "the log devices of pool " + name + " are persistent."
			}
			out = append(out, PassR(subj, msg, ev...))
			continue
		}
		var rm []string
		for _, l := range pool.Logs {
			if zfsVolatileDevice(f, l) != "" {
				rm = append(rm, fmt.Sprintf("zpool remove %s %s", name, l))
			}
		}
		out = append(out, FailR(subj,
			"pool "+name+" logs synchronous writes to volatile memory ("+strings.Join(bad, "; ")+"): after a crash or power loss the writes ZFS acknowledged from it are gone, committed transactions are lost and the pool may not import. Remove it; put a SLOG on mirrored power-loss-protected SSDs if synchronous write latency needs one.",
			&fix.Fix{Summary: "Remove the volatile log device from pool " + name, Runtime: rm,
				Manual: "If a separate log device is needed, add a mirrored pair of SSDs with power-loss protection: zpool add " + name + " log mirror DEV1 DEV2."}, ev...))
	}
	return out
}
