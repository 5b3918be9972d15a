package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/safefile"
)

// Variables that are not dynamic are set by an option file dbhost adds and
// a restart. That is supported when the server reads a !includedir
// directory (Debian's /etc/mysql/mariadb.conf.d, a --defaults-file that
// includes one) and the variable is not given on its command line, which
// would win over any file. dbhost never edits an existing option file.

var mysqlServerComms = []string{"mariadbd", "mysqld"}

// myOptionFile finds where the option file for the static variables goes,
// and checks that they can take effect from there.
func (a *Applier) myOptionFile(ctx context.Context, srv myServer, static []*item) (string, error) {
	names := make([]string, len(static))
	for i, it := range static {
		names[i] = it.Name
	}
	what := strings.Join(names, ", ") + ": not dynamic, so set by an option file and a restart"
	if a.t.Restart == nil {
		return "", fmt.Errorf("%s, and this server may not be restarted", what)
	}
	pid := change.ServerPID(a.h, srv.pidFile, srv.dataDir, mysqlServerComms...)
	if pid == 0 {
		return "", fmt.Errorf("%s, and no server process of %s was found here (pid file %s)", what, srv.dataDir, srv.pidFile)
	}
	in, err := mysqlInstance(ctx, a.h, pid)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if in.IncludeDir == "" {
		return "", fmt.Errorf("%s, and the server reads no !includedir directory (started with --no-defaults, or no option file includes one): dbhost does not edit existing option files", what)
	}
	var errs []error
	for _, it := range static {
		name := it.mysql.name
		fromCmdline := it.mysql.origin == "COMMAND-LINE"
		if in.MySQL != nil {
			if s, ok := in.MySQL.Configured[name]; ok && s.Source == "cmdline" {
				fromCmdline = true
			}
		}
		if fromCmdline {
			errs = append(errs, fmt.Errorf("%s: set on the server's command line, which overrides option files", it.Name))
		}
		if strings.ContainsAny(it.Value, "\"'\\#") {
			errs = append(errs, fmt.Errorf("%s: %q: quotes, backslashes and # are not written to option files", it.Name, it.Value))
		}
	}
	return filepath.Join(in.IncludeDir, OptionFileName), errors.Join(errs...)
}

// mysqlInstance describes one server process the way discovery does.
func mysqlInstance(ctx context.Context, h *host.Host, pid int) (*engine.Instance, error) {
	st, err := h.ProcStat(pid)
	if err != nil {
		return nil, err
	}
	status, err := h.Status(pid)
	if err != nil {
		return nil, err
	}
	p := engine.Process{PID: pid, PPID: st.PPID, Comm: st.Comm, UID: int(status.UIDs[1]), GID: int(status.GIDs[1])}
	insts, notes := engine.Discover(ctx, h, engine.TableFrom(h, []engine.Process{p}), engine.Options{NoConnect: true})
	for _, in := range insts {
		if in.PID == pid && in.Engine == engine.MySQL {
			return in, nil
		}
	}
	return nil, fmt.Errorf("the server process %d could not be described: %s", pid, strings.Join(notes, "; "))
}

// applyMySQLFile writes the static variables into dbhost's option file
// through the change layer (kind file, allowed as a file of the server's
// included directory), after journaling the restart that makes the
// server read its options again once the file is put back.
func (a *Applier) applyMySQLFile(ctx context.Context, items []*item) error {
	var static []*item
	for _, it := range items {
		if it.mysql.readOnly {
			static = append(static, it)
		}
	}
	if len(static) == 0 {
		return nil
	}
	db, srv, err := a.myConnect(ctx)
	if err != nil {
		return err
	}
	db.Close()
	path, err := a.myOptionFile(ctx, srv, static)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := a.c.Config().TrustedDir(dir); err != nil {
		return err
	}
	content := optionFile(static)
	f := change.FileWrite{Root: "/", Path: path, Content: content, Mode: 0o644,
		NewSum: safefile.Sum([]byte(content)), IncludeDirs: []string{dir}}
	switch old, err := a.h.ReadFile(path); {
	case err == nil:
		f.Exists, f.Sum = true, safefile.Sum(old)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading %s: %w", path, err)
	}
	r, _ := a.restarter()
	if err := a.c.RestartOnUndo(r); err != nil {
		return fmt.Errorf("journaling the restart: %w", err)
	}
	if err := a.c.File(f); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// optionFile is dbhost's option file setting the static variables.
func optionFile(static []*item) string {
	var b strings.Builder
	b.WriteString("# Written by dbhost experiment for variables that need a restart;\n# removed when the experiment ends (or by `dbhost experiment recover`).\n[mysqld]\n")
	for _, it := range static {
		fmt.Fprintf(&b, "%s = %s\n", it.mysql.name, it.Value)
	}
	return b.String()
}
