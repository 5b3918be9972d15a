package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	yamlv2 "go.yaml.in/yaml/v2"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/exporter"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/metrics"
	"github.com/dbhost/dbhost/internal/waiver"
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

// serveFlags are the flags of 'dbhost serve'.
type serveFlags struct {
	addrs                             listFlag
	webConfig                         string
	exposeSecurity                    bool
	systemdSocket                     bool
	interval, auditTimeout, dbTimeout time.Duration
	root                              string
	noConnect                         bool
	trust                             listFlag
	shares                            budgetFlag
	logLevel                          string
	only, skip                        listFlag
	collectors                        collectorFlags
	// waivers is read again every audit (waiverflags.go).
	waivers waiverFlags
	waived  waiver.Loader
	// checkConfig judges the flags and files instead of serving.
	checkConfig bool
}

func (sf *serveFlags) register(fs *pflag.FlagSet) {
	fs.Var(&sf.addrs, "web.listen-address", "address to listen on, repeatable (default :9437)")
	fs.StringVar(&sf.webConfig, "web.config.file", "", "TLS and basic authentication configuration (exporter-toolkit format)")
	fs.BoolVar(&sf.exposeSecurity, "web.expose-security-findings", false, "serve the security checks' findings even on a listener beyond loopback without TLS or basic auth (default: withheld there)")
	fs.BoolVar(&sf.systemdSocket, "web.systemd-socket", false, "use the listening sockets systemd passes (socket activation) instead of --web.listen-address")
	fs.DurationVar(&sf.interval, "interval", 60*time.Second, "time between two audits (each is spread by up to 10% either way)")
	fs.DurationVar(&sf.auditTimeout, "audit-timeout", 0, "abandon an audit that takes longer (default: the interval)")
	fs.DurationVar(&sf.dbTimeout, "db-timeout", 3*time.Second, "bound on each database read; a database slower than this is judged unknown")
	fs.StringVar(&sf.root, "root", "/", "root of the live filesystem to read (for chroots and tests)")
	fs.BoolVar(&sf.noConnect, "no-connect", false, "do not connect to databases; read settings from files")
	trustServerFlag(fs, &sf.trust)
	sf.shares.register(fs)
	fs.StringVar(&sf.logLevel, "log.level", "info", "log level: debug, info, warn, error")
	fs.Var(&sf.only, "only", "run only these checks (IDs or domain prefixes, comma-separated)")
	fs.Var(&sf.skip, "skip", "skip these checks (IDs or domain prefixes)")
	sf.collectors = registerCollectorFlags(fs)
	sf.waivers.register(fs)
	fs.BoolVar(&sf.checkConfig, "check-config", false, "check the flags, --web.config.file, the waiver file and the budget as serve reads them at start, say what they set, and exit without listening or auditing")
}

// check refuses what would fail later, at start-up: contradicting
// collectors, unknown checks or log level, too short an interval, a bad
// web configuration. It returns the collectors and the log level.
func (sf *serveFlags) check() (*metrics.Set, slog.Level, error) {
	var level slog.Level
	toggles, err := sf.collectors.toggles()
	if err != nil {
		return nil, level, err
	}
	set, err := metrics.NewSet(toggles)
	if err != nil {
		return nil, level, err
	}
	if err := validSelection(sf.only, sf.skip); err != nil {
		return nil, level, err
	}
	if err := level.UnmarshalText([]byte(sf.logLevel)); err != nil {
		return nil, level, fmt.Errorf("--log.level: %w", err)
	}
	if sf.interval < time.Second {
		return nil, level, fmt.Errorf("--interval %v is too short (at least 1s)", sf.interval)
	}
	if sf.webConfig != "" {
		// A bad file is a start-up error, not a server that refuses
		// every scrape.
		if err := web.Validate(sf.webConfig); err != nil {
			return nil, level, fmt.Errorf("--web.config.file: %w", err)
		}
	}
	return set, level, nil
}

// exposure says why the security checks' findings must be withheld from
// /metrics ("" when they may be served): anyone who reaches an open port
// would read where the host is weak. They are served when every listener
// is on loopback, when --web.config.file sets TLS or basic authentication
// (web.Validate has already checked the file), or when the user asks.
func (sf *serveFlags) exposure() string {
	if sf.exposeSecurity {
		return ""
	}
	if sf.webConfig != "" {
		if protected, err := webConfigProtects(sf.webConfig); err == nil && protected {
			return ""
		}
	}
	if sf.systemdSocket {
		return "listening on systemd's sockets (addresses not known to dbhost) without TLS or basic auth"
	}
	for _, a := range sf.addrs {
		if !loopback(a) {
			return "listening on " + a + ", beyond loopback, without TLS or basic auth"
		}
	}
	return ""
}

// webConfigProtects reports whether an exporter-toolkit web configuration
// sets TLS (a certificate) or basic authentication users. It is read into
// the toolkit's own type, with the toolkit's YAML parser and strictness, so
// what is judged here is what the listener will serve.
func webConfigProtects(file string) (bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	var c web.Config
	if err := yamlv2.UnmarshalStrict(b, &c); err != nil {
		return false, err
	}
	return c.TLSConfig.TLSCert != "" || c.TLSConfig.TLSCertPath != "" || len(c.Users) > 0, nil
}

// loopback reports whether a listen address (host:port) is on loopback
// only: 127.0.0.0/8, ::1 or localhost. An empty host is every interface;
// another name could resolve anywhere.
func loopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// audit is one background audit of the host: the exporter's Audit.
func (sf *serveFlags) audit(logger *slog.Logger) func(ctx context.Context) (*metrics.Input, error) {
	sel := check.Selector{Only: sf.only, Skip: sf.skip}
	opts := gatherOptions(engine.Options{NoConnect: sf.noConnect, Timeout: sf.dbTimeout, TrustServers: trustedDirs(sf.trust)})
	return func(ctx context.Context) (*metrics.Input, error) {
		h, err := host.Open(sf.root)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		f := facts.Gather(ctx, h, opts)
		// Shares that name no instance (a stopped server) are
		// reported by mem.db_budget, not an audit error.
		if err := sf.shares.apply(f, sf.root, true, false); err != nil {
			f.Note(err.Error())
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("audit cut short: %w", err)
		}
		in := &metrics.Input{Facts: f, Findings: check.Run(f, sel)}
		in.Waivers = sf.applyWaivers(h, in.Findings, sel, f, logger)
		return in, nil
	}
}

// applyWaivers reads the waiver file again and marks the findings it
// waives: a changed file applies without a restart; one that does not
// load keeps the last that did, and says so once in the log.
func (sf *serveFlags) applyWaivers(h *host.Host, fds []check.Finding, sel check.Selector, f *facts.Facts, logger *slog.Logger) *waiver.Status {
	wf, st, changed := sf.waived.Load(func() (*waiver.File, error) {
		return sf.waivers.choose(func() (*waiver.File, error) { return waiver.ReadHost(h, waiver.DefaultPath) })
	})
	switch {
	case changed && !st.Valid:
		logger.Warn("waiver file not loaded: the last one that loaded still applies", "err", st.Error)
	case changed:
		logger.Info("waiver file loaded again")
	}
	st.Outcome = wf.Apply(fds, sel, f.System.Hostname, observedAt(f))
	return &st
}

func (a *app) serveCmd() *cobra.Command {
	c := newCmd("serve", "Prometheus exporter: audit in the background, serve the last result")
	c.Example = `  sudo dbhost serve
  sudo dbhost serve --web.config.file /etc/dbhost/web.yml
  sudo dbhost serve --check-config --web.config.file /etc/dbhost/web.yml`
	setExits(c, map[int]string{ExitOK: "Stopped by SIGINT or SIGTERM; with --check-config, nothing is wrong.",
		ExitError: "It could not start: a bad flag, or the address could not be listened on; with --check-config, something is wrong (said on stderr)."})
	var sf serveFlags
	sf.register(c.Flags())
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		if sf.checkConfig {
			return sf.judge(env)
		}
		fail := func(err error) int {
			fmt.Fprintln(env.Stderr, "dbhost serve:", err)
			return ExitError
		}
		set, level, err := sf.check()
		if err != nil {
			return fail(err)
		}
		if len(sf.addrs) == 0 {
			sf.addrs = listFlag{":9437"}
		}
		logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
		cfg := exporter.Config{
			Set: set, Audit: sf.audit(logger), Interval: sf.interval, Jitter: 0.1, Timeout: sf.auditTimeout,
			Version: env.Version, Logger: logger,
		}
		why := sf.exposure()
		if why != "" {
			cfg.Withhold = metrics.SecurityCheck
		}
		ex, err := exporter.New(cfg)
		if err != nil {
			return fail(err)
		}
		if why != "" {
			logger.Warn("withholding the findings of security checks from /metrics", "why", why,
				"checks", strings.Join(metrics.SecurityChecks(), ","),
				"serve them", "listen on loopback only, or set TLS or basic auth in --web.config.file, or pass --web.expose-security-findings")
		}
		if os.Geteuid() != 0 {
			logger.Warn("not running as root: other users' processes and files are unreadable and their checks will be unknown")
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go ex.Run(ctx)
		logger.Info("dbhost serve", "version", env.Version, "listen", strings.Join(sf.addrs, ","), "interval", sf.interval, "collectors", strings.Join(set.Names(), ","))
		if err := sf.listen(ctx, ex.Handler(), logger); err != nil {
			return fail(err)
		}
		return ExitOK
	})
	return c
}

// listen serves handler on the addresses (or systemd's sockets) until ctx
// ends.
func (sf *serveFlags) listen(ctx context.Context, handler http.Handler, logger *slog.Logger) error {
	// Failed handshakes and plain HTTP on a TLS port are the network's
	// noise, not the exporter's: debug level.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		shut, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		srv.Shutdown(shut)
	}()
	addrList := []string(sf.addrs)
	err := web.ListenAndServe(srv, &web.FlagConfig{WebListenAddresses: &addrList, WebSystemdSocket: &sf.systemdSocket, WebConfigFile: &sf.webConfig}, logger)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
