package check

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// Storage checks follow each database path (data directory, WAL, binlog,
// redo) to its mount and down to the physical devices, as
// facts.PathStorage describes it, and judge the queue, filesystem and mount
// options under them. Subjects: "device:NAME" for queue settings,
// "mount:PATH" for mount options, the instance for engine-specific choices,
// "zpool:NAME" for a ZFS pool.

func init() {
	Register(Check{
		ID:        "storage.scheduler",
		Title:     "I/O scheduler of database devices suits the device kind",
		Problem:   "I/O scheduler of database devices does not suit the device kind",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads /sys/block/DEV/queue/scheduler (the bracketed entry is active) of every
physical disk under a database path: the data directory followed through
symlinks, bind mounts, partitions, device-mapper, md RAID and loop devices.
The right scheduler depends on the device:
  NVMe: none. The drive has deep hardware queues; a software scheduler only
    adds CPU cost and lock contention at high IOPS.
  virtual disks (virtio, Xen, a SCSI/NVMe disk whose vendor is a hypervisor
    or cloud): none or mq-deadline. The hypervisor schedules the I/O again
    on the host, so reordering in the guest buys nothing.
  rotational SATA/SAS disks: mq-deadline. Seeks dominate; deadline sorts and
    bounds latency. bfq (and the old cfq) give each process a fair time
    slice and idle the disk waiting for it, which starves a database's many
    concurrent threads: never for databases.
  non-rotational SCSI/SATA (SSD): none or mq-deadline.
The fix is a udev rule (ACTION=="add|change", KERNEL=="DEV",
ATTR{queue/scheduler}="..."), applied now with echo into the same file.`,
		Refs: []string{"https://docs.kernel.org/block/switching-sched.html",
			"https://www.mongodb.com/docs/manual/administration/production-notes/"},
		Run: checkScheduler,
	})
	Register(Check{
		ID:        "storage.read_ahead",
		Title:     "Read-ahead of database data devices is not oversized",
		Problem:   "Read-ahead of database data devices is oversized",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb"},
		Doc: `Reads /sys/block/DEV/queue/read_ahead_kb of the device each data directory's
filesystem is mounted from (a partition's disk, the dm or md device: its
read-ahead is the one the filesystem's page cache uses). Databases read
pages (PostgreSQL 8 KB, InnoDB 16 KB, WiredTiger blocks) mostly at random;
whatever the kernel reads ahead beyond them fills the page cache with data
nobody asked for, evicts hot pages and spends device bandwidth. Limits:
  MongoDB: 16 KB (32 sectors), the starting point MongoDB's production notes
    give for WiredTiger; more only if a test shows a benefit.
  PostgreSQL and MySQL/MariaDB: up to the kernel default of 128 KB.
    Analytic PostgreSQL hosts that scan large tables sometimes raise it on
    purpose; an OLTP server should not inherit a large value by accident
    (some images set 4-8 MB). InnoDB with innodb_flush_method=O_DIRECT reads
    its data files past the page cache, so read-ahead does not apply there.
  Redis serves from memory and reads its RDB/AOF files sequentially at
    start-up, where read-ahead helps: no limit.
With several engines on one device the strictest limit applies. The fix is
a udev rule setting ATTR{queue/read_ahead_kb} (blockdev --setra takes
512-byte sectors: 16 KB = 32 sectors).`,
		Refs: []string{"https://www.mongodb.com/docs/manual/administration/production-notes/#readahead",
			"https://docs.kernel.org/block/queue-sysfs.html"},
		Run: checkReadAhead,
	})
	Register(Check{
		ID:        "storage.rotational_cost",
		Title:     "Database I/O cost settings match the data device",
		Problem:   "Database I/O cost settings do not match the data device",
		Severity:  Info,
		AppliesTo: []string{"postgres", "mysql"},
		Doc: `Compares the rotational flag of the physical devices under the data directory
(/sys/block/DEV/queue/rotational) with the engine's idea of I/O cost.
PostgreSQL's random_page_cost (default 4) models a spinning disk where a
random read costs four sequential ones; on SSD/NVMe random reads are nearly
as cheap as sequential ones and 1.1 lets the planner choose index scans it
would otherwise avoid. MySQL's innodb_io_capacity (default 200) sizes
background flushing for one disk's IOPS; flash sustains far more, and a
low value lets dirty pages pile up until flushing turns aggressive. A
virtual disk's rotational flag is whatever the hypervisor reports (virtio
reports 1 unless told otherwise), so there dbhost says it cannot tell.`,
		Refs: []string{"https://www.postgresql.org/docs/current/runtime-config-query.html#GUC-RANDOM-PAGE-COST",
			"https://dev.mysql.com/doc/refman/8.0/en/innodb-configuring-io-capacity.html"},
		Run: checkRotationalCost,
	})
	Register(Check{
		ID:        "storage.separate_wal",
		Title:     "WAL, binlog and redo on a device of their own",
		Problem:   "WAL, binlog or redo shares a device with the data",
		Severity:  Info,
		AppliesTo: []string{"postgres", "mysql"},
		Doc: `Compares the physical devices (or ZFS pool, or NFS server) under the data
directory with those under the write-ahead log: PostgreSQL's pg_wal (often
a symlink), MySQL's binary log and InnoDB redo log. The log is written
sequentially and fsync'ed at every commit; on the same device it queues
behind random data-file I/O and checkpoints, and commit latency follows.
Separate volumes for OS, data and logs are the usual layout; on a
single-disk VM this is information, not a defect.`,
		Refs: []string{"https://www.postgresql.org/docs/current/wal-internals.html"},
		Run:  checkSeparateWAL,
	})
}

// stPathUse is one database path of one instance.
type stPathUse struct {
	in *facts.Instance
	ps facts.PathStorage
}

func (u stPathUse) String() string {
	return fmt.Sprintf("%s %s %s", u.in.Name(), u.ps.Role, u.ps.Path)
}

// stDevUse is a block device and the database paths on it.
type stDevUse struct {
	name string
	dev  *facts.BlockDevice
	uses []stPathUse
}

// stUsesByDevice groups database paths of the given roles (all when none)
// by a device key: the physical disks, or the mounted (read-ahead) device.
func stUsesByDevice(f *facts.Facts, key func(facts.PathStorage) []string, roles ...string) []stDevUse {
	idx := map[string]*stDevUse{}
	for _, in := range f.Instances {
		for _, ps := range in.Storage {
			if len(roles) > 0 && !stHas(roles, ps.Role) {
				continue
			}
			for _, name := range key(ps) {
				u, ok := idx[name]
				if !ok {
					u = &stDevUse{name: name, dev: f.Storage.Devices[name]}
					idx[name] = u
				}
				u.uses = append(u.uses, stPathUse{in, ps})
			}
		}
	}
	out := make([]stDevUse, 0, len(idx))
	for _, u := range idx {
		out = append(out, *u)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].name < out[b].name })
	return out
}

func stPhysicalKey(ps facts.PathStorage) []string { return ps.Physical }
func stTopKey(ps facts.PathStorage) []string {
	if ps.Device == "" {
		return nil
	}
	return []string{ps.Device}
}

func stHas(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// stPathUnknowns reports, per instance, a data path that could not be
// followed (to a device, when needDevice): checks cannot judge it.
func stPathUnknowns(f *facts.Facts, needDevice bool, engines ...engine.Engine) []Result {
	var out []Result
	for _, in := range f.Instances {
		if len(engines) > 0 && !stHasEngine(engines, in.Engine) {
			continue
		}
		if r, ok := stPathUnknown(in, needDevice); ok {
			out = append(out, r)
		}
	}
	return out
}

func stPathUnknown(in *facts.Instance, needDevice bool) (Result, bool) {
	ps := stDataPath(in)
	switch {
	case ps == nil:
		return UnknownR(in.Name(), "the data directory of "+in.Name()+" is not known, so its storage cannot be followed"), true
	case ps.Err != "":
		return UnknownR(in.Name(), "cannot follow the data directory "+ps.Path+": "+ps.Err, stPathEvidence(*ps)...), true
	case needDevice && ps.Mount != nil && ps.ZFSDataset == "" && !ps.Mount.Network() && len(ps.Physical) == 0 && !stPseudoFS(ps.Mount.FSType):
		why := "no block device found below " + ps.Mount.MountPoint + " (" + ps.Mount.FSType + " from " + ps.Mount.Source + ")"
		if len(ps.Notes) > 0 {
			why += ": " + strings.Join(ps.Notes, "; ")
		}
		return UnknownR(in.Name(), why, stPathEvidence(*ps)...), true
	}
	return Result{}, false
}

func stPseudoFS(t string) bool {
	switch t {
	case "tmpfs", "ramfs", "overlay", "devtmpfs":
		return true
	}
	return false
}

func stHasEngine(es []engine.Engine, e engine.Engine) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}

// stDataPath returns an instance's data directory storage.
func stDataPath(in *facts.Instance) *facts.PathStorage {
	for i := range in.Storage {
		if in.Storage[i].Role == "data" {
			return &in.Storage[i]
		}
	}
	return nil
}

// stPathEvidence describes how a path was followed.
func stPathEvidence(ps facts.PathStorage) []Evidence {
	var ev []Evidence
	p := ps.Path
	if ps.Resolved != "" && ps.Resolved != ps.Path {
		p += " -> " + ps.Resolved
	}
	ev = append(ev, Ev(ps.Role+" path", p, ""))
	if m := ps.Mount; m != nil {
		desc := fmt.Sprintf("%s on %s (%s)", m.Source, m.MountPoint, m.FSType)
		if ps.FSPath != "" && m.Root != "/" {
			desc += ", bind mount of " + m.Root
		}
		ev = append(ev, Ev("mount", desc, ps.MountsFrom))
	}
	if len(ps.Stack) > 0 {
		ev = append(ev, Ev("device stack", strings.Join(ps.Stack, " -> "), "/sys/dev/block"))
	}
	for _, n := range ps.Notes {
		ev = append(ev, Ev("note", n, ""))
	}
	return ev
}

func stUsesEvidence(uses []stPathUse) Evidence {
	var s []string
	for _, u := range uses {
		s = append(s, u.String())
	}
	return Ev("database paths", strings.Join(stUniq(s), "; "), "")
}

func stUniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// stDeviceDesc names a device kind for people: "virtio disk (virtual)".
func stDeviceDesc(d *facts.BlockDevice) string {
	var s string
	switch d.Kind {
	case "nvme":
		s = "NVMe device"
	case "virtio":
		s = "virtio disk"
	case "xen":
		s = "Xen virtual disk"
	case "scsi":
		s = "SCSI/SATA/SAS disk"
		if r, why := d.Rotational.IntIn(0, 1); why == "" && r == 0 {
			s = "non-rotational SCSI/SATA disk (SSD)"
		} else if why == "" {
			s = "rotational SCSI/SATA/SAS disk"
		}
	case "ata":
		s = "ATA disk"
	case "mmc":
		s = "MMC/SD card"
	case "loop":
		s = "loop device"
	case "dm":
		s = "device-mapper device"
	case "md":
		s = "md RAID device"
	case "zram", "ram":
		s = "RAM disk"
	default:
		s = d.Kind + " device"
	}
	vendor := d.Vendor
	if strings.HasPrefix(vendor, "0x") {
		vendor = "" // a PCI vendor ID (virtio's 0x1af4) says nothing more
	}
	if mv := strings.TrimSpace(vendor + " " + d.Model); mv != "" {
		s += " " + mv
	}
	if d.Virtual && d.Kind != "virtio" && d.Kind != "xen" {
		s += " (virtual)"
	}
	return s
}

func stDevEvidence(d *facts.BlockDevice) Evidence {
	return Ev("device kind", stDeviceDesc(d), "/sys/block/"+d.Name)
}

// stUdevFix sets one queue attribute of one device. Queue attributes are
// the host's: in a container the rule belongs on the host.
func stUdevFix(f *facts.Facts, dev, attr, value, summary string) *fix.Fix {
	return &fix.Fix{Summary: summary, HostOnly: f.System.Container != "",
		Udev: []fix.UdevAttr{{Device: dev, Attr: attr, Value: value}}}
}

// stPersistedUdev finds udev rules that already set an attribute for a
// device (their KERNEL== pattern matches its name).
func stPersistedUdev(f *facts.Facts, dev, attr string) []Evidence {
	var ev []Evidence
	short := strings.TrimPrefix(strings.TrimPrefix(attr, "queue/"), "bdi/")
	for _, r := range f.Persist.Udev {
		if strings.TrimPrefix(strings.TrimPrefix(r.Attr, "queue/"), "bdi/") != short {
			continue
		}
		if r.Match != "" {
			if ok, _ := path.Match(r.Match, dev); !ok {
				continue
			}
		}
		ev = append(ev, Ev("udev rule sets "+r.Attr, r.Value, fmt.Sprintf("%s:%d", r.File, r.Line)))
	}
	return ev
}

// schedulerAdvice is what a device kind should run.
type schedulerAdvice struct {
	ok   []string // acceptable active schedulers
	want string   // what the fix sets
	why  string
}

func adviseScheduler(d *facts.BlockDevice) (schedulerAdvice, bool) {
	rot, rotWhy := d.Rotational.IntIn(0, 1)
	rotOK := rotWhy == ""
	switch {
	case d.Kind == "nvme" && !d.Virtual:
		return schedulerAdvice{[]string{"none"}, "none",
			"an NVMe device has many deep hardware queues and orders I/O itself; a software scheduler only adds CPU cost and lock contention"}, true
	case d.Virtual || d.Kind == "virtio" || d.Kind == "xen" || (d.Kind == "nvme" && d.Virtual):
		return schedulerAdvice{[]string{"none", "noop", "mq-deadline", "deadline"}, "none",
			"on a virtual disk the hypervisor schedules the I/O again on its own devices; reordering it in the guest buys nothing, so none (or mq-deadline) is right"}, true
	case (d.Kind == "scsi" || d.Kind == "ata") && rotOK && rot == 1:
		return schedulerAdvice{[]string{"mq-deadline", "deadline"}, "mq-deadline",
			"on a spinning disk seeks dominate; mq-deadline sorts requests and bounds their wait, while bfq/cfq idle the disk to give each process a fair slice, which starves a database's many concurrent threads"}, true
	case d.Kind == "scsi" || d.Kind == "ata" || d.Kind == "mmc":
		if !rotOK {
			return schedulerAdvice{}, false
		}
		return schedulerAdvice{[]string{"none", "noop", "mq-deadline", "deadline"}, "none",
			"a non-rotational disk has no seek cost to optimise; none or mq-deadline keep latency low, bfq/cfq add per-process idling a database pays for"}, true
	}
	return schedulerAdvice{[]string{"none", "noop", "mq-deadline", "deadline"}, "none",
		"a " + stDeviceDesc(d) + " needs no request reordering; none or mq-deadline, never bfq/cfq under a database"}, true
}

func checkScheduler(f *facts.Facts) []Result {
	out := stPathUnknowns(f, true)
	for _, u := range stUsesByDevice(f, stPhysicalKey) {
		subj := "device:" + u.name
		d := u.dev
		if d == nil {
			out = append(out, UnknownR(subj, "device "+u.name+" was not read", stUsesEvidence(u.uses)))
			continue
		}
		ev := []Evidence{EvReading("scheduler", d.Scheduler), stDevEvidence(d), EvReading("rotational", d.Rotational), stUsesEvidence(u.uses)}
		if f.System.Hypervisor != "" {
			ev = append(ev, Ev("hypervisor", f.System.Hypervisor, "/proc/cpuinfo"))
		}
		active, ok := d.ActiveScheduler()
		if !ok && strings.HasSuffix(d.Scheduler.Err, "not present on this host") && d.Rotational.OK() {
			out = append(out, PassR(subj, u.name+" ("+stDeviceDesc(d)+") has no queue/scheduler file: a bio-based device passes requests straight to its driver, no scheduler to choose.", ev...))
			continue
		}
		if !ok {
			out = append(out, UnknownR(subj, "cannot read the I/O scheduler of "+u.name+": "+stOr(d.Scheduler.Err, "no active entry in "+d.Scheduler.Value), ev...))
			continue
		}
		avail := strings.Fields(strings.NewReplacer("[", "", "]", "").Replace(d.Scheduler.Value))
		if len(avail) == 1 && (avail[0] == "none" || avail[0] == "noop") {
			out = append(out, PassR(subj, u.name+" offers no I/O scheduler (only none): requests go to the device as issued.", ev...))
			continue
		}
		adv, ok := adviseScheduler(d)
		if !ok {
			out = append(out, UnknownR(subj, "cannot tell whether "+u.name+" is rotational: "+d.Rotational.Err, ev...))
			continue
		}
		if stHas(adv.ok, active) {
			out = append(out, PassR(subj, fmt.Sprintf("%s (%s) uses %s: %s.", u.name, stDeviceDesc(d), active, adv.why), ev...))
			continue
		}
		want := adv.want
		if !stHas(avail, want) {
			want = ""
			for _, s := range adv.ok {
				if stHas(avail, s) {
					want = s
					break
				}
			}
		}
		reason := fmt.Sprintf("%s (%s) uses the %s scheduler: %s.", u.name, stDeviceDesc(d), active, adv.why)
		if want == "" {
			fx := &fix.Fix{Summary: "Make " + joinOr(adv.ok) + " available for " + u.name,
				Manual: "None of " + joinOr(adv.ok) + " is offered by " + u.name + " (" + d.Scheduler.Value + "): load the scheduler module (modprobe mq-deadline) and select it."}
			out = append(out, FailR(subj, reason, fx, ev...))
			continue
		}
		ev = append(ev, stPersistedUdev(f, u.name, "queue/scheduler")...)
		out = append(out, FailR(subj, reason+" Use "+want+".",
			stUdevFix(f, u.name, "queue/scheduler", want, "Set the I/O scheduler of "+u.name+" to "+want), ev...))
	}
	return out
}

func stOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// readAheadLimit is one engine's ceiling for read_ahead_kb.
type readAheadLimit struct {
	kb  int64 // 0: no limit
	who string
	why string
}

// defaultReadAheadKB is the kernel's default read_ahead_kb.
const defaultReadAheadKB = engine.DefaultReadAheadKB

func readAheadFor(in *facts.Instance) readAheadLimit {
	r := in.Profile().ReadAhead(in.Instance)
	if r.Why == "" {
		return readAheadLimit{}
	}
	return readAheadLimit{r.KB, in.Name(), r.Why}
}

func checkReadAhead(f *facts.Facts) []Result {
	out := stPathUnknowns(f, true, engine.Postgres, engine.MySQL, engine.MongoDB)
	for _, u := range stUsesByDevice(f, stTopKey, "data") {
		subj := "device:" + u.name
		var limit readAheadLimit
		var whys []string
		for _, pu := range u.uses {
			l := readAheadFor(pu.in)
			whys = append(whys, l.why)
			if l.kb > 0 && (limit.kb == 0 || l.kb < limit.kb) {
				limit = l
			}
		}
		d := u.dev
		if d == nil {
			out = append(out, UnknownR(subj, "device "+u.name+" was not read", stUsesEvidence(u.uses)))
			continue
		}
		ev := []Evidence{EvReading("read_ahead_kb", d.ReadAheadKB), stDevEvidence(d), stUsesEvidence(u.uses)}
		kb, why := d.ReadAheadKB.Count()
		if why != "" {
			out = append(out, UnknownR(subj, "cannot judge the read-ahead of "+u.name+": "+why, ev...))
			continue
		}
		if limit.kb == 0 {
			out = append(out, PassR(subj, fmt.Sprintf("%s reads ahead %d KB; no database on it is hurt by read-ahead: %s.", u.name, kb, strings.Join(stUniq(whys), "; ")), ev...))
			continue
		}
		ev = append(ev, Ev("limit", fmt.Sprintf("%d KB (%s)", limit.kb, limit.who), ""))
		if kb <= limit.kb {
			out = append(out, PassR(subj, fmt.Sprintf("%s reads ahead %d KB, within the %d KB that suits %s.", u.name, kb, limit.kb, limit.who), ev...))
			continue
		}
		times := ""
		if kb >= 2*defaultReadAheadKB {
			times = fmt.Sprintf(", %d times the kernel default of %d KB", kb/defaultReadAheadKB, defaultReadAheadKB)
		}
		reason := fmt.Sprintf("%s (%s) reads ahead %d KB%s. %s. Set %d KB.", u.name, stDeviceDesc(d), kb, times, limit.why, limit.kb)
		ev = append(ev, stPersistedUdev(f, u.name, "queue/read_ahead_kb")...)
		out = append(out, FailR(subj, reason,
			stUdevFix(f, u.name, "queue/read_ahead_kb", strconv.FormatInt(limit.kb, 10), fmt.Sprintf("Set read_ahead_kb of %s to %d", u.name, limit.kb)), ev...))
	}
	return out
}

// stMediaOf says what the data of an instance sits on: "flash" (every
// physical device reports rotational 0), "disk" (every one reports 1 and
// is not virtual), "virtual" (a virtual disk reports 1: unknowable) or ""
// with a reason.
func stMediaOf(f *facts.Facts, ps *facts.PathStorage) (string, []Evidence, string) {
	var ev []Evidence
	flash, disk, virt := 0, 0, 0
	for _, name := range ps.Physical {
		d := f.Storage.Devices[name]
		if d == nil {
			return "", ev, "device " + name + " was not read"
		}
		ev = append(ev, EvReading("rotational ("+name+")", d.Rotational), stDevEvidence(d))
		r, why := d.Rotational.IntIn(0, 1)
		switch {
		case why != "":
			return "", ev, "cannot judge the rotational flag of " + name + ": " + why
		case r == 0:
			flash++
		case d.Virtual:
			virt++
		default:
			disk++
		}
	}
	switch {
	case len(ps.Physical) == 0:
		return "", ev, "no block device below the data directory"
	case flash == len(ps.Physical):
		return "flash", ev, ""
	case disk == len(ps.Physical):
		return "disk", ev, ""
	case virt > 0 && flash == 0:
		return "virtual", ev, ""
	}
	return "", ev, "the data directory spans rotational and non-rotational devices"
}

func checkRotationalCost(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		if in.Engine != engine.Postgres && in.Engine != engine.MySQL {
			continue
		}
		ps := stDataPath(in)
		if r, bad := stPathUnknown(in, false); bad {
			out = append(out, r)
			continue
		}
		if ps.Mount != nil && (ps.Mount.Network() || ps.ZFSDataset != "") {
			continue // no local queue to read the flag from
		}
		media, ev, why := stMediaOf(f, ps)
		if why != "" {
			out = append(out, UnknownR(in.Name(), "cannot tell what the data directory sits on: "+why, ev...))
			continue
		}
		if in.Engine == engine.Postgres {
			out = append(out, judgeRandomPageCost(in, media, ev))
		} else {
			out = append(out, judgeIOCapacity(in, media, ev))
		}
	}
	return out
}

func stSetting(in *facts.Instance, name, def string) (string, Evidence) {
	if s, ok := in.Setting(name); ok && s.Value != "" {
		return s.Value, Ev(name, s.Value, s.Source)
	}
	return def, Ev(name, def, "default (not set)")
}

func judgeRandomPageCost(in *facts.Instance, media string, ev []Evidence) Result {
	v, sev := stSetting(in, "random_page_cost", "4")
	ev = append(ev, sev)
	cost, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return UnknownR(in.Name(), "random_page_cost is not a number: "+v, ev...)
	}
	switch media {
	case "virtual":
		return UnknownR(in.Name(), fmt.Sprintf("random_page_cost is %s, but the data sits on a virtual disk that reports rotational=1, as virtio and most hypervisors do whatever the storage behind them is: dbhost cannot tell whether it is flash (use 1.1) or spinning disks (4 is right).", v), ev...)
	case "flash":
		if cost <= 2 {
			return PassR(in.Name(), fmt.Sprintf("random_page_cost is %s on non-rotational storage: the planner knows random reads are cheap.", v), ev...)
		}
		return FailR(in.Name(), fmt.Sprintf("random_page_cost is %s, which models a spinning disk where a random read costs %s sequential ones; the data is on non-rotational storage where random reads are nearly as cheap, so the planner avoids index scans that would be faster. Set 1.1.", v, v),
			&fix.Fix{Summary: "Set random_page_cost to 1.1", Config: []fix.ConfigChange{{Instance: in.Name(), Engine: string(in.Engine), Key: "random_page_cost", Value: "1.1"}}}, ev...)
	}
	if cost >= 2 {
		return PassR(in.Name(), fmt.Sprintf("random_page_cost is %s on rotational disks.", v), ev...)
	}
	return PassR(in.Name(), fmt.Sprintf("random_page_cost is %s although the device reports rotational disks; that suits them only when the array is flash behind a RAID controller (which often reports rotational) or the data is cached.", v), ev...)
}

func judgeIOCapacity(in *facts.Instance, media string, ev []Evidence) Result {
	v, sev := stSetting(in, "innodb_io_capacity", "200")
	ev = append(ev, sev)
	n, ok := mysql.ParseSize(v)
	if !ok {
		return UnknownR(in.Name(), "innodb_io_capacity is not a number: "+v, ev...)
	}
	switch media {
	case "virtual":
		return UnknownR(in.Name(), fmt.Sprintf("innodb_io_capacity is %s, but the data sits on a virtual disk that reports rotational=1 whatever is behind it: dbhost cannot tell whether it sustains more than a disk's ~200 IOPS.", v), ev...)
	case "flash":
		if n > 200 {
			return PassR(in.Name(), fmt.Sprintf("innodb_io_capacity is %s on non-rotational storage.", v), ev...)
		}
		return FailR(in.Name(), fmt.Sprintf("innodb_io_capacity is %s, sized for one spinning disk; the data is on non-rotational storage that sustains thousands of IOPS, and too low a value lets dirty pages pile up until InnoDB flushes in aggressive bursts. Set 1000 (raise further for NVMe after measuring).", v),
			&fix.Fix{Summary: "Set innodb_io_capacity to 1000", Config: []fix.ConfigChange{{Instance: in.Name(), Engine: string(in.Engine), Key: "innodb_io_capacity", Value: "1000"}}}, ev...)
	}
	return PassR(in.Name(), fmt.Sprintf("innodb_io_capacity is %s on rotational disks.", v), ev...)
}

// stStorageKey identifies where a path's I/O lands: its physical disks, its
// ZFS pool or its NFS server.
func stStorageKey(ps *facts.PathStorage) string {
	switch {
	case ps.ZFSDataset != "":
		pool, _, _ := strings.Cut(ps.ZFSDataset, "/")
		return "zfs pool " + pool
	case ps.Mount != nil && ps.Mount.Network():
		server, _, _ := strings.Cut(ps.Mount.Source, ":")
		return ps.Mount.FSType + " server " + server
	case len(ps.Physical) > 0:
		p := append([]string(nil), ps.Physical...)
		sort.Strings(p)
		return "device " + strings.Join(p, "+")
	case ps.Mount != nil:
		return "filesystem " + ps.Mount.MountPoint
	}
	return ""
}

func checkSeparateWAL(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		if in.Engine != engine.Postgres && in.Engine != engine.MySQL {
			continue
		}
		data := stDataPath(in)
		if r, bad := stPathUnknown(in, false); bad {
			out = append(out, r)
			continue
		}
		dk := stStorageKey(data)
		ev := []Evidence{Ev("data", data.Path+" on "+dk, data.MountsFrom)}
		var shared, apart []string
		logs := 0
		for i := range in.Storage {
			ps := &in.Storage[i]
			if !stHas([]string{"wal", "binlog", "redo"}, ps.Role) {
				continue
			}
			logs++
			if ps.Err != "" {
				ev = append(ev, Ev(ps.Role, ps.Path+": "+ps.Err, ""))
				continue
			}
			k := stStorageKey(ps)
			ev = append(ev, Ev(ps.Role, ps.Resolved+" on "+k, ps.MountsFrom))
			if k == dk {
				shared = append(shared, ps.Role)
			} else {
				apart = append(apart, ps.Role)
			}
		}
		if logs == 0 && in.Engine == engine.MySQL {
			shared = append(shared, "binlog and redo log (in the data directory by default)")
		}
		if len(shared) == 0 {
			if len(apart) == 0 {
				out = append(out, UnknownR(in.Name(), "the log paths could not be followed", ev...))
				continue
			}
			out = append(out, PassR(in.Name(), strings.Join(apart, ", ")+" on storage apart from the data directory.", ev...))
			continue
		}
		manual := "Put the write-ahead log on its own volume: stop the server, move pg_wal there and leave a symlink in the data directory (or initdb --waldir for new clusters)."
		if in.Engine == engine.MySQL {
			manual = "Put the binary log (log_bin = /logs/mysql-bin) and redo log (innodb_log_group_home_dir) on their own volume, then restart the server."
		}
		out = append(out, FailR(in.Name(),
			fmt.Sprintf("%s shares %s with the data directory: every commit's sequential log write and fsync queues behind random data-file reads and checkpoint writes on the same device, and commit latency follows them.", strings.Join(shared, ", "), dk),
			&fix.Fix{Summary: "Move the logs of " + in.Name() + " to a separate volume", Manual: manual}, ev...))
	}
	return out
}
