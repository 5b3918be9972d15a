// Package pgbin finds the installed PostgreSQL server programs (initdb,
// postgres, pg_ctl, pgbench). It is a leaf package so that both the
// experiment cluster and the test helpers can use it without import cycles.
package pgbin

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Dir returns the directory of the newest installed PostgreSQL server: the
// highest /usr/lib/postgresql/VERSION/bin holding a postgres binary (the
// Debian/Ubuntu layout, where several majors coexist), else what
// `pg_config --bindir` names, else the directory of postgres on PATH.
func Dir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	byVersion(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if hasServer(dirs[i]) {
			return dirs[i], nil
		}
	}
	if pc, err := exec.LookPath("pg_config"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, pc, "--bindir").Output(); err == nil {
			if d := strings.TrimSpace(string(out)); d != "" && hasServer(d) {
				return d, nil
			}
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server installed (apt-get install postgresql)")
}

// byVersion sorts .../VERSION/bin directories oldest first, numerically:
// "9.6" < "10" < "15".
func byVersion(dirs []string) {
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	sort.SliceStable(dirs, func(a, b int) bool { return version(dirs[a]) < version(dirs[b]) })
}

func hasServer(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "postgres"))
	return err == nil && st.Mode().IsRegular()
}
