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
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/facts"
)

// Paths of the loop mounts in the base recording (tools/record
// scenarios_storage.go).
const (
	pgMount    = "/srv/dbhost/pg"
	mysqlMount = "/srv/dbhost/mysql"
)

type derivation struct {
	name, base, note string
	edit             func(a *archive) error
}

var derivations = []derivation{
	{
		name: "storage-nfs-hard",
		base: "storage-xfs",
		note: "derived from storage-xfs: /srv/dbhost/pg replaced by an Amazon EFS NFSv4.1 mount with the EFS helper's defaults plus noatime (seed 003), /srv/dbhost/mysql by a NetApp NFSv3 mount with the tuned options of seed 004",
		edit: func(a *archive) error {
			if err := a.replaceMount(pgMount, "0:61", "/", "rw,noatime", "nfs4", "fs-7513e02c.efs.eu-central-1.amazonaws.com:/",
				"rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=172.31.11.75,local_lock=none,addr=172.31.15.76"); err != nil {
				return err
			}
			return a.replaceMount(mysqlMount, "0:62", "/", "rw,noatime", "nfs", "tc2-nas01:/vol/vms_gu_mysql04_dbStorage/mysql",
				"rw,vers=3,rsize=65536,wsize=65536,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=10.20.1.5,mountvers=3,mountport=4046,mountproto=udp,local_lock=none,addr=10.20.1.5")
		},
	},
	{
		name: "storage-nfs-soft",
		base: "storage-xfs",
		note: "derived from storage-xfs: /srv/dbhost/pg replaced by a soft NFSv3 mount over UDP with 32 KiB transfers and relatime, /srv/dbhost/mysql by a soft NFSv4.2 mount (TCP, 1 MiB, noatime)",
		edit: func(a *archive) error {
			if err := a.replaceMount(pgMount, "0:61", "/", "rw,relatime", "nfs", "nas01:/export/pg",
				"rw,vers=3,rsize=32768,wsize=32768,namlen=255,soft,proto=udp,timeo=11,retrans=3,sec=sys,mountaddr=10.20.1.6,mountvers=3,mountport=20048,mountproto=udp,local_lock=none,addr=10.20.1.6"); err != nil {
				return err
			}
			return a.replaceMount(mysqlMount, "0:62", "/", "rw,noatime", "nfs4", "nas01:/export/mysql",
				"rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.20.1.20,local_lock=none,addr=10.20.1.6")
		},
	},
	{
		name: "storage-zfs-seed",
		base: "storage-xfs",
		note: "derived from storage-xfs: the layout of seed 001 — MariaDB data on dataset mysqldata/mysql/data (recordsize 16K, primarycache metadata, atime off and gzip inherited from mysqldata/mysql), pool mysqldata with its SLOG in /dev/shm/zil_slog.img; PostgreSQL on pgdata/pg (recordsize 8K, lz4, atime off); zfs get, zpool status -P and arcstats in the tools' real formats",
		edit: func(a *archive) error {
			if err := a.replaceMount(mysqlMount, "0:52", "/", "rw,noatime", "zfs", "mysqldata/mysql/data", "rw,xattr,noacl"); err != nil {
				return err
			}
			if err := a.replaceMount(pgMount, "0:53", "/", "rw,noatime", "zfs", "pgdata/pg", "rw,xattr,noacl"); err != nil {
				return err
			}
			a.zfs(zfsGet([]dsProps{
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
		name: "storage-zfs-default",
		base: "storage-xfs",
		note: "derived from storage-xfs: MariaDB data on dataset tank/mysql and PostgreSQL data on tank/pg, both with ZFS defaults (recordsize 128K, primarycache all, atime on, compression off), pool tank without log devices; PostgreSQL's tank/pg has primarycache metadata set",
		edit: func(a *archive) error {
			if err := a.replaceMount(mysqlMount, "0:52", "/", "rw,relatime", "zfs", "tank/mysql", "rw,xattr,noacl"); err != nil {
				return err
			}
			if err := a.replaceMount(pgMount, "0:53", "/", "rw,relatime", "zfs", "tank/pg", "rw,xattr,noacl"); err != nil {
				return err
			}
			a.zfs(zfsGet([]dsProps{
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
		name: "storage-zfs-nocmd",
		base: "storage-xfs",
		note: "derived from storage-xfs: MariaDB and PostgreSQL data on ZFS datasets, but `zfs get` and `zpool status` failed (zfs utilities not installed): the ZFS checks cannot judge",
		edit: func(a *archive) error {
			if err := a.replaceMount(mysqlMount, "0:52", "/", "rw,noatime", "zfs", "tank/mysql", "rw,xattr,noacl"); err != nil {
				return err
			}
			if err := a.replaceMount(pgMount, "0:53", "/", "rw,noatime", "zfs", "tank/pg", "rw,xattr,noacl"); err != nil {
				return err
			}
			notFound := `exec: "%s": executable file not found in $PATH`
			a.probe("cmd:zfs\x00"+strings.Join(facts.ZFSGetArgs(), "\x00"), nil, fmt.Sprintf("zfs: "+notFound, "zfs"), 0)
			a.probe("cmd:zpool\x00"+strings.Join(facts.ZpoolStatusArgs(), "\x00"), nil, fmt.Sprintf("zpool: "+notFound, "zpool"), 0)
			a.setKstat()
			return nil
		},
	},
	{
		name: "storage-dm",
		base: "storage-xfs",
		note: "derived from storage-xfs: /srv/dbhost/pg mounted from LVM volume /dev/mapper/vgdb-pg (dm-0, 252:0, read_ahead_kb 4096) on a second virtio disk vdb (254:16); sysfs entries of dm-0 and vdb added in the kernel's formats (vdb's copied from vda's); pg_wal of that PostgreSQL resolved to /srv/dbhost/mysql/pg_wal (a symlink onto the other filesystem, on vda)",
		edit: func(a *archive) error {
			if err := a.replaceMount(pgMount, "252:0", "/", "rw,noatime", "xfs", "/dev/mapper/vgdb-pg",
				"rw,attr2,inode64,logbufs=8,logbsize=32k,noquota"); err != nil {
				return err
			}
			dm := "sys/devices/virtual/block/dm-0"
			a.probe("readlink:sys/dev/block/252:0", []byte("../../devices/virtual/block/dm-0"), "", 0)
			a.probe("stat:"+dm+"/partition", nil, "stat /"+dm+"/partition: no such file or directory", 2)
			a.file(dm+"/dev", "252:0\n")
			for k, v := range map[string]string{
				"queue/scheduler": "none\n", "queue/rotational": "1\n", "queue/read_ahead_kb": "4096\n",
				"queue/nr_requests": "128\n", "dm/name": "vgdb-pg\n",
			} {
				a.file("sys/block/dm-0/"+k, v)
			}
			a.probe("readdir:sys/block/dm-0/slaves", []byte("vdb"), "", 0)
			vdb := "sys/devices/pci0000:00/0000:00:03.0/virtio2/block/vdb"
			a.probe("readlink:sys/class/block/vdb", []byte("../../devices/pci0000:00/0000:00:03.0/virtio2/block/vdb"), "", 0)
			a.probe("stat:"+vdb+"/partition", nil, "stat /"+vdb+"/partition: no such file or directory", 2)
			a.file(vdb+"/dev", "254:16\n")
			for _, k := range []string{"queue/scheduler", "queue/rotational", "queue/nr_requests", "device/vendor"} {
				b, ok := a.files["fs/sys/block/vda/"+k]
				if !ok {
					return fmt.Errorf("sys/block/vda/%s not in the base recording", k)
				}
				a.file("sys/block/vdb/"+k, string(b))
			}
			a.file("sys/block/vdb/queue/read_ahead_kb", "128\n")
			n := 0
			for k := range a.probes {
				if strings.HasPrefix(k, "realpath:srv/dbhost/pg/") && strings.HasSuffix(k, "/data/pg_wal") {
					a.probe(k, []byte(mysqlMount+"/pg_wal"), "", 0)
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
		name: "storage-nomounts",
		base: "storage-nonroot",
		note: "derived from storage-nonroot: every /proc/PID/mountinfo recorded as permission denied (as with a restricted /proc): no database path can be followed to its mount",
		edit: func(a *archive) error {
			n := 0
			for k := range a.files {
				if strings.HasPrefix(k, "fs/proc/") && strings.HasSuffix(k, "/mountinfo") {
					delete(a.files, k)
					a.errs[strings.TrimPrefix(k, "fs/")] = "permission denied"
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
		name: "storage-nosysfs",
		base: "storage-vda-default",
		note: "derived from storage-vda-default: vda's queue attributes (scheduler, rotational, read_ahead_kb) recorded as permission denied, as under a hardened or masked /sys: the device checks cannot judge",
		edit: func(a *archive) error {
			for _, k := range []string{"scheduler", "rotational", "read_ahead_kb"} {
				p := "sys/block/vda/queue/" + k
				if _, ok := a.files["fs/"+p]; !ok {
					return fmt.Errorf("%s not in the base recording", p)
				}
				delete(a.files, "fs/"+p)
				a.errs[p] = "permission denied"
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
			case contains(d.local, p) || p == "mountpoint" && d.parent != "":
				src = "local"
			case d.parent != "" && zfsDefaults[p] != "" && vals[p] != zfsDefaults[p]:
				src = "inherited from " + d.parent
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", d.name, p, vals[p], src)
		}
	}
	return b.String()
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func main() {
	dir := flag.String("dir", "testdata/hosts", "fixture directory")
	flag.Parse()
	want := map[string]bool{}
	for _, n := range flag.Args() {
		want[n] = true
	}
	failed := false
	for _, d := range derivations {
		if len(want) > 0 && !want[d.name] {
			continue
		}
		if err := derive(*dir, d); err != nil {
			fmt.Fprintf(os.Stderr, "derive %s: %v\n", d.name, err)
			failed = true
			continue
		}
		fmt.Println("derived", filepath.Join(*dir, d.name+".tar.gz"))
	}
	if failed {
		os.Exit(1)
	}
}

func derive(dir string, d derivation) error {
	a, err := readArchive(filepath.Join(dir, d.base+".tar.gz"))
	if err != nil {
		return err
	}
	if err := d.edit(a); err != nil {
		return err
	}
	a.manifest["note"] = d.note
	return a.write(filepath.Join(dir, d.name+".tar.gz"))
}

// archive is a snapshot held in memory: fs/ files, probes, errors and the
// manifest, in the layout host.WriteSnapshot writes.
type archive struct {
	files    map[string][]byte
	probes   map[string]probe
	errs     map[string]string
	manifest map[string]any
	mtime    int64
}

type probe struct {
	Out   []byte `json:"out,omitempty"`
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"`
}

func readArchive(p string) (*archive, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	a := &archive{files: map[string][]byte{}}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		a.mtime = hdr.ModTime.Unix()
		switch hdr.Name {
		case "manifest.json":
			err = json.Unmarshal(b, &a.manifest)
		case "probes.json":
			err = json.Unmarshal(b, &a.probes)
		case "errors.json":
			err = json.Unmarshal(b, &a.errs)
		default:
			a.files[hdr.Name] = b
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
	if a.manifest == nil || a.probes == nil {
		return nil, fmt.Errorf("%s is not a dbhost snapshot", p)
	}
	if a.errs == nil {
		a.errs = map[string]string{}
	}
	return a, nil
}

func (a *archive) write(p string) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	add := func(name string, b []byte) error {
		hdr := &tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		hdr.ModTime = time.Unix(a.mtime, 0)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, part := range []struct {
		name string
		v    any
	}{{"manifest.json", a.manifest}, {"probes.json", a.probes}, {"errors.json", a.errs}} {
		b, err := json.MarshalIndent(part.v, "", " ")
		if err != nil {
			return err
		}
		if err := add(part.name, b); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(a.files))
	for n := range a.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := add(n, a.files[n]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(p, buf.Bytes(), 0o644)
}

// replaceMount rewrites the line of mount point mp in every recorded
// mountinfo, keeping its mount and parent IDs and optional fields.
func (a *archive) replaceMount(mp, majmin, root, opts, fstype, source, superOpts string) error {
	found := 0
	for name, b := range a.files {
		if !strings.HasPrefix(name, "fs/proc/") || !strings.HasSuffix(name, "/mountinfo") {
			continue
		}
		lines := strings.Split(string(b), "\n")
		for i, ln := range lines {
			pre, _, ok := strings.Cut(ln, " - ")
			f := strings.Fields(pre)
			if !ok || len(f) < 6 || f[4] != mp {
				continue
			}
			fields := append([]string{f[0], f[1], majmin, root, mp, opts}, f[6:]...)
			lines[i] = strings.Join(fields, " ") + " - " + fstype + " " + source + " " + superOpts
			found++
		}
		a.files[name] = []byte(strings.Join(lines, "\n"))
	}
	if found == 0 {
		return fmt.Errorf("no mountinfo line for %s in the base recording", mp)
	}
	return nil
}

func (a *archive) probe(key string, out []byte, err string, errno int) {
	a.probes[key] = probe{Out: out, Err: err, Errno: errno}
}

func (a *archive) file(p, content string) { a.files["fs/"+p] = []byte(content) }

// zfs records the ZFS command outputs and kstats the storage gatherer reads.
func (a *archive) zfs(get, status string) {
	a.probe("cmd:zfs\x00"+strings.Join(facts.ZFSGetArgs(), "\x00"), []byte(get), "", 0)
	a.probe("cmd:zpool\x00"+strings.Join(facts.ZpoolStatusArgs(), "\x00"), []byte(status), "", 0)
	a.setKstat()
}

// setKstat adds /proc/spl/kstat/zfs with an arcstats file in the SPL
// kstat format (header line, column line, name type data rows).
func (a *archive) setKstat() {
	dirInfo, _ := json.Marshal(map[string]any{"mode": 2147484013, "uid": 0, "gid": 0, "size": 0, "dev": 21, "is_dir": true})
	a.probe("stat:proc/spl/kstat/zfs", dirInfo, "", 0)
	a.file("proc/spl/kstat/zfs/arcstats", `13 1 0x01 147 39984 4179136469 1197834170536853
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
