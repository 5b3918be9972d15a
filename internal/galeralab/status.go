package galeralab

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/engine"
	mysqlengine "github.com/dbhost/dbhost/internal/engine/mysql"
)

// connect opens a data node over its socket as root (socket
// authentication: the lab has no passwords).
func connect(n Node) (*sql.DB, error) {
	if n.Arbitrator {
		return nil, fmt.Errorf("%s is an arbitrator: it has no SQL", n.Name)
	}
	// The socket is in the mysql user's directory: a link there could
	// send root's statements to another server.
	if fi, err := os.Lstat(n.Socket); err != nil {
		return nil, err
	} else if fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("%s is not a socket (%s)", n.Socket, fi.Mode().Type())
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User = "unix", n.Socket, "root"
	cfg.Timeout = 2 * time.Second
	cfg.ReadTimeout = 10 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	return db, nil
}

func queryStatus(ctx context.Context, n Node) (map[string]string, error) {
	db, err := connect(n)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name LIKE 'wsrep%' OR Variable_name = 'Uptime'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		st[strings.ToLower(k)] = v
	}
	return st, rows.Err()
}

// Status is a data node's view of its cluster, read live over its socket.
func (l *Lab) Status(ctx context.Context, name string) (*engine.GaleraStatus, error) {
	l.mu.Lock()
	n, _, err := l.node(name)
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	st, err := queryStatus(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	g := toStatus(st)
	if g.ClusterStatus == "Primary" {
		g.Members = members(ctx, n)
	}
	return g, nil
}

// toStatus reads the status as the audit does. A node that answers
// without wsrep_cluster_status (the provider not loaded yet) is Disconnected.
func toStatus(st map[string]string) *engine.GaleraStatus {
	g, err := mysqlengine.ParseGaleraStatus(st)
	if err != nil {
		return &engine.GaleraStatus{ClusterStatus: "Disconnected"}
	}
	return g
}

// members lists the component as mysql.wsrep_cluster_members does (nil
// when the table cannot be read).
func members(ctx context.Context, n Node) []engine.GaleraMember {
	db, err := connect(n)
	if err != nil {
		return nil
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT node_uuid, node_name, node_incoming_address FROM mysql.wsrep_cluster_members ORDER BY node_name")
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []engine.GaleraMember
	for rows.Next() {
		var m engine.GaleraMember
		if rows.Scan(&m.UUID, &m.Name, &m.IncomingAddress) == nil {
			out = append(out, m)
		}
	}
	return out
}

// synced: a data node Synced and ready in a Primary component of size.
func synced(st map[string]string, size int) bool {
	return st["wsrep_cluster_status"] == "Primary" && st["wsrep_local_state_comment"] == "Synced" &&
		st["wsrep_ready"] == "ON" && (size == 0 || st["wsrep_cluster_size"] == strconv.Itoa(size))
}

// waitSynced waits until every data node named is Synced in a Primary
// component of size members (0: any size), or the deadline; the error
// says what each node lacked and shows its log.
func (l *Lab) waitSynced(ctx context.Context, names []string, size int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := map[string]string{}
	for {
		done := true
		for _, name := range names {
			n, _, err := l.node(name)
			if err != nil {
				return err
			}
			if p := l.procs[name]; p != nil {
				select {
				case <-p.exited:
					return fmt.Errorf("%s exited while the lab waited for it to be Synced; log:\n%s", name, l.logTail(n, 20))
				default:
				}
			}
			st, err := queryStatus(ctx, n)
			switch {
			case err != nil:
				last[name] = "no answer: " + err.Error()
				done = false
			case !synced(st, size):
				last[name] = fmt.Sprintf("%s, %s, size %s", st["wsrep_cluster_status"], st["wsrep_local_state_comment"], st["wsrep_cluster_size"])
				done = false
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			var b strings.Builder
			want := "any size"
			if size > 0 {
				want = fmt.Sprintf("size %d", size)
			}
			fmt.Fprintf(&b, "waited %v for %s to be Synced in a Primary component of %s:", within, strings.Join(names, ", "), want)
			for _, name := range names {
				if s, ok := last[name]; ok {
					n, _, _ := l.node(name)
					fmt.Fprintf(&b, "\n%s: %s; log:\n%s", name, s, l.logTail(n, 12))
				}
			}
			return errors.New(b.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitMembers waits until ref, a running data node, counts size members
// in its Primary component: joiner has joined the group (its state
// transfer may still run).
func (l *Lab) waitMembers(ctx context.Context, ref, joiner Node, size int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := ""
	for {
		if p := l.procs[joiner.Name]; p != nil {
			select {
			case <-p.exited:
				return fmt.Errorf("%s exited while joining; log:\n%s", joiner.Name, l.logTail(joiner, 20))
			default:
			}
		}
		st, err := queryStatus(ctx, ref)
		if err == nil {
			if n, _ := strconv.Atoi(st["wsrep_cluster_size"]); n >= size && st["wsrep_cluster_status"] == "Primary" {
				return nil
			}
			last = fmt.Sprintf("%s sees %s, size %s", ref.Name, st["wsrep_cluster_status"], st["wsrep_cluster_size"])
		} else {
			last = ref.Name + ": no answer: " + err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %v for %s to join (%s); log of %s:\n%s", within, joiner.Name, last, joiner.Name, l.logTail(joiner, 15))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitSize waits until ref's Primary component has exactly size members.
// When ref's component loses Primary meanwhile (members killed just
// before a recovery are noticed only after the suspect timeout), it is
// bootstrapped: a recovery wants one Primary component.
func (l *Lab) waitSize(ctx context.Context, ref Node, size int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := ""
	for {
		st, err := queryStatus(ctx, ref)
		if err == nil {
			if st["wsrep_cluster_size"] == strconv.Itoa(size) && st["wsrep_cluster_status"] == "Primary" {
				return nil
			}
			if st["wsrep_cluster_status"] == "non-Primary" {
				if err := l.bootstrapRunning(ctx, ref.Name); err != nil {
					return err
				}
			}
			last = fmt.Sprintf("%s, size %s", st["wsrep_cluster_status"], st["wsrep_cluster_size"])
		} else {
			last = "no answer: " + err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %v for %s to count %d members in a Primary component (%s); log:\n%s", within, ref.Name, size, last, l.logTail(ref, 15))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
