package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/galera"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// GaleraToleranceSchema names the layout of 'galera tolerance --format json'.
const GaleraToleranceSchema = "dbhost.galera_tolerance/1"

// galeraTolerance is what 'galera tolerance' reports: each cluster found
// (or planned with --members), and the Galera nodes it could not read.
type galeraTolerance struct {
	Schema   string          `json:"schema"`
	Source   string          `json:"source"`
	Clusters []galeraCluster `json:"clusters"`
	NotRead  []galeraNotRead `json:"not_read"`
}

// galeraCluster is one cluster: the nodes of this host that belong to it
// (one wsrep_cluster_state_uuid) and what its layout survives.
type galeraCluster struct {
	StateUUID string           `json:"state_uuid,omitempty"`
	Nodes     []string         `json:"nodes,omitempty"`
	Tolerance galera.Tolerance `json:"tolerance"`
	// Serious: a single failure or one segment cut off stops it (exit 1).
	Serious bool `json:"serious"`
}

type galeraNotRead struct {
	Node string `json:"node"`
	Why  string `json:"why"`
}

var galeraFormats = new(report.Formats[*galeraTolerance]).
	Add("text", writeGaleraText).
	Add("json", func(w io.Writer, t *galeraTolerance) error { return writeJSON(w, t) })

func (a *app) galeraCmd() *cobra.Command {
	return a.groupCmd("galera SUBCOMMAND", "Galera clusters: galera tolerance",
		`Galera / Percona XtraDB Cluster: what a cluster's layout survives (docs/galera.md).`,
		a.galeraToleranceCmd())
}

func (a *app) galeraToleranceCmd() *cobra.Command {
	c := newCmd("tolerance", "what failures a Galera cluster survives: at once, one by one, per segment")
	c.Example = `  sudo dbhost galera tolerance
  sudo dbhost galera tolerance --mysql 'root@unix(/run/mysqld/mysqld.sock)/'
  dbhost galera tolerance --members db1,db2,db3,garbd:arbitrator
  dbhost galera tolerance --members 4:segments=2 --format json`
	c.Long = `What a Galera cluster's layout survives: how many members may fail at once and one by one
before no data node is left in a Primary component, how many may shut down cleanly, the
worst single failure, each segment lost whole or cut off, and what one change (an
arbitrator, a removed member, a pc.weight of 2) would give.

Without --members it reads every Galera node running on this host (live, or in the
snapshot given with --from): nodes of one cluster (the same wsrep_cluster_state_uuid) are
read together, each with its own pc.weight and gmcast.segment; the other members' weights
and segments are what the nodes' status tells, and assumed where it does not (the output
says so). With --members it judges a layout you describe, no server needed:
NAME[:weight=N][:segment=N][:arbitrator],... or N, N+garbd, N+garbd:segments=S.`
	setExits(c, map[int]string{
		ExitOK:       "Every cluster survives any single failure and any one segment cut off.",
		ExitFindings: "A cluster does not survive some single failure, or a segment cut off stops it.",
		ExitError:    "It could not run: bad flags, or no Galera node found or read.",
	})
	fs := c.Flags()
	var src sourceFlags
	src.registerHost(fs, true)
	fs.StringVar(&src.mysqlDSN, "mysql", "", "MySQL DSN of a local node (default: its socket with ~/.my.cnf or socket auth)")
	trustServerFlag(fs, &src.trust)
	members := fs.String("members", "", "judge this layout instead of the running nodes: db1,db2,db3,garbd:arbitrator or 3+garbd")
	format := fs.String("format", "text", "output format: text or json")
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		fail := func(err error) int {
			fmt.Fprintln(env.Stderr, "dbhost galera tolerance:", err)
			return ExitError
		}
		if err := galeraFormats.Check(*format); err != nil {
			return fail(err)
		}
		var rep *galeraTolerance
		if *members != "" {
			if src.from != "" || src.mysqlDSN != "" {
				return fail(errors.New("--members judges a described layout: not with --from or --mysql"))
			}
			l, err := galera.ParseMembers(*members)
			if err != nil {
				return fail(fmt.Errorf("--members: %w", err))
			}
			tol := galera.Analyze(l)
			rep = &galeraTolerance{Schema: GaleraToleranceSchema, Source: "members",
				Clusters: []galeraCluster{{Tolerance: tol, Serious: tol.Serious()}}}
		} else {
			h, err := src.open()
			if err != nil {
				return fail(err)
			}
			defer h.Close()
			rep, err = readGaleraClusters(ctx, h, engine.Options{MySQLDSN: src.mysqlDSN, TrustServers: trustedDirs(src.trust)}, env.Servers)
			if err != nil {
				return fail(err)
			}
		}
		if rep.NotRead == nil {
			rep.NotRead = []galeraNotRead{}
		}
		if err := galeraFormats.Render(env.Stdout, *format, rep); err != nil {
			return fail(err)
		}
		if len(rep.Clusters) == 0 {
			return ExitError // every node found was unreadable: said in not_read
		}
		for _, cl := range rep.Clusters {
			if cl.Serious {
				return ExitFindings
			}
		}
		return ExitOK
	})
	return c
}

// readGaleraClusters finds the MySQL-family servers of the host that are
// Galera nodes, reads each one's view (its variables and wsrep status) and
// merges the nodes of one cluster. keep, when set, selects the servers
// (Env.Servers). An error only when no Galera node is found at all.
func readGaleraClusters(ctx context.Context, h *host.Host, opts engine.Options, keep func(*facts.Instance) bool) (*galeraTolerance, error) {
	t, err := engine.ReadTable(h)
	if err != nil {
		return nil, err
	}
	insts, _ := engine.Discover(ctx, h, t, opts)
	rep := &galeraTolerance{Schema: GaleraToleranceSchema, Source: h.Source(), Clusters: []galeraCluster{}}
	var views []galera.NodeView
	found := 0
	for _, in := range insts {
		if in.Engine != engine.MySQL || in.MySQL == nil || !in.MySQL.Galera {
			continue
		}
		if keep != nil && h.Live() && !keep(&facts.Instance{Instance: in}) {
			continue
		}
		found++
		if v := galera.View(in); v != nil {
			views = append(views, *v)
			continue
		}
		why := in.MySQL.GaleraErr
		switch {
		case !in.Trusted():
			why = "not trusted, so not connected to: " + in.Trust.Why
		case why != "":
		case in.LiveErr != "":
			why = "not read live: " + in.LiveErr
		case in.SettingsSource != "live":
			why = "settings read from files only: the cluster's status needs a live connection"
		default:
			why = "no wsrep status"
		}
		rep.NotRead = append(rep.NotRead, galeraNotRead{Node: in.Name(), Why: why})
	}
	if found == 0 {
		return nil, errors.New("no Galera node found on " + h.Source() + " (a MySQL-family server with wsrep on)")
	}
	for _, c := range galera.Group(views) {
		tol := galera.Analyze(c.Layout)
		rep.Clusters = append(rep.Clusters, galeraCluster{StateUUID: c.StateUUID, Nodes: c.Nodes, Tolerance: tol, Serious: tol.Serious()})
	}
	return rep, nil
}

func writeGaleraText(w io.Writer, t *galeraTolerance) error {
	var b strings.Builder
	for i, cl := range t.Clusters {
		if i > 0 {
			b.WriteString("\n")
		}
		switch {
		case cl.StateUUID != "":
			fmt.Fprintf(&b, "cluster %s, read on %s\n\n", termsafe.Line(cl.StateUUID), termsafe.Line(strings.Join(cl.Nodes, ", ")))
		case len(cl.Nodes) > 0:
			fmt.Fprintf(&b, "cluster of %s\n\n", termsafe.Line(strings.Join(cl.Nodes, ", ")))
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
		b.Reset()
		if err := galera.WriteText(w, cl.Tolerance); err != nil {
			return err
		}
	}
	if len(t.NotRead) > 0 {
		b.WriteString("\nnot read:\n")
		for _, n := range t.NotRead {
			fmt.Fprintf(&b, "  %s: %s\n", termsafe.Line(n.Node), termsafe.Line(n.Why))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
