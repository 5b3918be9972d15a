package host_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeServerRoot is a host root whose process table holds one database
// server (comm, argv) and whose files are given, each repeated to size
// bytes when size > 0.
func fakeServerRoot(t *testing.T, comm string, argv []string, files map[string]string, size int) string {
	t.Helper()
	root := t.TempDir()
	write := func(p string, b []byte) {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/100/stat", []byte("100 ("+comm+") S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"))
	write("proc/100/status", []byte("Name:\t"+comm+"\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"))
	write("proc/100/comm", []byte(comm+"\n"))
	write("proc/100/cmdline", []byte(strings.Join(argv, "\x00")+"\x00"))
	write("etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"))
	for p, c := range files {
		b := []byte(c)
		if size > 0 {
			head, line, _ := strings.Cut(c, "\n")
			b = append([]byte(head+"\n"), bytes.Repeat([]byte(line), size/len(line))...)
		}
		write(p, b)
	}
	return root
}

// TestHugeConfigOnRoot: a 50 MB configuration file under --root is
// reported as too large, and costs neither time nor memory.
func TestHugeConfigOnRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process per root")
	}
	const size = 50 << 20
	for _, c := range []struct {
		name string
		root string
		file string
	}{
		{"postgresql.conf", fakeServerRoot(t, "postgres",
			[]string{"/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/postgresql/15/main", "-c", "config_file=/etc/postgresql/15/main/postgresql.conf"},
			map[string]string{"etc/postgresql/15/main/postgresql.conf": "# 50 MB\nshared_buffers = 128MB  # padded out to a longer line, as a generated file might be\n"}, size),
			"/etc/postgresql/15/main/postgresql.conf"},
		{"my.cnf", fakeServerRoot(t, "mariadbd", []string{"/usr/sbin/mariadbd"},
			map[string]string{"etc/mysql/my.cnf": "[mysqld]\ninnodb_buffer_pool_size = 128M\n"}, size),
			"/etc/mysql/my.cnf"},
	} {
		r := auditInChild(t, "--root "+c.root, "DBHOST_BOMB_PRINT=1")
		t.Logf("50 MB %-16s %-8s in %5.0f ms (CPU %5.0f ms), peak RSS %5.1f MB", c.name, strings.SplitN(r.out, ":", 2)[0],
			float64(r.elapsed.Microseconds())/1000, float64(r.cpu.Microseconds())/1000, r.rssMB)
		if want := c.file + ": configuration file larger than 4 MiB"; !strings.Contains(r.out, want) {
			t.Errorf("%s: the audit does not say %q:\n%.2000s", c.name, want, r.out)
		}
		if r.cpu > 5*time.Second || r.rssMB > 100 {
			t.Errorf("%s: %v of CPU (%v on the clock) and %.0f MB RSS, want < 5 s and < 100 MB", c.name, r.cpu, r.elapsed, r.rssMB)
		}
	}
}
