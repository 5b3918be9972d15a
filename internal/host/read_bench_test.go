package host

import "testing"

// BenchmarkReadFile measures a read of /proc pseudo-files, read hundreds
// of times per audit, and of a file under /etc: by the host, and through
// a view (whose walk of the directories above is cached).
func BenchmarkReadFile(b *testing.B) {
	h, err := Open("/")
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	for _, r := range []struct {
		name string
		h    *Host
	}{{"host", h}, {"view", h.For(Claim{UID: 0, GIDs: []int{0}})}} {
		for _, p := range []string{"/proc/sys/vm/swappiness", "/proc/self/stat", "/etc/passwd"} {
			b.Run(r.name+p, func(b *testing.B) {
				for b.Loop() {
					if _, err := r.h.ReadFile(p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
