package testdb

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestServersStartAndStop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB, Options) *Server
	}{{"postgres", Postgres}, {"mariadb", MariaDB}, {"redis", Redis}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.start(t, Options{Nofile: 4096})
			b, err := os.ReadFile("/proc/" + itoa(s.PID) + "/limits")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "Max open files            4096                 4096") {
				t.Errorf("prlimit not applied:\n%s", b)
			}
			dir := s.Dir
			s.Stop(t)
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("directory %s left behind", dir)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
