package cli

// The FILES and ENVIRONMENT sections of the man pages: one table each,
// every entry naming the commands whose pages list it (dbhost(1) lists
// them all). TestManSources finds each path and variable in the code that
// uses it, so that the pages cannot name what the code no longer reads.

// manFile is a file or directory dbhost reads or writes.
type manFile struct {
	path, means string
	cmds        []string // command paths below dbhost: "fix", "results show"
}

// manVar is an environment variable dbhost reads; pkg is the package that
// reads it (a directory of this module, or a module package).
type manVar struct {
	name, means string
	cmds        []string
	pkg         string
}

// Commands that connect to the local database servers, and those that
// read snapshots.
var (
	connecting = []string{"audit", "collect", "contention", "diff", "fix", "serve"}
	unpacking  = []string{"audit", "contention", "diff", "fleet report", "mem"}
	storing    = []string{"audit", "experiment", "experiment recover", "results compare", "results list", "results report", "results show"}
)

var manFiles = []manFile{
	{"/etc/default/dbhost", "The environment file of dbhost.service: serve's flags (ARGS=), and DBHOST_BUDGET, the databases' memory shares, which audit, fix and serve also read from it when neither --budget nor the variable is given and only root can change the file.",
		[]string{"audit", "fix", "serve"}},
	{"/etc/dbhost/waivers.yaml", "Accepted findings (check, subject, reason, expiry): audit shows them as waived and does not count them, fix leaves them alone, serve exports a waived marker and reads the file again every audit. Read only when root owns it and nobody else can write it or the directories above it; --waivers names another file, --no-waivers ignores it.",
		[]string{"audit", "collect", "fix", "serve"}},
	{"~/.pgpass", "The invoking user's PostgreSQL passwords (or the file PGPASSFILE names), read to log in to a local server dbhost trusts; never put in a snapshot, never printed.", connecting},
	{"~/.my.cnf", "The invoking user's MySQL/MariaDB user and password ([client], then [mysql]), read as ~/.pgpass is.", connecting},
	{"/var/lib/dbhost/changes", "The change sets of fix --apply: each change journaled before it is made, with what was there before; --rollback, --history and --recover read them.", []string{"fix", "experiment recover"}},
	{"/var/lib/dbhost/experiment.journal", "The running experiment's journal: each knob's old value, written before the knob changes. A run killed with -9 leaves it behind; experiment recover and fix --recover restore the host from it.", []string{"experiment", "experiment recover", "fix"}},
	{"/var/lib/dbhost/results.db", "The stored experiments (SQLite): what the results commands read, and what audit links findings to (--results-db, --db).", storing},
	{"/var/lib/dbhost/lab", "The Galera labs: each lab's node directories and state, and beside them its journal (NAME.journal) of every namespace, link, directory and partition rule it made; lab galera --stop, or the next start of that name, removes them.", []string{"lab galera"}},
	{"/var/lib/dbhost/contention-probe.json", "The switching capacity that contention --probe measured on this host (--state).", []string{"contention"}},
	{"/run/dbhost", "root's host lock: fix --apply, --rollback, --recover and experiment take it, so that one change to the host runs at a time.", []string{"fix", "experiment", "experiment recover"}},
	{"/etc/sysctl.d/60-dbhost.conf", "Kernel parameters, written by fix --apply (fix --out renders this file and the ones below into its directory).", []string{"fix"}},
	{"/etc/udev/rules.d/60-dbhost.rules", "I/O scheduler and read-ahead of the devices under the databases.", []string{"fix"}},
	{"/etc/security/limits.d/60-dbhost.conf", "Process limits of the database users.", []string{"fix"}},
	{"/etc/systemd/system/UNIT.d/60-dbhost.conf", "Limits of the systemd unit a database server runs under.", []string{"fix"}},
	{"/etc/tmpfiles.d/60-dbhost.conf", "/sys values set at boot (transparent huge pages).", []string{"fix"}},
	{"/etc/default/grub.d/60-dbhost.cfg", "The kernel command line: rendered by fix --out, listed by fix --apply, never edited.", []string{"fix"}},
}

var manVars = []manVar{
	{"DBHOST_BUDGET", "The databases' memory shares when --budget is not given (its syntax), before the one in /etc/default/dbhost.", []string{"audit", "fix", "serve"}, "internal/budget"},
	{"PGUSER", "The PostgreSQL user dbhost logs in as (default: postgres, then the invoking user).", connecting, "internal/engine/postgres"},
	{"PGDATABASE", "The database of the local PostgreSQL connection (default: postgres).", connecting, "internal/engine/postgres"},
	{"PGPASSWORD", "A PostgreSQL password, read by the driver (pgx), sent only to a server dbhost trusts.", connecting, "github.com/jackc/pgx/v5/pgconn"},
	{"PGPASSFILE", "The PostgreSQL password file instead of ~/.pgpass.", connecting, "internal/engine/postgres"},
	{"HOME", "Where ~/.pgpass and ~/.my.cnf are.", connecting, "internal/engine/mysql"},
	{"TMPDIR", "Where snapshots are unpacked (default: /dev/shm when it is writable, else /tmp).", unpacking, "internal/host"},
	{"NO_COLOR", "When set, the text output has no colour on a terminal either (--color auto).", []string{"audit"}, "internal/cli"},
	{"SOURCE_DATE_EPOCH", "The date of the pages' header, in seconds since 1970 (reproducible builds); default: today.", []string{"man"}, "internal/cli"},
}

// manUnlisted are the variables the code reads that the pages leave out,
// and why.
var manUnlisted = map[string]string{
	"USER":      "the PostgreSQL user's fallback when the user database has no entry for the invoking user",
	"SUDO_USER": "recorded in a change set as who applied it, not a setting",
	"TZ":        "passed on to the throwaway PostgreSQL cluster of an experiment",
}
