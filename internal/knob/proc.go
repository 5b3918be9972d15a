package knob

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// serverProcess returns the PID of the live server process whose working
// directory is dataDir (PostgreSQL and MySQL both change into their data
// directory) and whose command name is one of comms, or 0 when none runs:
// a stale PID file, or a PID reused by another process, is no server.
func serverProcess(h *host.Host, pid int, dataDir string, comms ...string) int {
	if pid <= 0 {
		return 0
	}
	comm, err := h.Comm(pid)
	if err != nil || !slices.Contains(comms, comm) {
		return 0
	}
	cwd, err := h.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return 0
	}
	want, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		want = filepath.Clean(dataDir)
	}
	if filepath.Clean(cwd) != want {
		return 0
	}
	return pid
}

// readPIDFile reads the first line of a PID file.
func readPIDFile(h *host.Host, p string) int {
	b, err := h.ReadFile(p)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}
