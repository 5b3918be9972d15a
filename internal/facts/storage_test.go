package facts_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

// gatherFixture gathers a recorded host afresh (not the shared cache), so
// that `go test -race` sees the parallel instance gatherers write
// Storage.Devices.
func gatherFixture(t *testing.T, name string) *facts.Facts {
	t.Helper()
	h, err := host.OpenSnapshot(fixture.Path(name))
	if err != nil {
		t.Fatalf("fixture %s: %v (record it with tools/record or tools/derive-storage)", name, err)
	}
	defer h.Close()
	return facts.Gather(context.Background(), h, facts.Options{})
}

// storageOf finds the path storage of the instance whose data directory is
// under prefix.
func storageOf(t *testing.T, f *facts.Facts, prefix, role string) facts.PathStorage {
	t.Helper()
	for _, in := range f.Instances {
		if !strings.HasPrefix(in.DataDir, prefix) {
			continue
		}
		for _, ps := range in.Storage {
			if ps.Role == role {
				return ps
			}
		}
		t.Fatalf("%s has no %s path: %+v", in.Name(), role, in.Storage)
	}
	t.Fatalf("no instance with data under %s", prefix)
	return facts.PathStorage{}
}

func TestStorageVirtioDisk(t *testing.T) {
	f := gatherFixture(t, "storage-vda-default")
	vda := f.Storage.Devices["vda"]
	if vda == nil {
		t.Fatalf("vda not gathered: %v", f.Storage.Devices)
	}
	if vda.Kind != "virtio" || !vda.Virtual || vda.Partition {
		t.Errorf("vda = kind %s virtual %v partition %v", vda.Kind, vda.Virtual, vda.Partition)
	}
	if kb, ok := vda.ReadAheadKB.Int(); !ok || kb != 8192 || vda.ReadAheadKB.Source != "/sys/block/vda/queue/read_ahead_kb" {
		t.Errorf("vda read-ahead = %+v, want 8192 from /sys/block/vda/queue/read_ahead_kb", vda.ReadAheadKB)
	}
	if s, ok := vda.ActiveScheduler(); !ok || s != "mq-deadline" {
		t.Errorf("vda scheduler = %q (%+v)", s, vda.Scheduler)
	}
	ps := storageOf(t, f, "/tmp/dbhost-pg-", "data")
	if ps.Mount == nil || ps.Mount.MountPoint != "/" || ps.Device != "vda" || !reflect.DeepEqual(ps.Physical, []string{"vda"}) {
		t.Errorf("private PostgreSQL data on %+v device %s physical %v", ps.Mount, ps.Device, ps.Physical)
	}
	if !strings.HasSuffix(ps.MountsFrom, "/mountinfo") || ps.MountsFrom == "/proc/1/mountinfo" {
		t.Errorf("mounts not read from the server's own mountinfo: %s", ps.MountsFrom)
	}
}

func TestStoragePartitionStack(t *testing.T) {
	f := gatherFixture(t, "storage-ext4-part")
	ps := storageOf(t, f, "/srv/dbhost/pg/", "data")
	// loopNp1 -> loopN -> (backing file in /var/tmp on /) vda
	if len(ps.Stack) != 3 || !strings.HasSuffix(ps.Stack[0], "p1") || ps.Stack[2] != "vda" {
		t.Fatalf("stack = %v, want [loopNp1 loopN vda]", ps.Stack)
	}
	part, disk := f.Storage.Devices[ps.Stack[0]], f.Storage.Devices[ps.Stack[1]]
	if !part.Partition || part.Parent != ps.Stack[1] || part.Scheduler.Value != "" {
		t.Errorf("partition %+v", part)
	}
	if ps.Device != ps.Stack[1] {
		t.Errorf("read-ahead device = %s, want the partition's disk %s", ps.Device, ps.Stack[1])
	}
	if disk.Kind != "loop" || !strings.HasPrefix(disk.BackingFile, "/var/tmp/dbhost-storage-") || disk.BackingDevice != "vda" {
		t.Errorf("loop disk %+v", disk)
	}
	if !reflect.DeepEqual(ps.Physical, []string{"vda"}) {
		t.Errorf("physical = %v, want the backing file's disk vda", ps.Physical)
	}
	if ps.Mount.FSType != "ext4" {
		t.Errorf("fstype %s", ps.Mount.FSType)
	}
}

func TestStorageDeviceMapper(t *testing.T) {
	f := gatherFixture(t, "storage-dm") // derived: dm-0 on vdb
	ps := storageOf(t, f, "/srv/dbhost/pg/", "data")
	if !reflect.DeepEqual(ps.Stack, []string{"dm-0", "vdb"}) || !reflect.DeepEqual(ps.Physical, []string{"vdb"}) || ps.Device != "dm-0" {
		t.Errorf("stack %v physical %v device %s", ps.Stack, ps.Physical, ps.Device)
	}
	dm := f.Storage.Devices["dm-0"]
	if dm == nil || dm.DMName != "vgdb-pg" || dm.Kind != "dm" || !reflect.DeepEqual(dm.Slaves, []string{"vdb"}) {
		t.Errorf("dm-0 = %+v", dm)
	}
	wal := storageOf(t, f, "/srv/dbhost/pg/", "wal")
	if wal.Resolved != "/srv/dbhost/mysql/pg_wal" || wal.Mount.MountPoint != "/srv/dbhost/mysql" {
		t.Errorf("pg_wal symlink not followed: %+v", wal)
	}
}

func TestStorageBtrfsBySource(t *testing.T) {
	f := gatherFixture(t, "storage-btrfs")
	ps := storageOf(t, f, "/srv/dbhost/pg/", "data")
	// btrfs reports an anonymous device number (0:N): found by its source.
	if !strings.HasPrefix(ps.Mount.MajorMinor, "0:") || len(ps.Stack) == 0 || !strings.HasPrefix(ps.Stack[0], "loop") {
		t.Errorf("btrfs mount %s stack %v", ps.Mount.MajorMinor, ps.Stack)
	}
}

func TestStorageBindMount(t *testing.T) {
	f := gatherFixture(t, "storage-bind")
	ps := storageOf(t, f, "/srv/dbhost/bind/", "data")
	if ps.Mount.MountPoint != "/srv/dbhost/bind" || ps.Mount.Root != "/inner" || ps.Mount.FSType != "xfs" {
		t.Fatalf("bind mount = %+v", ps.Mount)
	}
	if !strings.HasPrefix(ps.FSPath, "/inner/dbhost-pg-") || !strings.HasSuffix(ps.FSPath, "/data") {
		t.Errorf("FSPath = %s", ps.FSPath)
	}
	if len(ps.Stack) == 0 || !strings.HasPrefix(ps.Stack[0], "loop") {
		t.Errorf("bind mount not followed to its loop device: %v", ps.Stack)
	}
}

func TestStorageZFSFacts(t *testing.T) {
	f := gatherFixture(t, "storage-zfs-seed") // derived
	z := f.Storage.ZFS
	if z == nil {
		t.Fatal("ZFS not gathered although a zfs mount exists")
	}
	if v, src, ok := z.Property("mysqldata/mysql/data", "recordsize"); !ok || v != "16384" || src != "local" {
		t.Errorf("recordsize = %q %q", v, src)
	}
	if z.ARC["size"] != 4294967296 {
		t.Errorf("arcstats size = %d", z.ARC["size"])
	}
	if len(z.Pools) != 2 || !reflect.DeepEqual(z.Pools[0].Logs, []string{"/dev/shm/zil_slog.img"}) {
		t.Errorf("pools = %+v", z.Pools)
	}
	ps := storageOf(t, f, "/srv/dbhost/mysql/", "data")
	if ps.ZFSDataset != "mysqldata/mysql/data" || len(ps.Stack) != 0 {
		t.Errorf("MariaDB data dataset %q stack %v", ps.ZFSDataset, ps.Stack)
	}
	if f.Storage.ZFS == nil || gatherFixture(t, "storage-xfs").Storage.ZFS != nil {
		t.Error("ZFS must be gathered only where it exists")
	}
}

func TestStorageNFSFacts(t *testing.T) {
	f := gatherFixture(t, "storage-nfs-hard") // derived
	ps := storageOf(t, f, "/srv/dbhost/pg/", "data")
	m := ps.Mount
	if !m.NFS() || m.FSType != "nfs4" {
		t.Fatalf("mount %+v", m)
	}
	if v, _ := m.Option("rsize"); v != "1048576" {
		t.Errorf("rsize = %q", v)
	}
	if _, ok := m.Option("noatime"); !ok {
		t.Error("noatime (a per-mount option) not found")
	}
	if len(ps.Stack) != 0 {
		t.Errorf("an NFS mount has no local device: %v", ps.Stack)
	}
}

func TestStorageNonRoot(t *testing.T) {
	f := gatherFixture(t, "storage-nonroot")
	if f.AsRoot {
		t.Fatal("fixture collected as root")
	}
	ps := storageOf(t, f, "/srv/dbhost/pg/", "data")
	// nobody cannot resolve the 0700 data directory, but the server's
	// mountinfo and sysfs are readable: the path is still followed.
	if ps.Err != "" || ps.Mount == nil || ps.Mount.MountPoint != "/srv/dbhost/pg" {
		t.Errorf("non-root path storage: %+v", ps)
	}
	if len(ps.Notes) == 0 || !strings.Contains(ps.Notes[0], "permission denied") {
		t.Errorf("unresolved symlinks must be noted: %v", ps.Notes)
	}
	f = gatherFixture(t, "storage-nomounts") // derived: mountinfo unreadable
	ps = storageOf(t, f, "/srv/dbhost/pg/", "data")
	if !strings.Contains(ps.Err, "permission denied") || ps.Mount != nil {
		t.Errorf("unreadable mountinfo: %+v", ps)
	}
}
