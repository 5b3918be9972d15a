package facts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// FuzzMountInfo feeds arbitrary /proc/PID/mountinfo text through the host
// model (procfs's parser), dbhost's conversion and the mount lookup that
// follows data directories: no panic, and a found mount always contains the
// path.
func FuzzMountInfo(f *testing.F) {
	f.Add("27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n")
	f.Add("42 27 7:0 / /mnt/t rw,noatime - xfs /dev/loop0 rw,inode64,logbufs=8\n" +
		"50 27 0:45 / /var/lib/mysql rw,noatime shared:1 - nfs4 filer:/vol/db rw,vers=4.1,rsize=1048576,wsize=1048576,hard,proto=tcp\n")
	f.Add("61 27 0:52 /data /srv/pg\\040data rw - zfs tank/pg rw,xattr\n")
	f.Add("1 1 0:1 / / rw - \n")
	f.Add("garbage\n\n - \n")
	f.Fuzz(func(t *testing.T, info string) {
		root := t.TempDir()
		dir := filepath.Join(root, "proc", "1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := host.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		mounts, err := readMounts(h, 1)
		if err != nil {
			return
		}
		for _, p := range []string{"/", "/var/lib/mysql/ibdata1", "/srv/pg data/base", "/mnt/t"} {
			m := FindMount(mounts, p)
			if m != nil && !underPath(cleanPath(p), m.MountPoint) {
				t.Fatalf("%s resolved to mount %q, which does not contain it", p, m.MountPoint)
			}
			if m != nil && strings.ContainsRune(m.MountPoint, 0) {
				t.Fatalf("NUL in mount point %q", m.MountPoint)
			}
		}
	})
}
