package check_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
)

// Storage fixtures: real recordings of this VM (tools/record
// scenarios_storage.go) and, for NFS, ZFS, device-mapper and unreadable
// files, fixtures derived from them (tools/derive-storage).

// stInstance names the instance of a fixture whose data directory is under
// prefix (private servers get random ports).
func stInstance(t *testing.T, name, prefix string) string {
	t.Helper()
	for _, in := range fixture.Facts(t, name).Instances {
		if strings.HasPrefix(in.DataDir, prefix) {
			return in.Name()
		}
	}
	t.Fatalf("%s: no instance with data under %s", name, prefix)
	return ""
}

// stFind returns a finding that must exist, with its status checked.
func stFind(t *testing.T, name, id, subject string, want check.Status) check.Finding {
	t.Helper()
	fd, ok := fixture.Find(t, name, id, subject)
	if !ok {
		t.Fatalf("%s: no %s finding for %s (have %v)", name, id, subject, fixture.Statuses(t, name, id))
	}
	if fd.Status != want {
		t.Fatalf("%s: %s %s = %s, want %s: %s", name, id, subject, fd.Status, want, fd.Reason)
	}
	return fd
}

func stContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not mention %q: %s", what, sub, s)
		}
	}
}

func stEvidence(fd check.Finding, key string) (check.Evidence, bool) {
	for _, e := range fd.Evidence {
		if e.Key == key {
			return e, true
		}
	}
	return check.Evidence{}, false
}

func TestStorageScheduler(t *testing.T) {
	fd := stFind(t, "storage-vda-default", "storage.scheduler", "device:vda", check.Pass)
	stContains(t, "reason", fd.Reason, "virtio", "mq-deadline", "hypervisor")
	stFind(t, "storage-vda-tuned", "storage.scheduler", "device:vda", check.Pass)

	fd = stFind(t, "storage-sched-bfq", "storage.scheduler", "device:vda", check.Fail)
	stContains(t, "reason", fd.Reason, "bfq", "virtio")
	if want := []fix.UdevAttr{{Device: "vda", Attr: "queue/scheduler", Value: "none"}}; !reflect.DeepEqual(fd.Fix.Udev, want) {
		t.Errorf("fix = %+v, want %+v", fd.Fix.Udev, want)
	}
	if e, ok := stEvidence(fd, "scheduler"); !ok || e.Source != "/sys/block/vda/queue/scheduler" || !strings.Contains(e.Value, "[bfq]") {
		t.Errorf("scheduler evidence = %+v", e)
	}
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "echo none > /sys/block/vda/queue/scheduler")

	// zram has no scheduler file at all (bio-based): nothing to choose.
	fd = stFind(t, "storage-zram-default", "storage.scheduler", "device:zram0", check.Pass)
	stContains(t, "reason", fd.Reason, "no queue/scheduler file")
	// The LVM volume's physical volume is judged, not dm-0.
	stFind(t, "storage-dm", "storage.scheduler", "device:vdb", check.Pass)

	fd = stFind(t, "storage-nosysfs", "storage.scheduler", "device:vda", check.Unknown)
	stContains(t, "reason", fd.Reason, "permission denied")
	fd = stFind(t, "storage-nomounts", "storage.scheduler", stInstance(t, "storage-nomounts", "/srv/dbhost/pg/"), check.Unknown)
	stContains(t, "reason", fd.Reason, "mountinfo", "permission denied")
}

// This VM's virtio disk reads ahead 8 MB: the audit must flag it for the
// PostgreSQL on it and give the udev fix.
func TestStorageReadAheadVirtio8192(t *testing.T) {
	fd := stFind(t, "storage-vda-default", "storage.read_ahead", "device:vda", check.Fail)
	stContains(t, "reason", fd.Reason, "8192 KB", "virtio", "64 times", "PostgreSQL", "random", "128")
	if want := []fix.UdevAttr{{Device: "vda", Attr: "queue/read_ahead_kb", Value: "128"}}; !reflect.DeepEqual(fd.Fix.Udev, want) {
		t.Errorf("fix = %+v, want %+v", fd.Fix.Udev, want)
	}
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "echo 128 > /sys/block/vda/queue/read_ahead_kb")
	var rules string
	for _, f := range fd.Fix.Files {
		rules += f.Path + "\n" + f.Content
	}
	stContains(t, "fix files", rules, "/etc/udev/rules.d/60-dbhost.rules", `KERNEL=="vda"`, `ATTR{queue/read_ahead_kb}="128"`)
	if e, ok := stEvidence(fd, "read_ahead_kb"); !ok || e.Value != "8192" || e.Source != "/sys/block/vda/queue/read_ahead_kb" {
		t.Errorf("evidence = %+v", e)
	}
	if e, ok := stEvidence(fd, "device kind"); !ok || !strings.HasPrefix(e.Value, "virtio disk") {
		t.Errorf("device kind evidence = %+v", e)
	}
}

func TestStorageReadAhead(t *testing.T) {
	// The fix applied (recorded after writing 128 to queue/read_ahead_kb).
	stFind(t, "storage-vda-tuned", "storage.read_ahead", "device:vda", check.Pass)
	// The filesystem's own device is judged: the LVM volume, not its disk.
	fd := stFind(t, "storage-dm", "storage.read_ahead", "device:dm-0", check.Fail)
	stContains(t, "reason", fd.Reason, "4096 KB", "device-mapper")
	// MariaDB alone on a device with O_DIRECT: read-ahead does not apply.
	fd = stFind(t, "storage-xfs", "storage.read_ahead", "device:loop1", check.Pass)
	stContains(t, "reason", fd.Reason, "O_DIRECT")
	fd = stFind(t, "storage-nosysfs", "storage.read_ahead", "device:vda", check.Unknown)
	stContains(t, "reason", fd.Reason, "permission denied")
}

func TestStorageRotationalCost(t *testing.T) {
	pg := stInstance(t, "storage-zram-default", "/srv/dbhost/pg/dbhost-pg-")
	my := stInstance(t, "storage-zram-default", "/srv/dbhost/pg/dbhost-mariadb-")
	fd := stFind(t, "storage-zram-default", "storage.rotational_cost", pg, check.Fail)
	if want := []fix.ConfigChange{{Instance: pg, Engine: "postgres", Key: "random_page_cost", Value: "1.1"}}; !reflect.DeepEqual(fd.Fix.Config, want) {
		t.Errorf("fix = %+v", fd.Fix.Config)
	}
	fd = stFind(t, "storage-zram-default", "storage.rotational_cost", my, check.Fail)
	if len(fd.Fix.Config) != 1 || fd.Fix.Config[0].Key != "innodb_io_capacity" || fd.Fix.Config[0].Value != "1000" {
		t.Errorf("fix = %+v", fd.Fix.Config)
	}
	pg = stInstance(t, "storage-zram-tuned", "/srv/dbhost/pg/dbhost-pg-")
	my = stInstance(t, "storage-zram-tuned", "/srv/dbhost/pg/dbhost-mariadb-")
	stFind(t, "storage-zram-tuned", "storage.rotational_cost", pg, check.Pass)
	stFind(t, "storage-zram-tuned", "storage.rotational_cost", my, check.Pass)
	// virtio reports rotational=1 whatever backs it: no verdict.
	fd = stFind(t, "storage-vda-default", "storage.rotational_cost", stInstance(t, "storage-vda-default", "/tmp/dbhost-pg-"), check.Unknown)
	stContains(t, "reason", fd.Reason, "virtual disk", "rotational=1")
}

func TestStorageFilesystem(t *testing.T) {
	stFind(t, "storage-xfs", "storage.filesystem", stInstance(t, "storage-xfs", "/srv/dbhost/pg/"), check.Pass)
	stFind(t, "storage-ext4-part", "storage.filesystem", stInstance(t, "storage-ext4-part", "/srv/dbhost/pg/"), check.Pass)
	fd := stFind(t, "storage-ext3", "storage.filesystem", stInstance(t, "storage-ext3", "/srv/dbhost/pg/"), check.Fail)
	stContains(t, "reason", fd.Reason, "ext3")
	if fd.Fix == nil || fd.Fix.Manual == "" {
		t.Errorf("ext3 needs a manual fix: %+v", fd.Fix)
	}
	fd = stFind(t, "storage-btrfs", "storage.filesystem", stInstance(t, "storage-btrfs", "/srv/dbhost/pg/"), check.Fail)
	stContains(t, "reason", fd.Reason, "copy-on-write")
	stContains(t, "fix", fd.Fix.Manual, "chattr +C")
	fd = stFind(t, "storage-nfs-hard", "storage.filesystem", stInstance(t, "storage-nfs-hard", "/srv/dbhost/pg/"), check.Pass)
	stContains(t, "reason", fd.Reason, "storage.nfs")
	fd = stFind(t, "storage-nomounts", "storage.filesystem", stInstance(t, "storage-nomounts", "/srv/dbhost/pg/"), check.Unknown)
	stContains(t, "reason", fd.Reason, "permission denied")
}

func TestStorageNoatime(t *testing.T) {
	stFind(t, "storage-xfs", "storage.noatime", "mount:/srv/dbhost/pg", check.Pass)
	fd := stFind(t, "storage-xfs", "storage.noatime", "mount:/srv/dbhost/mysql", check.Pass)
	stContains(t, "reason", fd.Reason, "XFS", "relatime")
	fd = stFind(t, "storage-ext4-unsafe", "storage.noatime", "mount:/srv/dbhost/pg", check.Fail)
	stContains(t, "reason", fd.Reason, "strictatime")
	if want := []fix.MountChange{{MountPoint: "/srv/dbhost/pg", Source: "/dev/loop0", Add: []string{"noatime"}}}; !reflect.DeepEqual(fd.Fix.Mount, want) {
		t.Errorf("fix = %+v", fd.Fix.Mount)
	}
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "mount -o remount,noatime /srv/dbhost/pg")
	// ext4 with the default relatime.
	fd = stFind(t, "storage-vda-default", "storage.noatime", "mount:/", check.Fail)
	stContains(t, "reason", fd.Reason, "relatime", "ext4")
	if _, ok := fixture.Find(t, "storage-nomounts", "storage.noatime", "mount:/srv/dbhost/pg"); ok {
		t.Error("a mount that could not be read must not be judged")
	}
}

func TestStorageBarrier(t *testing.T) {
	stFind(t, "storage-xfs", "storage.barrier", "mount:/srv/dbhost/pg", check.Pass)
	fd := stFind(t, "storage-ext4-unsafe", "storage.barrier", "mount:/srv/dbhost/pg", check.Fail)
	stContains(t, "reason", fd.Reason, "nobarrier", "data=writeback", "battery", "cannot see")
	if len(fd.Fix.Mount) != 1 || !reflect.DeepEqual(fd.Fix.Mount[0].Remove, []string{"nobarrier", "data=writeback"}) {
		t.Errorf("fix = %+v", fd.Fix.Mount)
	}
	stContains(t, "fix", fd.Fix.Manual, "umount")
	if strings.Contains(fd.Reason+fd.Fix.Manual, "mount with nobarrier") {
		t.Error("never recommend nobarrier")
	}
}

func TestStorageDataOnRoot(t *testing.T) {
	fd := stFind(t, "storage-vda-default", "storage.data_on_root", stInstance(t, "storage-vda-default", "/tmp/dbhost-pg-"), check.Fail)
	stContains(t, "reason", fd.Reason, "root filesystem")
	stFind(t, "storage-xfs", "storage.data_on_root", stInstance(t, "storage-xfs", "/srv/dbhost/pg/"), check.Pass)
	stFind(t, "storage-bind", "storage.data_on_root", stInstance(t, "storage-bind", "/srv/dbhost/bind/"), check.Pass)
	stFind(t, "storage-nomounts", "storage.data_on_root", stInstance(t, "storage-nomounts", "/srv/dbhost/pg/"), check.Unknown)
}

func TestStorageNFS(t *testing.T) {
	for _, mp := range []string{"mount:/srv/dbhost/pg", "mount:/srv/dbhost/mysql"} {
		stFind(t, "storage-nfs-hard", "storage.nfs.soft", mp, check.Pass)
		stFind(t, "storage-nfs-hard", "storage.nfs.options", mp, check.Pass)
		fd := stFind(t, "storage-nfs-soft", "storage.nfs.soft", mp, check.Fail)
		if fd.Fix == nil || len(fd.Fix.Mount) != 1 || !reflect.DeepEqual(fd.Fix.Mount[0].Add, []string{"hard"}) {
			t.Errorf("soft fix = %+v", fd.Fix)
		}
	}
	fd := stFind(t, "storage-nfs-soft", "storage.nfs.options", "mount:/srv/dbhost/pg", check.Fail)
	stContains(t, "reason", fd.Reason, "proto=udp", "rsize=32768", "wsize=32768", "relatime")
	m := fd.Fix.Mount[0]
	if !reflect.DeepEqual(m.Add, []string{"proto=tcp", "rsize=1048576", "wsize=1048576", "noatime"}) ||
		!reflect.DeepEqual(m.Remove, []string{"proto=udp", "rsize=32768", "wsize=32768"}) {
		t.Errorf("options fix = %+v", m)
	}
	stFind(t, "storage-nfs-soft", "storage.nfs.options", "mount:/srv/dbhost/mysql", check.Pass)
	if s := fixture.Statuses(t, "storage-xfs", "storage.nfs.soft"); len(s) != 0 {
		t.Errorf("no NFS, no verdict: %v", s)
	}
}

func TestStorageZFS(t *testing.T) {
	const seed, def, nocmd = "storage-zfs-seed", "storage-zfs-default", "storage-zfs-nocmd"
	// Seed 001's layout passes everything but its SLOG in /dev/shm.
	fd := stFind(t, seed, "storage.zfs.slog_volatile", "zpool:mysqldata", check.Fail)
	stContains(t, "reason", fd.Reason, "/dev/shm/zil_slog.img", "tmpfs")
	if !reflect.DeepEqual(fd.Fix.Runtime, []string{"zpool remove mysqldata /dev/shm/zil_slog.img"}) {
		t.Errorf("slog fix = %+v", fd.Fix.Runtime)
	}
	stFind(t, seed, "storage.zfs.slog_volatile", "zpool:pgdata", check.Pass)
	for _, prefix := range []string{"/srv/dbhost/pg/", "/srv/dbhost/mysql/"} {
		in := stInstance(t, seed, prefix)
		stFind(t, seed, "storage.zfs.recordsize", in, check.Pass)
		stFind(t, seed, "storage.zfs.primarycache", in, check.Pass)
		mp := "mount:" + strings.TrimSuffix(prefix, "/")
		stFind(t, seed, "storage.zfs.atime", mp, check.Pass)
		stFind(t, seed, "storage.zfs.compression", mp, check.Pass)
	}

	// ZFS defaults under both engines.
	my, pg := stInstance(t, def, "/srv/dbhost/mysql/"), stInstance(t, def, "/srv/dbhost/pg/")
	fd = stFind(t, def, "storage.zfs.recordsize", my, check.Fail)
	stContains(t, "reason", fd.Reason, "128K", "16K")
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "zfs set recordsize=16K tank/mysql")
	fd = stFind(t, def, "storage.zfs.recordsize", pg, check.Fail)
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "zfs set recordsize=8K tank/pg")
	fd = stFind(t, def, "storage.zfs.primarycache", my, check.Fail)
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "zfs set primarycache=metadata tank/mysql")
	// PostgreSQL relies on the OS cache: metadata-only is wrong for it.
	fd = stFind(t, def, "storage.zfs.primarycache", pg, check.Fail)
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "zfs set primarycache=all tank/pg")
	fd = stFind(t, def, "storage.zfs.atime", "mount:/srv/dbhost/pg", check.Fail)
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "zfs set atime=off tank/pg")
	fd = stFind(t, def, "storage.zfs.compression", "mount:/srv/dbhost/mysql", check.Fail)
	stContains(t, "runtime", strings.Join(fd.Fix.Runtime, "\n"), "zfs set compression=lz4 tank/mysql")
	stFind(t, def, "storage.zfs.slog_volatile", "zpool:tank", check.Pass)

	// zfs and zpool could not run: no verdicts, and say why.
	fd = stFind(t, nocmd, "storage.zfs.recordsize", stInstance(t, nocmd, "/srv/dbhost/mysql/"), check.Unknown)
	stContains(t, "reason", fd.Reason, "zfs get failed", "executable file not found")
	stFind(t, nocmd, "storage.zfs.slog_volatile", "zpool:tank", check.Unknown)
	stFind(t, nocmd, "storage.zfs.atime", "mount:/srv/dbhost/pg", check.Unknown)
	stFind(t, nocmd, "storage.zfs.compression", "mount:/srv/dbhost/pg", check.Unknown)
	stFind(t, nocmd, "storage.zfs.primarycache", stInstance(t, nocmd, "/srv/dbhost/pg/"), check.Unknown)
}

func TestStorageSeparateWAL(t *testing.T) {
	fd := stFind(t, "storage-vda-default", "storage.separate_wal", stInstance(t, "storage-vda-default", "/tmp/dbhost-pg-"), check.Fail)
	stContains(t, "reason", fd.Reason, "wal", "device vda")
	stContains(t, "fix", fd.Fix.Manual, "pg_wal")
	// pg_wal symlinked onto another filesystem on another disk.
	stFind(t, "storage-dm", "storage.separate_wal", stInstance(t, "storage-dm", "/srv/dbhost/pg/"), check.Pass)
	stFind(t, "storage-nomounts", "storage.separate_wal", stInstance(t, "storage-nomounts", "/srv/dbhost/pg/"), check.Unknown)
}

// Every storage check is registered with its documentation.
func TestStorageCatalog(t *testing.T) {
	for _, id := range []string{"storage.scheduler", "storage.read_ahead", "storage.rotational_cost", "storage.filesystem",
		"storage.noatime", "storage.barrier", "storage.data_on_root", "storage.nfs.soft", "storage.nfs.options",
		"storage.zfs.recordsize", "storage.zfs.primarycache", "storage.zfs.atime", "storage.zfs.compression",
		"storage.zfs.slog_volatile", "storage.separate_wal"} {
		c, ok := check.Lookup(id)
		if !ok {
			t.Errorf("%s not registered", id)
			continue
		}
		if len(c.Doc) < 200 || len(c.Refs) == 0 {
			t.Errorf("%s: doc or refs too thin", id)
		}
	}
}
