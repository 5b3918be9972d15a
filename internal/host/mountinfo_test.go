package host

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMountInfoParsedOncePerContent: processes that print the same table
// share one parse; a process with another table gets its own, and so does
// /proc/self.
func TestMountInfoParsedOncePerContent(t *testing.T) {
	root := t.TempDir()
	table := func(mnt string) string { return "22 1 8:1 / " + mnt + " rw,relatime shared:1 - ext4 /dev/sda1 rw\n" }
	for pid, content := range map[string]string{"1": table("/"), "2": table("/"), "3": table("/srv"), "self": table("/self")} {
		dir := filepath.Join(root, "proc", pid)
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	point := func(pid int) string {
		t.Helper()
		m, err := h.MountInfo(pid)
		if err != nil || len(m) != 1 {
			t.Fatalf("MountInfo(%d) = %v, %v", pid, m, err)
		}
		return m[0].MountPoint
	}
	if a, b, c := point(1), point(2), point(3); a != "/" || b != "/" || c != "/srv" {
		t.Errorf("mount points %q %q %q, want / / /srv", a, b, c)
	}
	m1, _ := h.MountInfo(1)
	m2, _ := h.MountInfo(2)
	if &m1[0] != &m2[0] {
		t.Error("the same table was parsed twice")
	}
	self, err := h.SelfMountInfo()
	if err != nil || len(self) != 1 || self[0].MountPoint != "/self" {
		t.Errorf("SelfMountInfo = %v, %v; want /self", self, err)
	}
}
