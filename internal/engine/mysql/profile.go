package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/conftext"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

func (detector) Name() string              { return "mysql" }
func (detector) Aliases() []string         { return []string{"mariadb", "percona"} }
func (detector) ServiceAccounts() []string { return []string{"mysql", "mariadb"} }
func (detector) RootRisk() string {
	return "mysqld reads and writes files with LOAD DATA and SELECT ... INTO OUTFILE with root's rights."
}

func (detector) Units(*engine.Instance) []string {
	return []string{"mariadb.service", "mysql.service", "mysqld.service"}
}

// UnitStarts: the packaged unit starts mysqld with the default option
// files; a server started with its own (or none) is someone else's.
func (detector) UnitStarts(in *engine.Instance, _ string, _ func(string) bool) (bool, bool) {
	for _, a := range in.Cmdline {
		if strings.HasPrefix(a, "--no-defaults") || strings.HasPrefix(a, "--defaults-file") {
			return false, true
		}
	}
	return true, true
}

func (detector) BindAdvice(in *engine.Instance) string {
	s := "Set bind-address = <private address> in the [mysqld] section and restart the server."
	if in.MySQL != nil && in.MySQL.Galera {
		s += " For Galera also set wsrep_node_address and wsrep_provider_options=\"gmcast.listen_addr=tcp://<private address>:4567\", and check the SST port 4444, which some SST methods open on 0.0.0.0 regardless."
	}
	return s
}

// Backlog is back_log, which the server sizes from max_connections when
// it is not set.
func (detector) Backlog(in *engine.Instance) engine.Need {
	if v, ok := in.Uint("back_log", 0); ok {
		return engine.Need{N: v, Why: fmt.Sprintf("back_log is %d", v), Inputs: []engine.Input{in.UintInput("back_log", true, v)}}
	}
	mc, ok := in.Uint("max_connections", 151)
	b := min(50+mc/5, 900)
	return engine.Need{N: b, Why: fmt.Sprintf("back_log is not set: the server sizes it as 50 + max_connections / 5 = %d", b), Inputs: []engine.Input{in.UintInput("max_connections", ok, mc)}}
}

// Descriptors: mysqld asks at start for the largest of 10 + max_connections
// + 2 x table_open_cache, 5 x max_connections and open_files_limit as set
// (MySQL's documented formula; MariaDB's is the same up to a few reserved
// descriptors and counts extra_max_connections too). It raises its own
// soft limit to that, at most to the hard limit, and when it gets less it
// lowers table_open_cache and max_connections and logs a warning.
func (detector) Descriptors(in *engine.Instance) engine.Need {
	// Both are lowered by the server at start to fit a small limit:
	// the configured value is what it asks for.
	mc, connTerm, ev := in.UintNeed("max_connections", 151)
	xmc, ok3 := in.Uint("extra_max_connections", 1)
	tocDef := uint64(2000)
	if in.Flavor == FlavorMySQL && in.Major() >= 8 {
		tocDef = 4000 // MySQL 8.0 doubled the default
	}
	toc, tocTerm, tev := in.UintNeed("table_open_cache", tocDef)
	ev = append(ev, tev...)
	conns := mc
	if in.Flavor == FlavorMariaDB {
		conns += xmc
		connTerm += " + " + engine.UintTerm("extra_max_connections", ok3, xmc)
		ev = append(ev, in.UintInput("extra_max_connections", ok3, xmc))
	}
	a, b := 10+conns+2*toc, 5*conns
	need := max(a, b)
	why := fmt.Sprintf("%s asks for max(10 + %s + 2 x %s = %d, 5 x connections = %d", hostFlavor(in), connTerm, tocTerm, a, b)
	// The server's own report of open_files_limit is what it obtained,
	// not what it asked for: only a configured value adds to the need.
	if ofl, ok := in.Uint("open_files_limit", 0); ok && ofl > 0 && in.Settings[engine.NormalizeName("open_files_limit")].Source != "live" {
		need = max(need, ofl)
		why += fmt.Sprintf(", open_files_limit %d", ofl)
		ev = append(ev, in.UintInput("open_files_limit", true, ofl))
	}
	why += fmt.Sprintf(") = %d descriptors", need)
	return engine.Need{N: need, Why: why, Inputs: ev,
		Short: hostFlavor(in) + " raises its soft limit itself only up to the hard limit and otherwise lowers table_open_cache and max_connections (it logs a warning at start), so the hard limit is what counts.",
		Live:  "it computed open_files_limit at start, but after the running server's limit is raised, SET GLOBAL table_open_cache and max_connections back to the configured values uses it without a restart"}
}

func hostFlavor(in *engine.Instance) string {
	if in.Flavor == "" {
		return FlavorMySQL
	}
	return in.Flavor
}

func (detector) Tasks(in *engine.Instance) engine.Need {
	if strings.Contains(strings.ToLower(in.SettingValue("thread_handling")), "pool") {
		return engine.Need{} // a thread pool does not need a thread per connection
	}
	mc, ok := in.Uint("max_connections", 151)
	n := mc + 64
	return engine.Need{N: n, Why: fmt.Sprintf("one thread per connection plus about 64 background threads: %d", n), Inputs: []engine.Input{in.UintInput("max_connections", ok, mc)}}
}

func (detector) ReadAhead(in *engine.Instance) engine.ReadAhead {
	if fm := strings.ToUpper(in.SettingValue("innodb_flush_method")); strings.Contains(fm, "O_DIRECT") {
		return engine.ReadAhead{Why: "InnoDB uses innodb_flush_method=" + fm + " and reads its data files past the page cache, where read-ahead does not apply"}
	}
	return engine.ReadAhead{KB: engine.DefaultReadAheadKB, Why: "InnoDB reads 16 KB pages at random through the page cache (innodb_flush_method is not O_DIRECT) and does its own read-ahead; kernel read-ahead above the 128 KB default wastes cache and bandwidth"}
}

func (detector) PageSize(in *engine.Instance) (int64, string) {
	if v, ok := in.Setting("innodb_page_size"); ok {
		if n, ok := parsePageSize(v.Value); ok {
			return n, "innodb_page_size"
		}
	}
	return 16384, "InnoDB's 16 KB page"
}

// MainCache proposes 60% of the limit for the buffer pool.
func (detector) MainCache(in *engine.Instance, limit uint64) engine.Cache {
	b, ok := Bytes(in, "innodb_buffer_pool_size")
	return engine.Cache{Bytes: b, Known: ok, Key: "innodb_buffer_pool_size", Proposal: fmt.Sprintf("%dM", limit*6/10>>20)}
}

func (detector) THP(*engine.Instance, string) engine.THPAdvice { return engine.THPOffAdvice }

const QuestionsSource = "SHOW GLOBAL STATUS: Questions (statements sent by clients)"

// OpenQueries counts Questions.
func (detector) OpenQueries(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (*engine.QueryCounter, error) {
	db, via, err := Open(ctx, h, in, opts)
	if err != nil {
		return nil, err
	}
	read := func(ctx context.Context) (uint64, error) {
		ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
		var name string
		var v uint64
		err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &v)
		return v, err
	}
	if _, err := read(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("reading Questions: %w", err)
	}
	q := &engine.QueryCounter{Read: read, Close: func() { db.Close() }, Source: QuestionsSource, Via: via}
	// The thread serving dbhost, where performance_schema can say which
	// OS thread it is (MySQL 8; MariaDB with performance_schema on).
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var tid sql.NullInt64
	if db.QueryRowContext(cctx, "SELECT THREAD_OS_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()").Scan(&tid) == nil && tid.Valid {
		q.Own = append(q.Own, int(tid.Int64))
	}
	return q, nil
}

// parsePageSize reads innodb_page_size: bytes, or "16K".
func parsePageSize(v string) (int64, bool) {
	s := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	if strings.HasSuffix(s, "K") {
		s, mult = strings.TrimSuffix(s, "K"), 1024
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return n * mult, true
	}
	return 0, false
}

// ConfigSnippet: a [mysqld] file in an included directory (!includedir),
// else next to the main option file with the !include line to add last.
func (detector) ConfigSnippet(s engine.Snippet) (string, string) {
	var b strings.Builder
	dir := s.Dir
	p := path.Join(dir, s.Name+".cnf")
	if dir == "" {
		// No directory is included: the main option file must include
		// the snippet (last, so that it wins).
		dir = "/etc/mysql"
		if s.File != "" {
			dir = path.Dir(s.File)
		}
		p = path.Join(dir, s.Name+".cnf")
		main := s.File
		if main == "" {
			main = "the server's option file"
		}
		fmt.Fprintf(&b, "# Add as the last line of %s: !include %s\n", conftext.Comment(main), conftext.Comment(p))
	}
	b.WriteString("# Read at server start (restart to apply settings that are not dynamic).\n\n[mysqld]\n")
	s.WriteEntries(&b, "", optionLine)
	return p, b.String()
}

func (detector) DefaultPort() int { return 3306 }
