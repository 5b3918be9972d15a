package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dbhost/dbhost/internal/galeralab"
	"github.com/dbhost/dbhost/internal/galeraprove"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// labStopTimeout bounds the lab's removal after a proof, also after
// Ctrl-C: it shuts nodes down cleanly and kills what does not stop.
const labStopTimeout = 2 * time.Minute

// runGaleraProve is 'dbhost lab galera --prove': it starts a lab of its
// own from cfg, runs the proof on it, stops it, and prints the report.
// Exit 0: every scenario as predicted; 1: a mismatch; 2: it could not run.
//
// It never borrows a running lab: the proof kills and cuts off members,
// and a lab someone started to try a change is theirs. A lab of that name
// still running is refused with how to stop it or pick another name.
func runGaleraProve(ctx context.Context, a *app, cfg galeralab.Config, html, format string) int {
	env := a.env
	fail := func(err error) int {
		fmt.Fprintln(env.Stderr, "dbhost lab galera --prove:", err)
		return ExitError
	}
	switch format {
	case "", "text", "json":
	default:
		return fail(fmt.Errorf("--format %q: want text or json", format))
	}
	if html != "" {
		// Fail now, not after minutes of proof, when the report cannot
		// be written where asked.
		if st, err := os.Stat(filepath.Dir(html)); err != nil || !st.IsDir() {
			return fail(namingPath(html, errors.New("its directory does not exist")))
		}
	}
	if cfg.Name == "" {
		cfg.Name = "galera"
	}
	if old, err := galeralab.Open(cfg.Root, cfg.Name); err == nil && old.Up() {
		return fail(fmt.Errorf("a lab named %s is running; the proof kills its members: stop it ('dbhost lab galera --stop --name %s') or prove on another name (--name)",
			termsafe.Line(cfg.Name), termsafe.Line(cfg.Name)))
	}
	if cfg.Log == nil {
		cfg.Log = env.Stderr
	}
	lab, err := galeralab.Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return fail(fmt.Errorf("interrupted while starting the lab: %w", err))
		}
		return fail(fmt.Errorf("start the lab: %w", err))
	}
	rep, runErr := galeraprove.Run(ctx, lab, galeraprove.Options{Log: env.Stderr})
	// The lab goes also after Ctrl-C: its removal must not see the
	// cancelled context (a second Ctrl-C is caught by the same handler
	// and does not stop it half-way; its journal covers a kill -9).
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), labStopTimeout)
	stopErr := lab.Stop(stopCtx)
	cancel()
	start, stop := lab.Times()
	if rep != nil {
		rep.Lab.Name = cfg.Name
		rep.Lab.Start, rep.Lab.Stop = galeraprove.Millis(start), galeraprove.Millis(stop)
	}
	code := ExitOK
	if rep != nil && !rep.AllMatched() {
		code = ExitFindings
	}
	if rep != nil {
		var werr error
		if format == "json" {
			werr = writeJSON(env.Stdout, rep)
		} else {
			werr = rep.WriteText(env.Stdout)
		}
		if werr != nil {
			fmt.Fprintln(env.Stderr, "dbhost lab galera --prove:", werr)
			code = ExitError
		}
		if html != "" {
			if err := writeFileAtomic(html, 0o644, func(w io.Writer) error { return rep.WriteHTML(w) }); err != nil {
				fmt.Fprintln(env.Stderr, "dbhost lab galera --prove:", namingPath(html, err))
				code = ExitError
			} else {
				fmt.Fprintf(env.Stderr, "report: %s\n", html)
			}
		}
	}
	fmt.Fprintf(env.Stderr, "lab %s: started in %s, stopped in %s\n", cfg.Name, galeraprove.Millis(start), galeraprove.Millis(stop))
	switch {
	case runErr != nil && ctx.Err() != nil:
		fmt.Fprintln(env.Stderr, "dbhost lab galera --prove: interrupted; the lab was removed")
		code = ExitError
	case runErr != nil:
		fmt.Fprintln(env.Stderr, "dbhost lab galera --prove:", runErr)
		code = ExitError
	}
	if stopErr != nil {
		fmt.Fprintf(env.Stderr, "dbhost lab galera --prove: stop the lab: %v ('dbhost lab galera --stop --name %s' retries)\n", stopErr, cfg.Name)
		code = ExitError
	}
	return code
}
