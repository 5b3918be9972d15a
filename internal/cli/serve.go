package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/exporter"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/metrics"
)

// collectorFlags are --collector.NAME and --no-collector.NAME for every
// registered collector, generated from the registry as node_exporter does.
type collectorFlags map[string]*[2]bool

func registerCollectorFlags(fs *pflag.FlagSet) collectorFlags {
	cf := collectorFlags{}
	for _, c := range metrics.Collectors() {
		v := &[2]bool{}
		cf[c.Name] = v
		def := "off"
		if c.DefaultOn {
			def = "on"
		}
		fs.BoolVar(&v[0], "collector."+c.Name, false, fmt.Sprintf("enable the %s collector (default %s)", c.Name, def))
		fs.BoolVar(&v[1], "no-collector."+c.Name, false, fmt.Sprintf("disable the %s collector", c.Name))
	}
	return cf
}

// toggles are the collectors turned on or off on the command line.
func (cf collectorFlags) toggles() (map[string]bool, error) {
	t := map[string]bool{}
	for name, v := range cf {
		switch {
		case v[0] && v[1]:
			return nil, fmt.Errorf("--collector.%s and --no-collector.%s contradict each other", name, name)
		case v[0]:
			t[name] = true
		case v[1]:
			t[name] = false
		}
	}
	return t, nil
}

func (a *app) serveCmd() *cobra.Command {
	c := newCmd("serve", "Prometheus exporter: audit in the background, serve the last result")
	fs := c.Flags()
	var addrs listFlag
	fs.Var(&addrs, "web.listen-address", "address to listen on, repeatable (default :9437)")
	webConfig := fs.String("web.config.file", "", "TLS and basic authentication configuration (exporter-toolkit format)")
	systemdSocket := fs.Bool("web.systemd-socket", false, "use the listening sockets systemd passes (socket activation) instead of --web.listen-address")
	interval := fs.Duration("interval", 60*time.Second, "time between two audits (each is spread by up to 10% either way)")
	auditTimeout := fs.Duration("audit-timeout", 0, "abandon an audit that takes longer (default: the interval)")
	dbTimeout := fs.Duration("db-timeout", 3*time.Second, "bound on each database read; a database slower than this is judged unknown")
	root := fs.String("root", "/", "root of the live filesystem to read (for chroots and tests)")
	noConnect := fs.Bool("no-connect", false, "do not connect to databases; read settings from files")
	var trust listFlag
	trustServerFlag(fs, &trust)
	var shares budgetFlag
	shares.register(fs)
	logLevel := fs.String("log.level", "info", "log level: debug, info, warn, error")
	var only, skip listFlag
	fs.Var(&only, "only", "run only these checks (IDs or domain prefixes, comma-separated)")
	fs.Var(&skip, "skip", "skip these checks (IDs or domain prefixes)")
	cf := registerCollectorFlags(fs)
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		fail := func(err error) int {
			fmt.Fprintln(env.Stderr, "dbhost serve:", err)
			return ExitError
		}
		toggles, err := cf.toggles()
		if err != nil {
			return fail(err)
		}
		set, err := metrics.NewSet(toggles)
		if err != nil {
			return fail(err)
		}
		if err := validSelection(only, skip); err != nil {
			return fail(err)
		}
		var level slog.Level
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return fail(fmt.Errorf("--log.level: %w", err))
		}
		if *interval < time.Second {
			return fail(fmt.Errorf("--interval %v is too short (at least 1s)", *interval))
		}
		if *webConfig != "" {
			// A bad file is a start-up error, not a server that refuses
			// every scrape.
			if err := web.Validate(*webConfig); err != nil {
				return fail(fmt.Errorf("--web.config.file: %w", err))
			}
		}
		if len(addrs) == 0 {
			addrs = listFlag{":9437"}
		}
		logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
		sel := check.Selector{Only: only, Skip: skip}
		opts := gatherOptions(engine.Options{NoConnect: *noConnect, Timeout: *dbTimeout, TrustServers: trustedDirs(trust)})
		audit := func(ctx context.Context) (*metrics.Input, error) {
			h, err := host.Open(*root)
			if err != nil {
				return nil, err
			}
			defer h.Close()
			f := facts.Gather(ctx, h, opts)
			// Shares that name no instance (a stopped server) are
			// reported by mem.db_budget, not an audit error.
			if err := shares.apply(f, *root, true, false); err != nil {
				f.Note(err.Error())
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("audit cut short: %w", err)
			}
			return &metrics.Input{Facts: f, Findings: check.Run(f, sel)}, nil
		}
		ex, err := exporter.New(exporter.Config{
			Set: set, Audit: audit, Interval: *interval, Jitter: 0.1, Timeout: *auditTimeout,
			Version: a.env.Version, Logger: logger,
		})
		if err != nil {
			return fail(err)
		}
		if os.Geteuid() != 0 {
			logger.Warn("not running as root: other users' processes and files are unreadable and their checks will be unknown")
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go ex.Run(ctx)
		// Failed handshakes and plain HTTP on a TLS port are the network's
		// noise, not the exporter's: debug level.
		srv := &http.Server{Handler: ex.Handler(), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
		go func() {
			<-ctx.Done()
			shut, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			srv.Shutdown(shut)
		}()
		logger.Info("dbhost serve", "version", a.env.Version, "listen", strings.Join(addrs, ","), "interval", *interval, "collectors", strings.Join(set.Names(), ","))
		addrList := []string(addrs)
		err = web.ListenAndServe(srv, &web.FlagConfig{WebListenAddresses: &addrList, WebSystemdSocket: systemdSocket, WebConfigFile: webConfig}, logger)
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fail(err)
		}
		return ExitOK
	})
	return c
}
