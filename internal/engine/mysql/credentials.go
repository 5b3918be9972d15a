package mysql

import "github.com/dbhost/dbhost/internal/host"

// ClientCredentials returns the login the live settings read uses when no
// DSN is given: user and password from the invoking user's ~/.my.cnf
// client groups, else the invoking user's name without a password (socket
// authentication). src names the file the credentials came from, "" when
// none. It lets a process that kept no password (a journal undo after a
// crash) log in the way dbhost always does.
func ClientCredentials(h *host.Host) (user, password, src string) {
	return clientCredentials(h)
}
