package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/galeralab"
)

func (a *app) labCmd() *cobra.Command {
	return a.groupCmd("lab SUBCOMMAND", "private clusters on this host, to try a change or a failure: lab galera",
		`Private clusters on this host, made from the distribution's packages, to try a change or
a failure before production. See docs/galera-lab.md.`, a.labGaleraCmd())
}

// labProveFormats are the formats of 'lab galera --prove'.
var labProveFormats = []string{"text", "json"}

// labFlags are the flags of 'dbhost lab galera'.
type labFlags struct {
	nodes, segments int
	arbitrator      bool
	weights         []string
	options         []string
	suspect         time.Duration
	name            string
	status, stop    bool
	prove           bool
	html, format    string
}

func (a *app) labGaleraCmd() *cobra.Command {
	c := newCmd("galera [--nodes N] [--arbitrator] [--segments N] [--weight NAME=W]... [--option K=V]... | --status | --stop | --prove",
		"start a private MariaDB Galera cluster in network namespaces; show, stop or prove it")
	c.Example = `  sudo dbhost lab galera --nodes 3 --arbitrator
  sudo dbhost lab galera --segments 2 --weight node1=2
  sudo dbhost lab galera --option wsrep_slave_threads=4 --name try
  sudo dbhost lab galera --status
  sudo dbhost lab galera --prove --html proof.html
  sudo dbhost lab galera --stop`
	setExits(c, map[int]string{
		ExitOK:       "The lab runs (start), was shown (--status), is gone (--stop), or every prediction held (--prove).",
		ExitFindings: "--prove: a scenario did not behave as predicted (the table shows which, and what each node reported).",
		ExitError:    "It could not run: not root, bad flags, a package missing, the lab did not start or recover (what it made was removed).",
	})
	c.Long = `Start a private MariaDB Galera cluster on this host and leave it running: data nodes
node1..nodeN (and garbd with --arbitrator), each in a network namespace of its own
(dbhost-lab-NAME-node1, ...) joined by a bridge in dbhost-lab-NAME-hub, on a private
10.238.X.0/24 that no interface of the host uses. Files live under /var/lib/dbhost/lab/NAME;
a journal beside it (NAME.journal) records everything made, so --stop removes it all, also
after a crash. Clients connect over each node's socket as root.

--status shows each member and its view of the cluster; --stop removes the lab; --prove starts
a lab, kills, shuts down and partitions members as the quorum model predicts, and compares.

Needs root and the packages mariadb-server, galera-4, galera-arbitrator-4 (for
--arbitrator), iproute2, iptables, rsync. See docs/galera-lab.md.`
	var f labFlags
	fs := c.Flags()
	fs.IntVar(&f.nodes, "nodes", 3, fmt.Sprintf("data nodes (2..%d)", galeralab.MaxNodes))
	fs.BoolVar(&f.arbitrator, "arbitrator", false, "add the arbitrator garbd (a vote, no data)")
	fs.IntVar(&f.segments, "segments", 1, "gmcast.segment groups (1..3): data nodes round-robin, garbd in the last")
	fs.StringArrayVar(&f.weights, "weight", nil, "pc.weight of a member, NAME=W (repeatable; default 1)")
	fs.StringArrayVar(&f.options, "option", nil, "a mariadbd option NAME=VALUE for every data node (repeatable; wsrep_provider_options=... adds to the lab's own)")
	fs.DurationVar(&f.suspect, "suspect-timeout", galeralab.DefaultSuspectTimeout, "evs.suspect_timeout (the other EVS timeouts follow it)")
	fs.StringVar(&f.name, "name", galeralab.DefaultName, "the lab's name (several labs may run at once)")
	fs.BoolVar(&f.status, "status", false, "show the lab's members and each data node's view of the cluster")
	fs.BoolVar(&f.stop, "stop", false, "stop the lab and remove everything it made")
	fs.BoolVar(&f.prove, "prove", false, "run the failure scenarios the quorum model predicts and compare")
	fs.StringVar(&f.html, "html", "", "with --prove: also write the report as HTML to this file")
	fs.StringVar(&f.format, "format", "text", "with --prove: output format, text or json")
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		return a.runLabGalera(ctx, f)
	})
	return c
}

func (a *app) labFail(format string, args ...any) int {
	fmt.Fprintf(a.env.Stderr, "dbhost lab galera: "+format+"\n", args...)
	return ExitError
}

// config checks the flags and makes the lab's configuration of them.
func (f labFlags) config(log io.Writer) (galeralab.Config, error) {
	cfg := galeralab.Config{Name: f.name, Nodes: f.nodes, Arbitrator: f.arbitrator, Segments: f.segments,
		Options: f.options, SuspectTimeout: f.suspect, Log: log}
	for _, w := range f.weights {
		name, v, ok := strings.Cut(w, "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || err != nil {
			return cfg, fmt.Errorf("--weight %q: want NAME=W, e.g. node1=2", w)
		}
		if cfg.Weights == nil {
			cfg.Weights = map[string]int{}
		}
		cfg.Weights[strings.TrimSpace(name)] = n
	}
	return cfg, galeralab.Check(cfg)
}

func (a *app) runLabGalera(ctx context.Context, f labFlags) int {
	modes := 0
	for _, m := range []bool{f.status, f.stop, f.prove} {
		if m {
			modes++
		}
	}
	switch {
	case modes > 1:
		return a.labFail("--status, --stop and --prove go alone")
	case (f.html != "" || f.format != "text") && !f.prove:
		return a.labFail("--html and --format go with --prove")
	case !slices.Contains(labProveFormats, f.format):
		return a.labFail("--format %q: %s", f.format, strings.Join(labProveFormats, " or "))
	case geteuid() != 0:
		return a.labFail("the lab makes network namespaces and runs servers as the mysql user: run it as root (sudo dbhost lab galera)")
	}
	switch {
	case f.status:
		return a.labStatus(ctx, f.name)
	case f.stop:
		return a.labStop(ctx, f.name)
	}
	cfg, err := f.config(a.env.Stderr)
	if err != nil {
		return a.labFail("%v", err)
	}
	// Start replaces a lab of the same name (a crashed run's); one that
	// runs is the user's: refused.
	if l, err := galeralab.Open(galeralab.DefaultRoot, f.name); err == nil && l.Up() {
		return a.labFail("a lab named %s runs already: --status shows it, --stop removes it, --name starts another", f.name)
	}
	if f.prove {
		return runGaleraProve(ctx, a, cfg, f.html, f.format)
	}
	l, err := galeralab.Start(ctx, cfg)
	if err != nil {
		return a.labFail("%v", err)
	}
	writeLabStarted(a.env.Stdout, l)
	return ExitOK
}

func writeLabStarted(w io.Writer, l *galeralab.Lab) {
	start, _ := l.Times()
	nodes := l.Nodes()
	data, arb := 0, ""
	for _, n := range nodes {
		if n.Arbitrator {
			arb = " + garbd"
		} else {
			data++
		}
	}
	fmt.Fprintf(w, "lab %s: %d data nodes%s Synced in one Primary component, started in %v\n", l.Name(), data, arb, start.Round(100*time.Millisecond))
	for _, n := range nodes {
		how := "mariadb --socket=" + n.Socket
		if n.Arbitrator {
			how = "arbitrator (votes, holds no data)"
		}
		addr := n.Addr
		if n.Port != 0 {
			addr = fmt.Sprintf("%s:%d", n.Addr, n.Port)
		}
		fmt.Fprintf(w, "  %-6s %-19s segment %d  weight %d  %s\n", n.Name, addr, n.Segment, n.Weight, how)
	}
	name := ""
	if l.Name() != galeralab.DefaultName {
		name = " --name " + l.Name()
	}
	fmt.Fprintf(w, "connect: sudo mariadb --socket=%s\n", nodes[0].Socket)
	fmt.Fprintf(w, "status:  sudo dbhost lab galera --status%s\n", name)
	fmt.Fprintf(w, "stop:    sudo dbhost lab galera --stop%s\n", name)
}

func (a *app) labStatus(ctx context.Context, name string) int {
	l, err := galeralab.Open(galeralab.DefaultRoot, name)
	if err != nil {
		return a.labFail("%v", err)
	}
	w := a.env.Stdout
	start, _ := l.Times()
	fmt.Fprintf(w, "lab %s in %s (started in %v, suspect timeout %v, %d MiB resident)\n", name, l.Dir(),
		start.Round(100*time.Millisecond), l.SuspectTimeout(), l.RSS()>>20)
	for _, n := range l.Nodes() {
		state := "down"
		if l.Running(n.Name) {
			state = "running"
		}
		fmt.Fprintf(w, "  %-6s %-13s segment %d  weight %d  %s", n.Name, n.Addr, n.Segment, n.Weight, state)
		if n.Arbitrator || state == "down" {
			fmt.Fprintln(w)
			continue
		}
		st, err := l.Status(ctx, n.Name)
		if err != nil {
			fmt.Fprintf(w, "  (no answer: %v)\n", err)
			continue
		}
		var members []string
		for _, m := range st.Members {
			members = append(members, m.Name)
		}
		fmt.Fprintf(w, "  %s %s, size %d, weight %d", st.ClusterStatus, st.LocalState, st.ClusterSize, st.ClusterWeight)
		if len(members) > 0 {
			fmt.Fprintf(w, ": %s", strings.Join(members, " "))
		}
		fmt.Fprintln(w)
	}
	return ExitOK
}

func (a *app) labStop(ctx context.Context, name string) int {
	l, err := galeralab.Open(galeralab.DefaultRoot, name)
	switch {
	case errors.Is(err, galeralab.ErrNoLab):
		fmt.Fprintf(a.env.Stderr, "dbhost lab galera: nothing to stop: %v\n", err)
		return ExitOK
	case err != nil:
		// A lab whose state cannot be read: its journal alone removes it.
		fmt.Fprintf(a.env.Stderr, "dbhost lab galera: %v; removing it from its journal\n", err)
		if err := galeralab.Remove(galeralab.DefaultRoot, name); err != nil {
			return a.labFail("%v", err)
		}
	default:
		if err := l.Stop(ctx); err != nil {
			return a.labFail("%v", err)
		}
	}
	fmt.Fprintf(a.env.Stdout, "lab %s stopped: its processes, namespaces and files are gone\n", name)
	return ExitOK
}
