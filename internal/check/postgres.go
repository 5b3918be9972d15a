package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// PostgreSQL-only judgments: the server's own configuration and catalog, not
// how the host serves it (huge pages, cost settings against the disk, limits
// live with their host domains).

func init() {
	Register(Check{
		ID:        "pg.collation_glibc",
		Title:     "PostgreSQL text indexes were built with the running C library's collation",
		Problem:   "PostgreSQL text indexes were built with another version of the C library's collation",
		Severity:  Critical,
		AppliesTo: []string{"postgres"},
		Doc: `Compares, for every database that accepts connections, the collation library
version recorded when the database was created or last refreshed (pg_database.
datcollversion, PostgreSQL 15+) with the version the running server's library
reports now (pg_database_collation_actual_version). glibc 2.28 (Debian 10, Ubuntu
18.10, RHEL 8) rewrote the sort order of almost every locale: strings with spaces,
hyphens and punctuation compare differently. A B-tree index on text built under the
old order is silently wrong under the new one: lookups miss rows that exist, unique
constraints let duplicates in, and replicas on a different glibc disagree with the
primary. The same applies to every ICU upgrade. Databases whose collation is C,
POSIX or C.UTF-8 (code-point order) and the builtin provider are immune. Needs a
live connection; before PostgreSQL 15 nothing records the version, so the check can
only say whether the cluster is exposed. Fix: REINDEX the database, then ALTER
DATABASE ... REFRESH COLLATION VERSION.`,
		Refs: []string{
			"https://wiki.postgresql.org/wiki/Locale_data_changes",
			"https://www.postgresql.org/docs/current/sql-alterdatabase.html",
			"https://www.postgresql.org/docs/current/amcheck.html",
		},
		Run: checkPGCollation,
	})
	Register(Check{
		ID:        "pg.config_errors",
		Title:     "PostgreSQL's configuration files read without errors",
		Problem:   "PostgreSQL's configuration files have errors",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `Reads postgresql.conf as the server does: include, include_if_exists and
include_dir (files ending in .conf, in byte order), relative paths from the including
file, postgresql.auto.conf last from the data directory, at most 10 levels deep. It
reports missing or unreadable includes, include loops and lines the server's grammar
rejects. Such a file was edited after the server started: the server refuses to
start with it (FATAL at the next restart), and a reload with it is rejected as a
whole ("configuration file contains errors; no changes were applied"), so the server
keeps running with settings that are no longer in any file, and new changes
(including the fixes dbhost proposes) never take effect. pg_file_settings shows the
same errors from inside the server.`,
		Refs: []string{
			"https://www.postgresql.org/docs/current/config-setting.html#CONFIG-INCLUDES",
			"https://www.postgresql.org/docs/current/view-pg-file-settings.html",
		},
		Run: checkPGConfigErrors,
	})
	Register(Check{
		ID:        "pg.settings_source",
		Title:     "dbhost reads PostgreSQL's live settings",
		Problem:   "dbhost reads PostgreSQL's settings from its files, not live",
		Severity:  Info,
		AppliesTo: []string{"postgres"},
		Doc: `Says whether dbhost could read the server's effective settings over its local
socket (pg_settings), or had to reconstruct them from postgresql.conf, its includes,
postgresql.auto.conf, the command line and compiled-in defaults. The file view misses
changes not yet applied (a setting edited but the server not restarted), values the
server derives at start (wal_buffers = -1, shared_memory_size,
shared_memory_size_in_huge_pages), and the database catalog (collation versions for
pg.collation_glibc). dbhost tries, in order: --pg, PG* variables with ~/.pgpass, then
the postgres role and the invoking user's role (peer or trust authentication). Run as
root, peer authentication for postgres fails by design; run dbhost as postgres, give
--pg, or map root to postgres in pg_ident.conf.`,
		Refs: []string{
			"https://www.postgresql.org/docs/current/view-pg-settings.html",
			"https://www.postgresql.org/docs/current/auth-peer.html",
			"https://www.postgresql.org/docs/current/libpq-pgpass.html",
		},
		Run: checkPGSettingsSource,
	})
}

// ---- pg.collation_glibc ----

// collationImmune reports collations whose order is code-point order and
// cannot change with a library upgrade (libc C, POSIX, C.UTF-8; builtin).
func collationImmune(db engine.PGDatabase) bool {
	switch db.Provider {
	case "builtin":
		return true
	case "icu": // datcollate is then only the libc fallback; ICU versions its rules
		return false
	}
	c := db.Collate
	return c == "C" || c == "POSIX" || strings.HasPrefix(c, "C.")
}

func glibcEvidence(f *facts.Facts) Evidence {
	return EvReading("glibc", f.System.Glibc)
}

func checkPGCollation(f *facts.Facts) []Result { return eachOf(f, engine.Postgres, judgeCollation) }

const glibcRisk = "glibc 2.28 changed the sort order of almost every locale; text indexes built before an upgrade across it (or copied by pg_upgrade or a physical replica from an older host) return wrong results and let duplicates past unique constraints until they are rebuilt"

func judgeCollation(f *facts.Facts, in *facts.Instance) Result {
	subject := in.Name()
	ev := []Evidence{Ev("version", in.Version, in.VersionSource), glibcEvidence(f)}
	if in.SettingsSource != "live" {
		return UnknownR(subject, fmt.Sprintf("needs a live connection to read the databases' collations and recorded versions (pg_database), and none was possible: %s. Why it matters: %s. Run dbhost so that it can connect (see pg.settings_source).", in.LiveErr, glibcRisk), append(ev, Ev("live_error", in.LiveErr, "connection"))...)
	}
	var exposed, mismatched, unrecorded, ok []string
	var fixDBs []engine.PGDatabase
	for _, db := range in.Postgres.Databases {
		desc := fmt.Sprintf("%s (%s %s)", db.Name, db.Provider, db.Collate)
		switch {
		case collationImmune(db):
			ev = append(ev, Ev("database "+db.Name, db.Collate+" ("+db.Provider+"): code-point order, immune", "pg_database"))
			continue
		case in.Major() < 15:
			exposed = append(exposed, desc)
		case db.RecordedVersion == "" || db.ActualVersion == "":
			unrecorded = append(unrecorded, desc)
		case db.RecordedVersion != db.ActualVersion:
			mismatched = append(mismatched, fmt.Sprintf("%s: built with %s, library now %s", desc, db.RecordedVersion, db.ActualVersion))
			fixDBs = append(fixDBs, db)
		default:
			ok = append(ok, desc)
		}
		ev = append(ev, Ev("database "+db.Name, fmt.Sprintf("%s %s recorded=%q actual=%q", db.Provider, db.Collate, db.RecordedVersion, db.ActualVersion), "pg_database"))
	}
	if len(in.Postgres.Databases) == 0 {
		why := "no database was listed"
		if in.LiveErr != "" {
			why = in.LiveErr
		}
		return UnknownR(subject, "connected, but could not read pg_database: "+why, ev...)
	}
	switch {
	case len(mismatched) > 0:
		return FailR(subject, fmt.Sprintf("the collation library changed under these databases: %s. Every index on text (and every unique constraint on text) in them may be ordered by the old rules: queries can miss rows and duplicates can slip in. Background: %s. PostgreSQL warns about this at every connection to those databases.", strings.Join(mismatched, "; "), glibcRisk), collationFix(in, fixDBs), ev...)
	case len(exposed) > 0:
		return UnknownR(subject, fmt.Sprintf("PostgreSQL %s records no collation version, so dbhost cannot tell whether these databases' indexes were built with the running C library: %s. Background: %s. If this cluster (or the cluster it was upgraded or replicated from) ever ran on glibc older than 2.28, check text indexes with amcheck (bt_index_check) and REINDEX them.", in.Version, strings.Join(exposed, ", "), glibcRisk), ev...)
	case len(unrecorded) > 0:
		return UnknownR(subject, fmt.Sprintf("no collation version is recorded for %s (created before PostgreSQL 15 and carried over by pg_upgrade, or the library reports none): %s. If they were created on glibc older than 2.28, REINDEX them; then ALTER DATABASE ... REFRESH COLLATION VERSION records the current version so that this check can judge.", strings.Join(unrecorded, ", "), glibcRisk), ev...)
	case len(ok) > 0:
		return PassR(subject, fmt.Sprintf("the collation versions recorded for %s match the running library.", strings.Join(ok, ", ")), ev...)
	}
	return PassR(subject, "every database uses a code-point collation (C, POSIX, C.UTF-8 or builtin), which no library upgrade changes.", ev...)
}

// collationFix rebuilds the indexes of each affected database and records
// the current library version, which makes the check pass.
func collationFix(in *facts.Instance, dbs []engine.PGDatabase) *fix.Fix {
	fx := &fix.Fix{Summary: "REINDEX the databases whose collation library changed, then refresh their recorded collation version"}
	var steps []string
	for _, db := range dbs {
		ident := quoteIdent(db.Name)
		for _, sql := range []string{"REINDEX DATABASE " + ident, "ALTER DATABASE " + ident + " REFRESH COLLATION VERSION"} {
			fx.Runtime = append(fx.Runtime, psqlCommand(in, db.Name, sql))
		}
		steps = append(steps, db.Name)
	}
	fx.Manual = fmt.Sprintf("For each of %s, connected to that database as a superuser: REINDEX DATABASE (it locks each table's writes while its indexes are rebuilt: plan a maintenance window, or REINDEX INDEX CONCURRENTLY the text indexes one by one), then ALTER DATABASE name REFRESH COLLATION VERSION. Collations created with CREATE COLLATION need ALTER COLLATION name REFRESH VERSION too (list them with SELECT collname FROM pg_collation WHERE collversion <> pg_collation_actual_version(oid)). Before rebuilding, amcheck's bt_index_check shows which indexes are already corrupt. Replicas on a different glibc version must be upgraded in step with the primary.", strings.Join(steps, ", "))
	return fx
}

// psqlCommand spells out how to run one statement on an instance's database
// as the postgres user over its socket.
func psqlCommand(in *facts.Instance, db, sql string) string {
	args := []string{"sudo -u postgres psql"}
	if dir := firstSocketDir(in); dir != "" && dir != "/var/run/postgresql" && dir != "/run/postgresql" {
		args = append(args, "-h "+shellQuote(dir))
	}
	args = append(args, fmt.Sprintf("-p %d", in.Port), "-d "+shellQuote(db), "-c "+shellQuote(sql))
	return strings.Join(args, " ")
}

func firstSocketDir(in *facts.Instance) string {
	for _, d := range strings.Split(in.SettingValue("unix_socket_directories"), ",") {
		if d = strings.TrimSpace(d); strings.HasPrefix(d, "/") {
			return d
		}
	}
	return ""
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ---- pg.config_errors ----

func checkPGConfigErrors(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.Postgres) {
		out = append(out, judgeConfigErrors(in))
	}
	return out
}

func judgeConfigErrors(in *facts.Instance) Result {
	subject := in.Name()
	var real, denied []string
	for _, e := range in.ConfigErrors {
		if postgres.IsPermission(e) {
			denied = append(denied, e)
		} else {
			real = append(real, e)
		}
	}
	ev := []Evidence{Ev("config_files", strings.Join(in.ConfigFiles, ", "), "include chain")}
	for _, e := range in.ConfigErrors {
		ev = append(ev, Ev("error", e, "configuration files"))
	}
	switch {
	case len(real) > 0:
		return FailR(subject, fmt.Sprintf("the configuration files have %d error(s): %s. The server would refuse to start with them, and rejects every reload while they remain: it keeps running with settings that are no longer what the files say, and new changes never take effect.", len(real), strings.Join(real, "; ")), configErrorsFix(in, real), ev...)
	case len(denied) > 0:
		return UnknownR(subject, "cannot read all configuration files: "+strings.Join(denied, "; "), ev...)
	case len(in.ConfigFiles) == 0:
		return UnknownR(subject, "no configuration file was found to read", ev...)
	}
	return PassR(subject, fmt.Sprintf("%d configuration file(s) read without errors.", len(in.ConfigFiles)), ev...)
}

func configErrorsFix(in *facts.Instance, errs []string) *fix.Fix {
	files := map[string]bool{}
	for _, e := range errs {
		if i := strings.Index(e, ":"); i > 0 && strings.HasPrefix(e, "/") {
			files[e[:i]] = true
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	where := "the files named in the errors"
	if len(names) > 0 {
		where = strings.Join(names, ", ")
	}
	return &fix.Fix{
		Summary: "Repair the configuration files so that the server can read them",
		Manual:  fmt.Sprintf("Edit %s: remove or correct each include of a missing file (or use include_if_exists for an optional one), break include loops, and quote values the grammar rejects. Then ask the server itself: SELECT sourcefile, sourceline, name, error FROM pg_file_settings WHERE error IS NOT NULL must return no rows before SELECT pg_reload_conf(); settings that need a restart show pending_restart in pg_settings.", where),
		Runtime: []string{
			psqlCommand(in, "postgres", "SELECT sourcefile, sourceline, name, error FROM pg_file_settings WHERE error IS NOT NULL"),
		},
	}
}

// ---- pg.settings_source ----

func checkPGSettingsSource(f *facts.Facts) []Result {
	return eachOf(f, engine.Postgres, judgeSettingsSource)
}

func judgeSettingsSource(f *facts.Facts, in *facts.Instance) Result {
	subject := in.Name()
	ev := []Evidence{Ev("settings_source", in.SettingsSource, "discovery")}
	if in.SettingsSource == "live" {
		ev = append(ev, Ev("live_via", in.LiveVia, "connection"))
		return PassR(subject, "settings were read from the running server ("+in.LiveVia+"): what the checks judge is what the server uses.", ev...)
	}
	ev = append(ev, Ev("live_error", in.LiveErr, "connection"))
	consequence := "The PostgreSQL checks therefore judge the files, the command line and compiled-in defaults: a setting edited but not yet applied (restart pending) is judged as if it were in effect, values the server derives at start (wal_buffers = -1, shared_memory_size_in_huge_pages) are unknown, and pg.collation_glibc cannot judge at all."
	if !f.AsRoot && strings.Contains(in.LiveErr, "permission denied") {
		return UnknownR(subject, "as a non-root user dbhost cannot reach the server's socket ("+in.LiveErr+"); run it as root or as the postgres user to find out whether live settings are readable.", ev...)
	}
	return FailR(subject, "live settings could not be read: "+in.LiveErr+". "+consequence, settingsSourceFix(in), ev...)
}

// settingsSourceFix says how to let dbhost in, by the reason it was kept
// out.
func settingsSourceFix(in *facts.Instance) *fix.Fix {
	fx := &fix.Fix{Summary: "Let dbhost connect to the server's local socket"}
	e := in.LiveErr
	switch {
	case strings.Contains(e, "--no-connect"):
		fx.Manual = "Run the audit without --no-connect."
	case strings.Contains(e, "Peer authentication failed"):
		fx.Manual = fmt.Sprintf("Peer authentication maps the operating-system user to a role of the same name, so root cannot log in as postgres. Either run dbhost as postgres (sudo -u postgres dbhost audit; root-only host facts are then unknown), or map root to postgres: add to pg_ident.conf the lines \"dbhost root postgres\" and \"dbhost postgres postgres\", change the local line for postgres in pg_hba.conf to \"local all postgres peer map=dbhost\" (above the catch-all local line), and reload (SELECT pg_reload_conf()). Or give a role that may read all settings: CREATE ROLE dbhost LOGIN IN ROLE pg_read_all_settings PASSWORD '...'; put its password in root's ~/.pgpass (localhost:%d:postgres:dbhost:PASSWORD, mode 0600) and run dbhost with PGUSER=dbhost, or pass --pg 'user=dbhost dbname=postgres'.", in.Port)
	case strings.Contains(e, "password authentication failed") || strings.Contains(e, "password"):
		fx.Manual = fmt.Sprintf("The server asks for a password: add a line localhost:%d:*:ROLE:PASSWORD to ~/.pgpass of the user running dbhost (mode 0600) and run dbhost with PGUSER=ROLE, or pass --pg 'user=ROLE dbname=postgres'. A role in pg_read_all_settings suffices.", in.Port)
	case strings.Contains(e, "no Unix socket"):
		fx.Manual = "The server has no Unix socket dbhost can find (unix_socket_directories is empty or points elsewhere): enable a local socket, or pass --pg with host and port of a TCP listener and a role in pg_read_all_settings."
	case strings.Contains(e, "does not exist"):
		fx.Manual = "The role dbhost tried does not exist: run dbhost as postgres (sudo -u postgres dbhost audit), or create a role in pg_read_all_settings and pass it with PGUSER / --pg (password in ~/.pgpass)."
	default:
		fx.Manual = "Make the server reachable over its local socket for the user running dbhost (run as postgres, or pass --pg with a role in pg_read_all_settings and its password in ~/.pgpass)."
	}
	return fx
}
