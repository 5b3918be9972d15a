package postgres

import (
	"errors"
	"fmt"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// ownDataDir returns dir when it can be the instance's data directory, else
// "" with the reason in ConfigErrors. PostgreSQL starts only on a data
// directory owned by the user it runs as, so one owned by someone else
// belongs to another server: anyone can start a process named postgres
// with -D pointing at the system's cluster, and it must not be described
// with that cluster's files and version. A directory that cannot be
// examined is kept (unknown is not wrong).
func ownDataDir(h *host.Host, in *engine.Instance, dir string) string {
	if dir == "" {
		return ""
	}
	fi, err := h.Stat(dir)
	if errors.Is(err, host.ErrRefused) {
		// h reads as the process could: a directory it cannot even
		// reach is not the one it runs on.
		in.ConfigErrors = append(in.ConfigErrors, fmt.Sprintf("data directory %s: %s; not used", dir, host.Explain(err)))
		return ""
	}
	if err != nil || fi.UID == in.UID {
		return dir
	}
	in.ConfigErrors = append(in.ConfigErrors, fmt.Sprintf(
		"data directory %s belongs to uid %d, not to the server's user %s (uid %d): PostgreSQL runs only on its own user's data directory, so it is another server's; not used",
		dir, fi.UID, in.User, in.UID))
	return ""
}
