package host

import "testing"

// BenchmarkReadFile measures a plain read of a /proc pseudo-file, read
// hundreds of times per audit, and of a file under /etc.
func BenchmarkReadFile(b *testing.B) {
	h, err := Open("/")
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	for _, p := range []string{"/proc/sys/vm/swappiness", "/proc/self/stat", "/etc/passwd"} {
		b.Run(p, func(b *testing.B) {
			for b.Loop() {
				if _, err := h.ReadFile(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
