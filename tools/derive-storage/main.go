// Command derive-storage writes the storage fixtures this VM cannot record:
// NFS, ZFS and device-mapper do not exist in its kernel. Each one starts
// from a real recording (storage-xfs: a private PostgreSQL on an XFS loop
// mount at /srv/dbhost/pg, a private MariaDB on one at /srv/dbhost/mysql)
// and edits only the entries that differ: the two mounts' lines in every
// recorded mountinfo, the `zfs get` and `zpool status` outputs (in the
// tools' real formats, with the seed articles' datasets and options), the
// ARC kstats, and the sysfs entries of a dm device. The manifest note says
// "derived: ..." and what was changed.
//
//	go run ./tools/derive-storage            # all derived fixtures
//	go run ./tools/derive-storage storage-nfs-soft
package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture/derive"
)

// Paths of the loop mounts in the base recording (tools/record
// scenarios_storage.go).
const (
	pgMount    = "/srv/dbhost/pg"
	mysqlMount = "/srv/dbhost/mysql"
)

var derivations = []derive.Derivation{
	{
		Name: "storage-nfs-hard",
		Base: "storage-xfs",
		Note: "derived from storage-xfs: /srv/dbhost/pg replaced by an Amazon EFS NFSv4.1 mount with the EFS helper's defaults plus noatime (seed 003), /srv/dbhost/mysql by a NetApp NFSv3 mount with the tuned options of seed 004",
		Edit: func(a *derive.Archive) error {
			return replaceMounts(a,
				mount{at: pgMount, dev: "0:61", opts: "rw,noatime", fstype: "nfs4", source: "fs-7513e02c.efs.eu-central-1.amazonaws.com:/",
					super: "rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=172.31.11.75,local_lock=none,addr=172.31.15.76"},
				mount{at: mysqlMount, dev: "0:62", opts: "rw,noatime", fstype: "nfs", source: "tc2-nas01:/vol/vms_gu_mysql04_dbStorage/mysql",
					super: "rw,vers=3,rsize=65536,wsize=65536,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=10.20.1.5,mountvers=3,mountport=4046,mountproto=udp,local_lock=none,addr=10.20.1.5"})
		},
	},
	{
		Name: "storage-nfs-soft",
		Base: "storage-xfs",
		Note: "derived from storage-xfs: /srv/dbhost/pg replaced by a soft NFSv3 mount over UDP with 32 KiB transfers and relatime, /srv/dbhost/mysql by a soft NFSv4.2 mount (TCP, 1 MiB, noatime)",
		Edit: func(a *derive.Archive) error {
			return replaceMounts(a,
				mount{at: pgMount, dev: "0:61", opts: "rw,relatime", fstype: "nfs", source: "nas01:/export/pg",
					super: "rw,vers=3,rsize=32768,wsize=32768,namlen=255,soft,proto=udp,timeo=11,retrans=3,sec=sys,mountaddr=10.20.1.6,mountvers=3,mountport=20048,mountproto=udp,local_lock=none,addr=10.20.1.6"},
				mount{at: mysqlMount, dev: "0:62", opts: "rw,noatime", fstype: "nfs4", source: "nas01:/export/mysql",
					super: "rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.20.1.20,local_lock=none,addr=10.20.1.6"})
		},
	},
	{
		Name: "storage-zfs-seed",
		Base: "storage-xfs",
		Note: "derived from storage-xfs: the layout of seed 001 — MariaDB data on dataset mysqldata/mysql/data (recordsize 16K, primarycache metadata, atime off and gzip inherited from mysqldata/mysql), pool mysqldata with its SLOG in /dev/shm/zil_slog.img; PostgreSQL on pgdata/pg (recordsize 8K, lz4, atime off); zfs get, zpool status -P and arcstats in the tools' real formats",
		Edit: func(a *derive.Archive) error {
			if err := zfsMounts(a, "rw,noatime", "mysqldata/mysql/data", "pgdata/pg"); err != nil {
				return err
			}
			zfs(a, zfsGet([]dsProps{
				{"mysqldata", "", "131072", "all", "on", "off", "1.00", "/mysqldata", nil},
				{"mysqldata/mysql", "mysqldata", "131072", "all", "off", "gzip", "4.09", "/mysqldata/mysql", []string{"recordsize", "atime", "compression"}},
				{"mysqldata/mysql/data", "mysqldata/mysql", "16384", "metadata", "off", "gzip", "4.12", mysqlMount, []string{"recordsize", "primarycache"}},
				{"mysqldata/mysql/log", "mysqldata/mysql", "131072", "all", "off", "gzip", "3.75", "/var/lib/mysql-log", nil},
				{"pgdata", "", "131072", "all", "on", "off", "1.00", "/pgdata", nil},
				{"pgdata/pg", "pgdata", "8192", "all", "off", "lz4", "2.31", pgMount, []string{"recordsize", "atime", "compression"}},
			}), `  pool: mysqldata
 state: ONLINE
  scan: none requested
config:

	NAME                     STATE     READ WRITE CKSUM
	mysqldata                ONLINE       0     0     0
	  /mnt/zfs.img           ONLINE       0     0     0
	logs
	  /dev/shm/zil_slog.img  ONLINE       0     0     0
	cache
	  /dev/shm/l2arc.img     ONLINE       0     0     0

errors: No known data errors

  pool: pgdata
 state: ONLINE
  scan: scrub repaired 0B in 00:00:01 with 0 errors on Sun Nov  8 00:24:02 2026
config:

	NAME                                          STATE     READ WRITE CKSUM
	pgdata                                        ONLINE       0     0     0
	  mirror-0                                    ONLINE       0     0     0
	    /dev/disk/by-id/nvme-SAMSUNG_MZQL2960HCJR-part1  ONLINE       0     0     0
	    /dev/disk/by-id/nvme-SAMSUNG_MZQL2961HCJR-part1  ONLINE       0     0     0

errors: No known data errors
`)
			return nil
		},
	},
	{
		Name: "storage-zfs-default",
		Base: "storage-xfs",
		Note: "derived from storage-xfs: MariaDB data on dataset tank/mysql and PostgreSQL data on tank/pg, both with ZFS defaults (recordsize 128K, primarycache all, atime on, compression off), pool tank without log devices; PostgreSQL's tank/pg has primarycache metadata set",
		Edit: func(a *derive.Archive) error {
			if err := zfsMounts(a, "rw,relatime", "tank/mysql", "tank/pg"); err != nil {
				return err
			}
			zfs(a, zfsGet([]dsProps{
				{"tank", "", "131072", "all", "on", "off", "1.00", "/tank", nil},
				{"tank/mysql", "tank", "131072", "all", "on", "off", "1.00", mysqlMount, nil},
				{"tank/pg", "tank", "131072", "metadata", "on", "off", "1.00", pgMount, []string{"primarycache"}},
			}), `  pool: tank
 state: ONLINE
config:

	NAME        STATE     READ WRITE CKSUM
	tank        ONLINE       0     0     0
	  /dev/vdb  ONLINE       0     0     0

errors: No known data errors
`)
			return nil
		},
	},
	{
		Name: "storage-zfs-nocmd",
		Base: "storage-xfs",
		Note: "derived from storage-xfs: MariaDB and PostgreSQL data on ZFS datasets, but `zfs get` and `zpool status` failed (zfs utilities not installed): the ZFS checks cannot judge",
		Edit: func(a *derive.Archive) error {
			if err := zfsMounts(a, "rw,noatime", "tank/mysql", "tank/pg"); err != nil {
				return err
			}
			notFound := `exec: "%s": executable file not found in $PATH`
			a.SetProbe("cmd:zfs\x00"+strings.Join(facts.ZFSGetArgs(), "\x00"), nil, fmt.Sprintf("zfs: "+notFound, "zfs"), 0)
			a.SetProbe("cmd:zpool\x00"+strings.Join(facts.ZpoolStatusArgs(), "\x00"), nil, fmt.Sprintf("zpool: "+notFound, "zpool"), 0)
			setKstat(a)
			return nil
		},
	},
	{
		Name: "storage-dm",
		Base: "storage-xfs",
		Note: "derived from storage-xfs: /srv/dbhost/pg mounted from LVM volume /dev/mapper/vgdb-pg (dm-0, 252:0, read_ahead_kb 4096) on a second virtio disk vdb (254:16); sysfs entries of dm-0 and vdb added in the kernel's formats (vdb's copied from vda's); pg_wal of that PostgreSQL resolved to /srv/dbhost/mysql/pg_wal (a symlink onto the other filesystem, on vda)",
		Edit: func(a *derive.Archive) error {
			if err := replaceMounts(a, mount{at: pgMount, dev: "252:0", opts: "rw,noatime", fstype: "xfs", source: "/dev/mapper/vgdb-pg",
				super: "rw,attr2,inode64,logbufs=8,logbsize=32k,noquota"}); err != nil {
				return err
			}
			dm := "sys/devices/virtual/block/dm-0"
			a.SetProbe("readlink:sys/dev/block/252:0", []byte("../../devices/virtual/block/dm-0"), "", 0)
			a.SetProbe("stat:"+dm+"/partition", nil, "stat /"+dm+"/partition: no such file or directory", 2)
			a.SetFile(dm+"/dev", "252:0\n")
			for k, v := range map[string]string{
				"queue/scheduler": "none\n", "queue/rotational": "1\n", "queue/read_ahead_kb": "4096\n",
				"queue/nr_requests": "128\n", "dm/name": "vgdb-pg\n",
			} {
				a.SetFile("sys/block/dm-0/"+k, v)
			}
			a.SetProbe("readdir:sys/block/dm-0/slaves", []byte("vdb"), "", 0)
			vdb := "sys/devices/pci0000:00/0000:00:03.0/virtio2/block/vdb"
			a.SetProbe("readlink:sys/class/block/vdb", []byte("../../devices/pci0000:00/0000:00:03.0/virtio2/block/vdb"), "", 0)
			a.SetProbe("stat:"+vdb+"/partition", nil, "stat /"+vdb+"/partition: no such file or directory", 2)
			a.SetFile(vdb+"/dev", "254:16\n")
			for _, k := range []string{"queue/scheduler", "queue/rotational", "queue/nr_requests", "device/vendor"} {
				b, ok := a.Files["fs/sys/block/vda/"+k]
				if !ok {
					return fmt.Errorf("sys/block/vda/%s not in the base recording", k)
				}
				a.SetFile("sys/block/vdb/"+k, string(b))
			}
			a.SetFile("sys/block/vdb/queue/read_ahead_kb", "128\n")
			n := 0
			for k := range a.Probes {
				if strings.HasPrefix(k, "realpath:srv/dbhost/pg/") && strings.HasSuffix(k, "/data/pg_wal") {
					a.SetProbe(k, []byte(mysqlMount+"/pg_wal"), "", 0)
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("found %d pg_wal paths under %s, want 1", n, pgMount)
			}
			return nil
		},
	},
	{
		Name: "storage-nomounts",
		Base: "storage-nonroot",
		Note: "derived from storage-nonroot: every /proc/PID/mountinfo recorded as permission denied (as with a restricted /proc): no database path can be followed to its mount",
		Edit: func(a *derive.Archive) error {
			n := 0
			for k := range a.Files {
				if strings.HasPrefix(k, "fs/proc/") && strings.HasSuffix(k, "/mountinfo") {
					a.Deny(strings.TrimPrefix(k, "fs/"))
					n++
				}
			}
			if n == 0 {
				return fmt.Errorf("no mountinfo in the base recording")
			}
			return nil
		},
	},
	{
		Name: "storage-nosysfs",
		Base: "storage-vda-default",
		Note: "derived from storage-vda-default: vda's queue attributes (scheduler, rotational, read_ahead_kb) recorded as permission denied, as under a hardened or masked /sys: the device checks cannot judge",
		Edit: func(a *derive.Archive) error {
			for _, k := range []string{"scheduler", "rotational", "read_ahead_kb"} {
				p := "sys/block/vda/queue/" + k
				if _, ok := a.Files["fs/"+p]; !ok {
					return fmt.Errorf("%s not in the base recording", p)
				}
				a.Deny(p)
			}
			return nil
		},
	},
}

// dsProps is one dataset's values in a derived `zfs get`; local names the
// properties set on it, parent the dataset others are inherited from.
type dsProps struct {
	name, parent                                               string
	recordsize, primarycache, atime, compression, ratio, mount string
	local                                                      []string
}

// zfsDefaults are OpenZFS's default values of the judged properties.
var zfsDefaults = map[string]string{"recordsize": "131072", "primarycache": "all", "atime": "on", "compression": "off"}

// zfsGet renders `zfs get -Hp -o name,property,value,source` output for
// the properties facts.ZFSProperties asks for.
func zfsGet(ds []dsProps) string {
	var b strings.Builder
	for _, d := range ds {
		vals := map[string]string{
			"recordsize": d.recordsize, "primarycache": d.primarycache, "secondarycache": "all",
			"atime": d.atime, "relatime": "off", "compression": d.compression, "compressratio": d.ratio + "x",
			"logbias": "latency", "sync": "standard", "mountpoint": d.mount, "volblocksize": "-",
		}
		for _, p := range facts.ZFSProperties {
			src := "default"
			switch {
			case p == "compressratio" || p == "volblocksize":
				src = "-"
			case slices.Contains(d.local, p) || p == "mountpoint" && d.parent != "":
				src = "local"
			case d.parent != "" && zfsDefaults[p] != "" && vals[p] != zfsDefaults[p]:
				src = "inherited from " + d.parent
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", d.name, p, vals[p], src)
		}
	}
	return b.String()
}

func main() { derive.Main(derivations) }

// mount is what a derived mountinfo line says of the filesystem at a mount
// point: its device (MAJ:MIN), mount options, type, source and superblock
// options. The filesystem's root is mounted, as every base mount is.
type mount struct{ at, dev, opts, fstype, source, super string }

// replaceMounts rewrites the line of each mount point, in order, in every
// recorded mountinfo, keeping its mount and parent IDs and optional fields.
func replaceMounts(a *derive.Archive, ms ...mount) error {
	for _, m := range ms {
		found := 0
		a.EditProcLines("mountinfo", func(ln string) string {
			pre, _, ok := strings.Cut(ln, " - ")
			f := strings.Fields(pre)
			if !ok || len(f) < 6 || f[4] != m.at {
				return ln
			}
			found++
			fields := append([]string{f[0], f[1], m.dev, "/", m.at, m.opts}, f[6:]...)
			return strings.Join(fields, " ") + " - " + m.fstype + " " + m.source + " " + m.super
		})
		if found == 0 {
			return fmt.Errorf("no mountinfo line for %s in the base recording", m.at)
		}
	}
	return nil
}

// zfsMounts puts MariaDB's and PostgreSQL's data on the ZFS datasets
// mysqlDS and pgDS, mounted with opts.
func zfsMounts(a *derive.Archive, opts, mysqlDS, pgDS string) error {
	return replaceMounts(a,
		mount{at: mysqlMount, dev: "0:52", opts: opts, fstype: "zfs", source: mysqlDS, super: "rw,xattr,noacl"},
		mount{at: pgMount, dev: "0:53", opts: opts, fstype: "zfs", source: pgDS, super: "rw,xattr,noacl"})
}

// zfs records the ZFS command outputs and kstats the storage gatherer reads.
func zfs(a *derive.Archive, get, status string) {
	a.SetProbe("cmd:zfs\x00"+strings.Join(facts.ZFSGetArgs(), "\x00"), []byte(get), "", 0)
	a.SetProbe("cmd:zpool\x00"+strings.Join(facts.ZpoolStatusArgs(), "\x00"), []byte(status), "", 0)
	setKstat(a)
}

// setKstat adds /proc/spl/kstat/zfs with an arcstats file in the SPL
// kstat format (header line, column line, name type data rows).
func setKstat(a *derive.Archive) {
	dirInfo, _ := json.Marshal(map[string]any{"mode": 2147484013, "uid": 0, "gid": 0, "size": 0, "dev": 21, "is_dir": true})
	a.SetProbe("stat:proc/spl/kstat/zfs", dirInfo, "", 0)
	a.SetFile("proc/spl/kstat/zfs/arcstats", `13 1 0x01 147 39984 4179136469 1197834170536853
name                            type data
hits                            4    48915271
misses                          4    1730522
demand_data_hits                4    38121934
demand_data_misses              4    905215
size                            4    4294967296
c                               4    4294967296
c_min                           4    1073741824
c_max                           4    8589934592
arc_meta_used                   4    398458880
l2_size                         4    0
`)
}
