package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dbhost/dbhost/internal/testdb"
)

// Storage scenarios put private database servers on real filesystems made
// on loop devices (XFS, ext4, ext3, btrfs, a partitioned loop device) with
// the mount options under test, and change the virtual disk's queue
// (scheduler, read-ahead) through the journal. NFS, ZFS and device-mapper
// do not exist in this VM's kernel: tools/derive-storage derives those
// fixtures from storage-xfs.

// storageRoot holds the loop mounts. Fixed paths let tools/derive-storage
// find and rewrite the mounts in a recording.
const storageRoot = "/srv/dbhost"

func init() {
	register(Scenario{
		Name:  "storage-vda-default",
		Note:  "this VM's virtual disk as provisioned (virtio vda, mq-deadline, read_ahead_kb 8192, ext4 / relatime) with a private PostgreSQL whose data is in /tmp on /",
		Setup: postgresSetup(testdb.Options{}),
	})
	register(Scenario{
		Name:  "storage-vda-tuned",
		Note:  "vda scheduler set to none and read_ahead_kb to 128 (the fixes for virtio); private PostgreSQL with data in /tmp on /",
		Setup: vdaSetup("scheduler", "none", "read_ahead_kb", "128"),
	})
	register(Scenario{
		Name:  "storage-sched-bfq",
		Note:  "vda scheduler set to bfq (wrong for a database on a virtual disk); private PostgreSQL with data in /tmp on /",
		Setup: vdaSetup("scheduler", "bfq"),
	})
	register(Scenario{
		Name: "storage-xfs",
		Note: "private PostgreSQL on XFS (loop device, noatime) at /srv/dbhost/pg and private MariaDB on XFS (relatime) at /srv/dbhost/mysql; base of the derived NFS, ZFS and dm fixtures",
		Setup: func(r *Run) error {
			pg, err := loopFS(r, "pg", "xfs", "noatime", false)
			if err != nil {
				return err
			}
			my, err := loopFS(r, "mysql", "xfs", "relatime", false)
			if err != nil {
				return err
			}
			inDir(pg, func() { r.Postgres(testdb.Options{}) })
			inDir(my, func() { r.MariaDB(testdb.Options{}) })
			return nil
		},
	})
	register(Scenario{
		Name:  "storage-ext4-unsafe",
		Note:  "private PostgreSQL on ext4 (loop device) mounted strictatime,barrier=0,data=writeback",
		Setup: onLoop("ext4", "strictatime,barrier=0,data=writeback", false),
	})
	register(Scenario{
		Name:  "storage-ext4-part",
		Note:  "private PostgreSQL on ext4 (noatime) on the first partition of a partitioned loop device (losetup -P, sfdisk)",
		Setup: onLoop("ext4", "noatime", true),
	})
	register(Scenario{
		Name:  "storage-ext3",
		Note:  "private PostgreSQL on ext3 (loop device, noatime)",
		Setup: onLoop("ext3", "noatime", false),
	})
	register(Scenario{
		Name:  "storage-btrfs",
		Note:  "private PostgreSQL on btrfs with copy-on-write (loop device, noatime)",
		Setup: onLoop("btrfs", "noatime", false),
	})
	register(Scenario{
		Name: "storage-bind",
		Note: "private PostgreSQL whose data is under /srv/dbhost/bind, a bind mount of the directory inner/ of an XFS loop filesystem mounted at /srv/dbhost/pg",
		Setup: func(r *Run) error {
			dir, err := loopFS(r, "pg", "xfs", "noatime", false)
			if err != nil {
				return err
			}
			inner, bind := filepath.Join(dir, "inner"), filepath.Join(storageRoot, "bind")
			for _, d := range []string{inner, bind} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			r.Cleanup(func() { os.Remove(bind) })
			if err := os.Chmod(inner, 0o1777); err != nil {
				return err
			}
			if err := r.Command("mount", "--bind", inner, bind); err != nil {
				return err
			}
			r.Cleanup(func() { exec.Command("umount", bind).Run() })
			inDir(bind, func() { r.Postgres(testdb.Options{}) })
			return nil
		},
	})
	register(Scenario{
		Name:   "storage-nonroot",
		Note:   "private PostgreSQL on XFS (loop device, noatime) at /srv/dbhost/pg, collected as user nobody: its data directory (mode 0700) cannot be resolved",
		AsUser: "nobody",
		Setup:  onLoop("xfs", "noatime", false),
	})
	register(Scenario{
		Name:  "storage-zram-default",
		Note:  "private PostgreSQL and MariaDB with default I/O costs (random_page_cost 4, innodb_io_capacity 200) on ext4 on zram0, a real non-rotational device without a scheduler file",
		Setup: func(r *Run) error { return onZram(r, nil, nil) },
	})
	register(Scenario{
		Name: "storage-zram-tuned",
		Note: "private PostgreSQL (random_page_cost 1.1) and MariaDB (innodb_io_capacity 1000) on ext4 on zram0, a non-rotational device",
		Setup: func(r *Run) error {
			return onZram(r, map[string]string{"random_page_cost": "1.1"}, map[string]string{"innodb_io_capacity": "1000"})
		},
	})
}

// vdaSetup sets queue attributes of the virtual disk vda (attribute, value
// pairs, in order), then starts a private PostgreSQL with its data in /tmp
// on /.
func vdaSetup(kv ...string) func(*Run) error {
	return func(r *Run) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := r.Set("/sys/block/vda/queue/"+kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		r.Postgres(testdb.Options{})
		return nil
	}
}

// onZram makes zram0 (a RAM-backed, non-rotational block device this VM
// has unused) a 512 MiB ext4 mounted at /srv/dbhost/pg and starts a private
// PostgreSQL and MariaDB on it. zram's disksize cannot be journaled (it
// only resets to 0 through the reset file), so cleanup resets it.
func onZram(r *Run, pg, my map[string]string) error {
	const dev = "/dev/zram0"
	const sys = "/sys/block/zram0"
	if b, err := os.ReadFile(sys + "/disksize"); err != nil || strings.TrimSpace(string(b)) != "0" {
		return fmt.Errorf("zram0 is in use (disksize %q, %v): not touching it", strings.TrimSpace(string(b)), err)
	}
	if err := os.WriteFile(sys+"/disksize", []byte("512M"), 0o644); err != nil {
		return err
	}
	r.Cleanup(func() { os.WriteFile(sys+"/reset", []byte("1"), 0o644) })
	if err := r.Command("mkfs.ext4", "-q", "-F", dev); err != nil {
		return err
	}
	mnt := filepath.Join(storageRoot, "pg")
	if err := mountAt(r, "ext4", "noatime", dev, mnt); err != nil {
		return err
	}
	inDir(mnt, func() {
		r.Postgres(testdb.Options{Settings: pg})
		r.MariaDB(testdb.Options{Settings: my})
	})
	return nil
}

// onLoop is a Setup that starts a private PostgreSQL whose data lives on a
// fresh loop filesystem mounted at /srv/dbhost/pg.
func onLoop(fstype, opts string, partitioned bool) func(*Run) error {
	return func(r *Run) error {
		dir, err := loopFS(r, "pg", fstype, opts, partitioned)
		if err != nil {
			return err
		}
		inDir(dir, func() { r.Postgres(testdb.Options{}) })
		return nil
	}
}

// inDir runs fn with TMPDIR pointing at dir: testdb makes the server's
// private directory with os.MkdirTemp, so its data lands on that mount.
func inDir(dir string, fn func()) { withEnv("TMPDIR", dir, fn) }

// loopFS makes a 512 MiB image in /var/tmp, attaches it to a loop device
// (with a partition table and its first partition used, when asked),
// makes the filesystem and mounts it at /srv/dbhost/NAME. Cleanups undo it
// in reverse order after collection (the servers on it stop first, as
// their cleanups are registered later).
func loopFS(r *Run, name, fstype, opts string, partitioned bool) (string, error) {
	img := filepath.Join("/var/tmp", "dbhost-storage-"+name+".img")
	mnt := filepath.Join(storageRoot, name)
	if err := r.Command("truncate", "-s", "512M", img); err != nil {
		return "", err
	}
	r.Cleanup(func() { os.Remove(img) })
	if partitioned {
		// Two Linux partitions; the database gets the first.
		sf := exec.Command("sfdisk", "--quiet", img)
		sf.Stdin = strings.NewReader("label: dos\n,320MiB,L\n,,L\n")
		if out, err := sf.CombinedOutput(); err != nil {
			return "", fmt.Errorf("sfdisk: %v: %s", err, out)
		}
	}
	args := []string{"--find", "--show"}
	if partitioned {
		args = append(args, "--partscan")
	}
	out, err := exec.Command("losetup", append(args, img)...).Output()
	if err != nil {
		return "", fmt.Errorf("losetup: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	r.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	target := dev
	if partitioned {
		// This kernel has no partition table parsers (MSDOS/EFI
		// partitions are not built in): partx adds the partitions
		// through the BLKPG ioctl instead, as on a host with them.
		if err := r.Command("partx", "-a", dev); err != nil {
			return "", err
		}
		r.Cleanup(func() { exec.Command("partx", "-d", dev).Run() })
		target = dev + "p1"
	}
	mkfs := map[string][]string{
		"xfs":   {"mkfs.xfs", "-f", "-q"},
		"ext4":  {"mkfs.ext4", "-q", "-F"},
		"ext3":  {"mkfs.ext3", "-q", "-F"},
		"btrfs": {"mkfs.btrfs", "-q", "-f"},
	}[fstype]
	if mkfs == nil {
		return "", fmt.Errorf("no mkfs for %s", fstype)
	}
	if err := r.Command(mkfs[0], append(mkfs[1:], target)...); err != nil {
		return "", err
	}
	if err := mountAt(r, fstype, opts, target, mnt); err != nil {
		return "", err
	}
	return mnt, nil
}
