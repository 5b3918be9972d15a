package host

import (
	"io/fs"
	"reflect"
	"testing"
)

// A live value skips the JSON round trip only where the round trip would
// give it back unchanged, so live and snapshot audits still see the same.
func TestJSONIdentity(t *testing.T) {
	values := []any{
		FileInfo{}, FileInfo{Mode: fs.ModeDir | fs.ModeSetuid | 0o755, UID: -1, GID: 1 << 30, Size: -5, Dev: 1<<64 - 1, Ino: 0, IsDir: true},
		FileStat{Dev: 1<<64 - 1, Ino: 7, Mode: 0o100644, UID: 1<<32 - 1, Nlink: 3, Size: 1 << 62, Blocks: -1},
		FSStat{Type: 0x58465342, Bsize: 4096, Blocks: 1<<64 - 1, Bfree: 0},
		[]uint64(nil), []uint64{}, []uint64{0, 1<<64 - 1},
		[]string(nil), []string{}, []string{"", "postgres", "-D", "/var/lib/postgresql/15/main", "ünï\tcode\x00\x1b[31m"},
		[]string{"bad\xffutf8"}, []string{"ok", "\xc3"},
	}
	for _, x := range values {
		b, err := marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(x))
		if err := unmarshal(b, back.Interface()); err != nil {
			t.Fatal(err)
		}
		same := reflect.DeepEqual(back.Elem().Interface(), x)
		if jsonIdentity(x) && !same {
			t.Errorf("%#v: taken as unchanged by JSON, but comes back as %#v", x, back.Elem().Interface())
		}
		if !jsonIdentity(x) && same {
			t.Errorf("%#v: comes back unchanged, but takes the round trip", x)
		}
	}
}
