package engine

import "github.com/dbhost/dbhost/internal/host"

// TableFrom builds the process table from processes a caller has already
// read (dbhost mem parses every process's status for its memory counters
// and takes PID, PPID, name and IDs from the same read), with user and
// group names from the host's /etc/passwd and /etc/group.
func TableFrom(h *host.Host, procs []Process) *Table {
	t := &Table{Procs: procs, byPID: make(map[int]*Process, len(procs))}
	t.users = readIDNames(h, "/etc/passwd")
	t.groups = readIDNames(h, "/etc/group")
	for i := range t.Procs {
		p := &t.Procs[i]
		if p.User == "" {
			p.User = t.UserName(p.UID)
		}
		t.byPID[p.PID] = p
	}
	return t
}
