package pgbin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNewestFirst(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/10/bin"}
	byVersion(dirs)
	want := []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/10/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin"}
	for i := range want {
		if dirs[i] != want[i] {
			t.Fatalf("byVersion = %v, want %v", dirs, want)
		}
	}
}

// On a host with PostgreSQL installed (the development VM and CI), Dir names
// a directory holding the server and its tools.
func TestDir(t *testing.T) {
	d, err := Dir()
	if err != nil {
		if os.Getenv("DBHOST_INTEGRATION") == "require" {
			t.Fatal(err)
		}
		t.Skipf("PostgreSQL is not installed (DBHOST_INTEGRATION=require makes this a failure): %v", err)
	}
	for _, p := range []string{"postgres", "initdb", "pg_ctl"} {
		if st, err := os.Stat(filepath.Join(d, p)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s: %v", filepath.Join(d, p), err)
		}
	}
}
