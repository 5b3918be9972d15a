package host

import (
	"context"
	"os/exec"
	"testing"
)

func TestBannerVersion(t *testing.T) {
	for in, want := range map[string]string{
		"2.36.\x00":                 "2.36",
		"2.17, by Roland McGrath":   "2.17",
		"2.36.9000.\n":              "2.36.9000",
		"2..36":                     "",
		"2":                         "",
		"x2.36":                     "",
		"":                          "",
		"10.2.1 (GNU libc)\x00more": "10.2.1",
	} {
		if got := bannerVersion([]byte(in)); got != want {
			t.Errorf("bannerVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// The version read from the dynamic linker is what getconf itself says on
// this machine (where getconf is glibc's).
func TestGlibcVersionIsGetconfs(t *testing.T) {
	want, err := exec.Command("getconf", "GNU_LIBC_VERSION").Output()
	if err != nil {
		t.Skip("no glibc getconf here:", err)
	}
	h, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.linkerGlibc("getconf")
	if err != nil {
		t.Fatalf("linkerGlibc: %v (getconf says %q)", err, want)
	}
	if got := "glibc " + v + "\n"; got != string(want) {
		t.Errorf("from the linker %q, getconf says %q", got, want)
	}
	got, err := h.GlibcVersion(context.Background())
	if err != nil || string(got) != string(want) {
		t.Errorf("GlibcVersion = %q, %v; getconf says %q", got, err, want)
	}
}
