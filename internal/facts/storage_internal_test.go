package facts

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/textio"
)

func TestFindMount(t *testing.T) {
	ms := []Mount{
		{ID: 1, MountPoint: "/", FSType: "ext4", Root: "/"},
		{ID: 2, MountPoint: "/srv/pg", FSType: "xfs", Root: "/"},
		{ID: 3, MountPoint: "/srv/pgdata", FSType: "ext4", Root: "/"},
		{ID: 4, MountPoint: "/var/lib/mysql", FSType: "ext4", Root: "/"},
		// A second mount on the same point hides the first.
		{ID: 5, Parent: 4, MountPoint: "/var/lib/mysql", FSType: "xfs", Root: "/"},
		// A bind mount of /data/pg from the filesystem mounted at ID 2.
		{ID: 6, MountPoint: "/var/lib/postgresql", FSType: "xfs", Root: "/data/pg"},
	}
	for _, tc := range []struct {
		path   string
		wantID int
	}{
		{"/", 1},
		{"/etc/passwd", 1},
		{"/srv/pg", 2},
		{"/srv/pg/15/main", 2},
		{"/srv/pgdata/main", 3}, // not /srv/pg: whole path components only
		{"/srv/pgx", 1},
		{"/var/lib/mysql", 5},
		{"/var/lib/mysql/ibdata1", 5},
		{"/var/lib/postgresql/15/main", 6},
		{"//var/lib/../lib/mysql/", 5},
	} {
		m := FindMount(ms, tc.path)
		if m == nil || m.ID != tc.wantID {
			t.Errorf("FindMount(%q) = %+v, want mount %d", tc.path, m, tc.wantID)
		}
	}
	if m := FindMount(nil, "/x"); m != nil {
		t.Errorf("FindMount on no mounts = %+v", m)
	}
	bind := FindMount(ms, "/var/lib/postgresql/15/main")
	if got := fsPath(bind, "/var/lib/postgresql/15/main"); got != "/data/pg/15/main" {
		t.Errorf("fsPath of a bind mount = %q, want /data/pg/15/main", got)
	}
	if got := fsPath(&ms[0], "/etc"); got != "/etc" {
		t.Errorf("fsPath below / = %q", got)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/my\040disk`:   "/mnt/my disk",
		`/a\011b\012c\134d`: "/a\tb\nc\\d",
		`/plain`:            "/plain",
		`/trailing\04`:      `/trailing\04`,
		`/bad\0x9`:          `/bad\0x9`,
	} {
		if got := textio.UnescapeOctal(in); got != want {
			t.Errorf("textio.UnescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzUnescapeMount(f *testing.F) {
	for _, s := range []string{`/mnt/a\040b`, `\`, `\0`, `\777`, `\134\134`, "/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := textio.UnescapeOctal(s)
		if len(out) > len(s) {
			t.Fatalf("unescaping grew %q to %q", s, out)
		}
		if !strings.Contains(s, `\`) && out != s {
			t.Fatalf("unescaping changed %q without escapes", s)
		}
	})
}

// zpoolSeed is `zpool status -P` of seed 001's pool with a SLOG and an
// L2ARC file in /dev/shm, plus a mirrored pool with mirrored logs.
const zpoolSeed = `  pool: mysqldata
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

  pool: tank
 state: DEGRADED
config:

	NAME            STATE     READ WRITE CKSUM
	tank            DEGRADED     0     0     0
	  raidz1-0      DEGRADED     0     0     0
	    /dev/sda1   ONLINE       0     0     0
	    /dev/sdb1   FAULTED      0     0     0
	logs
	  mirror-1      ONLINE       0     0     0
	    /dev/nvme0n1p1  ONLINE   0     0     0
	    /dev/nvme1n1p1  ONLINE   0     0     0
	spares
	  /dev/sdc1     AVAIL

errors: No known data errors
`

func TestParseZpoolStatus(t *testing.T) {
	got := ParseZpoolStatus(zpoolSeed)
	want := []ZPool{
		{Name: "mysqldata", State: "ONLINE", Logs: []string{"/dev/shm/zil_slog.img"}, Cache: []string{"/dev/shm/l2arc.img"}},
		{Name: "tank", State: "DEGRADED", Logs: []string{"/dev/nvme0n1p1", "/dev/nvme1n1p1"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseZpoolStatus =\n%+v\nwant\n%+v", got, want)
	}
	if p := ParseZpoolStatus("no pools available\n"); len(p) != 0 {
		t.Errorf("no pools: %+v", p)
	}
}

func FuzzParseZpoolStatus(f *testing.F) {
	f.Add(zpoolSeed)
	f.Add("pool:\nconfig:\n logs\n")
	f.Fuzz(func(t *testing.T, s string) { ParseZpoolStatus(s) })
}

func TestParseZFSGet(t *testing.T) {
	out := "mysqldata/mysql/data\trecordsize\t16384\tlocal\n" +
		"mysqldata/mysql/data\tcompression\tgzip\tinherited from mysqldata/mysql\n" +
		"garbage line\n\n"
	vals, srcs := ParseZFSGet(out)
	if vals["mysqldata/mysql/data"]["recordsize"] != "16384" || srcs["mysqldata/mysql/data"]["compression"] != "inherited from mysqldata/mysql" {
		t.Errorf("ParseZFSGet: %v %v", vals, srcs)
	}
	if len(vals) != 1 {
		t.Errorf("garbage parsed as a dataset: %v", vals)
	}
}

func TestParseKstat(t *testing.T) {
	s := "13 1 0x01 147 39984 4179136469 1197834170536853\nname type data\nhits 4 48915271\nsize 4 4294967296\nbad 4 x\n"
	got := ParseKstat(s)
	if got["hits"] != 48915271 || got["size"] != 4294967296 || len(got) != 2 {
		t.Errorf("ParseKstat = %v", got)
	}
}

func TestDeviceKind(t *testing.T) {
	for name, want := range map[string]string{
		"nvme0n1": "nvme", "vda": "virtio", "xvda": "xen", "sda": "scsi", "hdb": "ata", "mmcblk0": "mmc",
		"loop3": "loop", "dm-0": "dm", "md127": "md", "zram0": "zram", "ram0": "ram", "rbd0": "rbd", "nbd1": "nbd", "bcache0": "other",
	} {
		if got := DeviceKind(name); got != want {
			t.Errorf("DeviceKind(%s) = %s, want %s", name, got, want)
		}
	}
	for _, tc := range []struct {
		kind, vendor, model string
		want                bool
	}{
		{"virtio", "0x1af4", "", true},
		{"scsi", "QEMU    ", "QEMU HARDDISK", true},
		{"scsi", "Msft    ", "Virtual Disk", true},
		{"scsi", "ATA     ", "Samsung SSD 870", false},
		{"nvme", "", "Amazon Elastic Block Store", true},
		{"nvme", "", "SAMSUNG MZQL2960HCJR-00A07", false},
		{"loop", "", "", false},
	} {
		if got := virtualDevice(tc.kind, tc.vendor, tc.model); got != tc.want {
			t.Errorf("virtualDevice(%q, %q, %q) = %v", tc.kind, tc.vendor, tc.model, got)
		}
	}
}

func TestActiveChoice(t *testing.T) {
	for line, want := range map[string]string{
		"none [mq-deadline] kyber bfq": "mq-deadline",
		"[none] mq-deadline":           "none",
		"none":                         "none",
	} {
		if got, ok := ActiveChoice(line); !ok || got != want {
			t.Errorf("ActiveChoice(%q) = %q %v", line, got, ok)
		}
	}
	if _, ok := ActiveChoice("none mq-deadline"); ok {
		t.Error("no bracketed choice must not be active")
	}
}
