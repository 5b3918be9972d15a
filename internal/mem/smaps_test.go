package mem

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const smapsSample = `7f08387a6000-7f084163e000 rw-s 00000000 00:01 1030                       /dev/zero (deleted)
Size:             146016 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:               10796 kB
Pss:                7779 kB
Pss_Dirty:          7779 kB
Shared_Clean:          0 kB
Shared_Dirty:       5844 kB
Private_Clean:         0 kB
Private_Dirty:      4952 kB
Referenced:        10796 kB
Anonymous:             0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
VmFlags: rd wr sh mr mw me ms
55f88ec92000-55f88ed60000 r--p 00000000 fe:00 316526                     /usr/lib/postgresql/15/bin/postgres
Size:                824 kB
Rss:                 800 kB
Pss:                 100 kB
Shared_Clean:        800 kB
Private_Clean:         0 kB
Anonymous:             0 kB
7ffd1000-7ffd2000 rw-p 00000000 00:00 0                                  [stack]
Size:                  4 kB
Rss:                   4 kB
Pss:                   4 kB
Private_Dirty:         4 kB
Anonymous:             4 kB
`

func TestParseSmaps(t *testing.T) {
	tot, maps := ParseSmaps([]byte(smapsSample), func(h *Header) bool { return h.Shared() })
	if tot.Rss != (10796+800+4)<<10 || tot.Pss != (7779+100+4)<<10 || tot.USS() != (4952+4)<<10 {
		t.Errorf("totals %+v", tot)
	}
	if tot.PssAnon != 4<<10 || tot.HasPssAnon {
		t.Errorf("anonymous PSS estimate %d (has %v), want the stack's 4 KiB", tot.PssAnon, tot.HasPssAnon)
	}
	if len(maps) != 1 {
		t.Fatalf("kept %d mappings, want the shared one", len(maps))
	}
	m := maps[0]
	if m.Path != "/dev/zero (deleted)" || m.Major != 0 || m.Minor != 1 || m.Inode != 1030 ||
		m.Start != 0x7f08387a6000 || m.End != 0x7f084163e000 || m.Pss != 7779<<10 || m.Size != 146016<<10 || m.KernelPageSize != 4096 {
		t.Errorf("mapping %+v", m)
	}
}

// Odd lines are skipped, whatever they are, and nothing panics.
func TestParseSmapsOdd(t *testing.T) {
	odd := "garbage\nRss: 12\nRss: x kB\nRss:\nPss: 99999999999999999999999 kB\n7f-7e rw-s 0 00:01 1 /dev/zero\n" +
		"7f-80 rw-s 0 00:01\nzz-yy\n" + smapsSample[:strings.Index(smapsSample, "Pss:")+2]
	tot, maps := ParseSmaps([]byte(odd), func(*Header) bool { return true })
	if tot.Rss != 10796<<10 || tot.Pss != 0 || len(maps) != 1 {
		t.Errorf("totals %+v maps %+v: only the whole lines of the sample count", tot, maps)
	}
	for i := range len(smapsSample) {
		ParseSmaps([]byte(smapsSample[:i]), func(*Header) bool { return true })
	}
}

func TestParseStatus(t *testing.T) {
	st := parseStatus([]byte("Name:\tpostgres\nUmask:\t0077\nState:\tS (sleeping)\nPPid:\t1\nUid:\t101\t102\t101\t101\nGid:\t104\t105\t104\t104\n" +
		"VmRSS:\t   30740 kB\nRssAnon:\t    2440 kB\nRssFile:\t   17504 kB\nRssShmem:\t   10796 kB\nHugetlbPages:\t       0 kB\nVmSwap:\t       0 kB\n"))
	if st.Name != "postgres" || st.PPID != 1 || st.UID != 102 || st.GID != 105 || !st.HasMM || !st.hasSplit ||
		st.RssAnon != 2440<<10 || st.RssFile != 17504<<10 || st.RssShmem != 10796<<10 {
		t.Errorf("%+v", st)
	}
	if k := parseStatus([]byte("Name:\tkthreadd\nPPid:\t0\n")); k.HasMM || !k.ok {
		t.Errorf("kernel thread: %+v", k)
	}
}

func TestParseSysVShm(t *testing.T) {
	in := "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n" +
		"    745552          4   600                    56  2206  2234      5   101   104   101   104 1795281542 1795281542 1795281539                  4096                     0\n" +
		"         0         17   600              67108864  9000  9001      0     0     0     0     0 0 0 0              33554432                     0\n"
	m := parseSysVShm([]byte(in))
	if s := m[4]; s.Key != 745552 || s.Size != 56 || s.CPID != 2206 || s.Nattch != 5 || s.RSS != 4096 || !s.HasRSS {
		t.Errorf("%+v", s)
	}
	if s := m[17]; s.Nattch != 0 || s.RSS != 32<<20 {
		t.Errorf("%+v", s)
	}
	if len(parseSysVShm([]byte("key shmid\n1 2\n"))) != 0 {
		t.Error("a header without the needed columns must yield nothing")
	}
}

func TestMountinfoOvermount(t *testing.T) {
	mt := parseMountinfo([]byte("24 27 0:6 / /dev rw - devtmpfs devtmpfs rw\n" +
		"25 24 0:23 / /dev/shm rw - tmpfs tmpfs rw\n" +
		"30 25 0:27 / /dev/shm rw - tmpfs tmpfs rw\n" +
		"40 27 0:40 / /mnt/huge\\040pages rw - hugetlbfs hugetlbfs rw,pagesize=2M\n" +
		"41 27 8:1 / /data rw - ext4 /dev/sda1 rw\n"))
	if len(mt.list) != 3 || mt.list[1].minor != 27 || mt.list[2].point != "/mnt/huge pages" {
		t.Errorf("mounts %+v", mt.list)
	}
	h := &Header{Perms: [4]byte{'r', 'w', '-', 's'}, Major: 0, Minor: 23, Path: []byte("/dev/shm/PostgreSQL.1")}
	if k, ok := mt.classify(h); !ok || k != KindPOSIX {
		t.Errorf("a file of the hidden /dev/shm: %q %v", k, ok)
	}
	h.Minor, h.Path = 40, []byte("/mnt/huge pages/buf")
	if k, _ := mt.classify(h); k != KindHugetlbfs {
		t.Errorf("hugetlbfs: %q", k)
	}
	h.Major, h.Minor, h.Path = 8, 1, []byte("/data/file")
	if _, ok := mt.classify(h); ok {
		t.Error("a data file mapped shared is page cache, not a region")
	}
}

func FuzzParseSmaps(f *testing.F) {
	f.Add([]byte(smapsSample))
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*-stay", "proc", "*", "smaps*"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
	f.Add([]byte("7f-80 rw-s 0 00:01 1 /dev/zero\nRss: 4 kB\nPss"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tot, maps := ParseSmaps(b, func(h *Header) bool { return h.Shared() })
		var sum uint64
		for _, m := range maps {
			if m.End < m.Start {
				t.Fatalf("mapping %x-%x", m.Start, m.End)
			}
			if !bytes.Contains(b, []byte(m.Path)) {
				t.Fatalf("path %q not in the input", m.Path)
			}
			sum += m.Rss
		}
		if sum > tot.Rss {
			t.Fatalf("kept mappings' Rss %d exceeds the total %d", sum, tot.Rss)
		}
		ParseMaps(b, func(*Header) {})
		parseStatus(b)
	})
}
