package check

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// MySQL-only configuration judgments: InnoDB's flush method, the
// hardening items of mysql_secure_installation and knowledge.md §6, and
// the Galera ports. Checks that weigh the host against the server (large
// pages, NUMA, io_capacity, back_log, open files) live in their domains.

func init() {
	Register(Check{
		ID:        "mysql.flush_method",
		Title:     "InnoDB bypasses the page cache (innodb_flush_method)",
		Problem:   "InnoDB writes through the page cache (innodb_flush_method)",
		Severity:  Warning,
		AppliesTo: []string{"mysql"},
		Doc: `Reads innodb_flush_method (live, else the option files, else the version's
default: fsync until MariaDB 10.6 and MySQL 8.4, O_DIRECT since). With fsync InnoDB
writes its data files through the kernel's page cache: every page is cached twice
(buffer pool and page cache), memory the buffer pool could use is spent on the copy,
and the kernel's dirty-page writeback adds its own stalls. O_DIRECT (or
O_DIRECT_NO_FSYNC) reads and writes the data files directly; measured on flash it was
slightly faster than fsync. Percona Server's ALL_O_DIRECT, which also opens the redo
log with O_DIRECT, performed badly in the same measurements. nosync and littlesync
are for tests and can lose data on a crash. On ZFS the ARC is the page cache and
O_DIRECT was not honoured before OpenZFS 2.3: there the dataset's
primarycache=metadata does the job (see the storage.zfs checks). MariaDB 11 replaced
the variable by innodb_data_file_buffering (OFF is O_DIRECT).`,
		Refs: []string{
			"https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html#sysvar_innodb_flush_method",
			"https://mariadb.com/kb/en/innodb-flush-method/",
		},
		Run: checkFlushMethod,
	})
	Register(Check{
		ID:        "mysql.hardening.anonymous_users",
		Title:     "No anonymous MySQL accounts",
		Problem:   "Anonymous MySQL accounts exist",
		Severity:  Warning,
		AppliesTo: []string{"mysql"},
		Doc: `Lists the accounts with an empty user name (read live from mysql.user, or
mysql.global_priv on MariaDB 10.4+). An anonymous account lets anyone connect without
naming a user, and because the server matches the most specific host first, ''@'localhost'
takes precedence over 'app'@'%' for local clients, which then log in with the anonymous
account's privileges instead of their own. Older installers create them; mysql_secure_installation
removes them. Locked accounts cannot log in and are not counted. Needs a live
connection (root over the socket, ~/.my.cnf or --mysql).`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/mysql-secure-installation.html", "https://mariadb.com/kb/en/mariadb-secure-installation/"},
		Run:  checkAnonymousUsers,
	})
	Register(Check{
		ID:        "mysql.hardening.remote_root",
		Title:     "MySQL root logs in only from the local host",
		Problem:   "MySQL root can log in from other hosts",
		Severity:  Warning,
		AppliesTo: []string{"mysql"},
		Doc: `Lists the root accounts whose host is not localhost, 127.0.0.1 or ::1 (the
same rule mysql_secure_installation applies). A root reachable over the network is the
first account password-guessing tries, and it holds every privilege. Administer
remotely through a named account with the privileges it needs, or over SSH. Locked
accounts are not counted. Needs a live connection.`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/mysql-secure-installation.html", "https://mariadb.com/kb/en/mariadb-secure-installation/"},
		Run:  checkRemoteRoot,
	})
	Register(Check{
		ID:        "mysql.hardening.test_db",
		Title:     "No leftover MySQL test database",
		Problem:   "The MySQL test database is left over",
		Severity:  Warning,
		AppliesTo: []string{"mysql"},
		Doc: `Looks for the "test" database (SHOW DATABASES live, else a "test" directory in
the data directory). Installers created it with grants in mysql.db that let every
account, the anonymous ones included, create tables in test and in any test_%
database: a place to fill the disk or stage data for anyone who can connect.
mysql_secure_installation drops it and its grants.`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/mysql-secure-installation.html", "https://mariadb.com/kb/en/mariadb-secure-installation/"},
		Run:  checkTestDB,
	})
	Register(Check{
		ID:        "mysql.hardening.skip_grant_tables",
		Title:     "The MySQL server does not run with skip-grant-tables",
		Problem:   "The MySQL server runs with skip-grant-tables",
		Severity:  Critical,
		AppliesTo: []string{"mysql"},
		Doc: `Reads skip-grant-tables from the server's command line, its option files and,
when connected, the live variable. With it the server checks no passwords and no
privileges: every client that reaches it is all-powerful. It is a recovery switch
(a lost root password) that must be removed again right after; left in a file it
comes back at the next restart. The option files must be readable to judge a server
read from files only.`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/server-options.html#option_mysqld_skip-grant-tables", "https://mariadb.com/kb/en/server-system-variables/#skip_grant_tables"},
		Run:  checkSkipGrantTables,
	})
	Register(Check{
		ID:        "mysql.hardening.symbolic_links",
		Title:     "MySQL symbolic-link support is off (symbolic-links=0)",
		Problem:   "MySQL symbolic-link support is on",
		Severity:  Info,
		AppliesTo: []string{"mysql"},
		Doc: `Reads symbolic-links (live: have_symlink). With symbolic links enabled, a user
with the FILE or table-creation privileges can point a table's DATA DIRECTORY or a
symlinked .MYD/.MYI at files outside the data directory and have the server, which
runs with the mysql user's rights, overwrite them. Hardening guides ask for
symbolic-links=0. The default is ON in MariaDB and in MySQL before 8.0.2; MySQL 8.0.2
turned it off and deprecated the option. InnoDB tables created with DATA DIRECTORY
keep working without it.`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/symbolic-links.html", "https://mariadb.com/kb/en/server-system-variables/#have_symlink"},
		Run:  checkSymbolicLinks,
	})
	Register(Check{
		ID:        "mysql.hardening.skip_name_resolve",
		Title:     "MySQL authenticates clients by address, not DNS name (skip_name_resolve)",
		Problem:   "MySQL resolves client addresses to DNS names (skip_name_resolve off)",
		Severity:  Info,
		AppliesTo: []string{"mysql"},
		Doc: `Reads skip_name_resolve. Without it the server resolves every new TCP client's
address to a name and back before it authenticates: a slow or failing DNS server
stalls logins ("unauthenticated user" in the process list) and, for grants by host
name, whoever controls the reverse zone chooses which account a client matches.
With it, accounts must name IP addresses or networks: accounts whose host is a name
stop matching, so the finding lists them first. A server listening only on loopback
or the socket passes (local names come from /etc/hosts).`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/host-cache.html", "https://mariadb.com/kb/en/server-system-variables/#skip_name_resolve"},
		Run:  checkSkipNameResolve,
	})
	Register(Check{
		ID:        "mysql.hardening.empty_passwords",
		Title:     "No MySQL account logs in with an empty password",
		Problem:   "A MySQL account logs in with an empty password",
		Severity:  Critical,
		AppliesTo: []string{"mysql"},
		Doc: `Lists the accounts that accept a password-based method (mysql_native_password,
caching_sha2_password, ed25519, ...) whose stored credential is empty: anyone who
reaches the server logs in as them without a password. The server computes the
emptiness, dbhost never reads a credential. Accounts that authenticate only by the
client's operating-system user (unix_socket, auth_socket) have no password and are
fine; on MariaDB an account may accept several methods (IDENTIFIED VIA unix_socket OR
mysql_native_password), and one empty password method is enough to let anyone in.
Locked accounts (mariadb.sys, MySQL's system accounts) and roles cannot log in.
Needs a live connection.`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/mysql-secure-installation.html", "https://mariadb.com/kb/en/authentication-from-mariadb-10-4/"},
		Run:  checkEmptyPasswords,
	})
	Register(Check{
		ID:        "galera.ports",
		Title:     "Galera replication ports are bound to the cluster network",
		Problem:   "Galera replication ports listen beyond the cluster network",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `For a Galera or Percona XtraDB Cluster node: group communication (4567, or the
port of gmcast.listen_addr), incremental state transfer (IST, 4568) and full state
transfer (SST, 4444) carry the whole database between nodes unauthenticated (and
unencrypted without SSL). They belong on the private cluster network. The check reads
the sockets the server really listens on (/proc/net/tcp*, the process's socket
inodes): Galera listens on tcp://0.0.0.0:4567 unless wsrep_provider_options sets
gmcast.listen_addr, whatever wsrep_node_address says, and the SST port was observed on
0.0.0.0 regardless of the configuration. A gmcast.listen_addr on another address than
wsrep_node_address, where the other members connect, fails too. The fix binds
gmcast.listen_addr to wsrep_node_address, in the one wsrep_provider_options line the
Galera fixes share; firewall the three ports to the other nodes as well. IST and SST
listen only during a state transfer, so a passing node is judged on what it listens
on now and on its configuration.`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/firewall-settings.html",
			"https://galeracluster.com/library/documentation/galera-parameters.html#gmcast-listen-addr",
			"https://mariadb.com/kb/en/configuring-mariadb-galera-cluster/",
		},
		Run: checkGaleraPorts,
	})
}

// ---- shared helpers ----

// mySettingEv is the evidence of one setting, with where it was set.
func mySettingEv(in *facts.Instance, name string) Evidence {
	if s, ok := in.Setting(name); ok {
		return Ev(name, s.Value, s.Source)
	}
	return Ev(name, "not set", "")
}

// myConfigFix changes options of the server. A server started with
// --no-defaults reads no option file, so the snippet alone would not
// apply: the fix then says to put the options on its command line.
func myConfigFix(in *facts.Instance, summary string, restart bool, kv ...string) *fix.Fix {
	fx := &fix.Fix{Summary: summary}
	var args []string
	for i := 0; i+1 < len(kv); i += 2 {
		fx.Config = append(fx.Config, fix.ConfigChange{Instance: in.Name(), Engine: string(in.Engine), Key: kv[i], Value: kv[i+1], Restart: restart})
		args = append(args, "--"+strings.ReplaceAll(kv[i], "_", "-")+"="+kv[i+1])
	}
	switch {
	case len(in.Cmdline) > 1 && in.Cmdline[1] == "--no-defaults":
		fx.Manual = "This server is started with --no-defaults and reads no option file: add " + strings.Join(args, " ") + " to its command line instead, then restart it."
	case in.IncludeDir == "" && len(in.ConfigFiles) > 0:
		last := in.ConfigFiles[len(in.ConfigFiles)-1]
		fx.Manual = "This server's option files include no directory, so no snippet is read by itself: the snippet dbhost renders next to " + last + " is read only once the !include line its first comment gives is added as the last line of " + last + " (or put the setting under [mysqld] at the end of it)."
	}
	return fx
}

// myDesc names the server for reasons: "MariaDB 10.11.6".
func myDesc(in *facts.Instance) string {
	v, _ := engine.VersionParts(in.Version)
	if len(v) == 0 {
		return in.Flavor
	}
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return in.Flavor + " " + strings.Join(parts, ".")
}

// versionWhy says why the server's version is unknown.
func versionWhy(in *facts.Instance) string {
	why := []string{"no live connection (" + myOr(in.LiveErr, "none made") + ")"}
	for _, e := range in.ConfigErrors {
		if v, ok := strings.CutPrefix(e, "version unknown: "); ok {
			why = append(why, v)
		}
	}
	return strings.Join(why, "; ")
}

// accountsUnknown says why the accounts cannot be judged, or "".
func accountsUnknown(in *facts.Instance) string {
	switch {
	case in.MySQL == nil:
		return "no MySQL facts were gathered for this server"
	case in.SettingsSource != "live":
		return "accounts are only visible over a connection to the server, and none was made (" + myOr(in.LiveErr, "no live connection") + "); run dbhost as root (socket authentication) or give credentials in ~/.my.cnf or with --mysql"
	case in.MySQL.UsersErr != "":
		return in.MySQL.UsersErr + " (the account dbhost connects as needs SELECT on the mysql schema)"
	}
	return ""
}

// sqlQuote escapes what an account name may hold so that a statement a
// person copies stays one quoted literal on one line.
var sqlQuote = strings.NewReplacer(`\`, `\\`, "'", "''", "\n", `\n`, "\r", `\r`, "\x00", `\0`)

// sqlString quotes a string for a MySQL statement a person will run.
func sqlString(s string) string { return "'" + sqlQuote.Replace(s) + "'" }

func account(u engine.MySQLUser) string { return sqlString(u.User) + "@" + sqlString(u.Host) }

// accountEv describes an account without any credential.
func accountEv(in *facts.Instance, u engine.MySQLUser) Evidence {
	var flags []string
	flags = append(flags, u.Plugins...)
	if u.EmptyPassword {
		flags = append(flags, "empty password")
	}
	if u.Super {
		flags = append(flags, "SUPER")
	}
	if u.Grant {
		flags = append(flags, "GRANT OPTION")
	}
	if u.Locked {
		flags = append(flags, "locked")
	}
	v := account(u)
	if len(flags) > 0 {
		v += " (" + strings.Join(flags, ", ") + ")"
	}
	return Ev("account", v, "live: "+accountTable(in))
}

func accountTable(in *facts.Instance) string {
	if mysql.IsMariaDB(in.Instance) && engine.VersionAtLeast(in.Version, "10.4") {
		return "mysql.global_priv"
	}
	return "mysql.user"
}

// accountsFinding is the shape of the account checks: the accounts that
// match bad are listed; none matching passes.
func accountsFinding(in *facts.Instance, bad func(engine.MySQLUser) bool, passWhy, failWhy string, stmt func(engine.MySQLUser) string) Result {
	subj := in.Name()
	if why := accountsUnknown(in); why != "" {
		return UnknownR(subj, why)
	}
	var hits []engine.MySQLUser
	for _, u := range in.MySQL.Users {
		if !u.Locked && bad(u) {
			hits = append(hits, u)
		}
	}
	if len(hits) == 0 {
		return PassR(subj, fmt.Sprintf(passWhy, len(in.MySQL.Users)), Ev("accounts", strconv.Itoa(len(in.MySQL.Users)), "live: "+accountTable(in)))
	}
	ev := make([]Evidence, 0, len(hits))
	var stmts, names []string
	for _, u := range hits {
		ev = append(ev, accountEv(in, u))
		stmts = append(stmts, stmt(u))
		names = append(names, account(u))
	}
	fx := &fix.Fix{
		Summary: fmt.Sprintf("Change %d account(s) of %s", len(hits), subj),
		Manual:  "Run in the mysql client as an administrator:\n" + strings.Join(stmts, "\n"),
	}
	return FailR(subj, fmt.Sprintf(failWhy, strings.Join(names, ", ")), fx, ev...)
}

// ---- mysql.flush_method ----

// dataMedia describes the storage under the data directory: "zfs", "nfs",
// "flash", "rotational", "virtual" or "".
func dataMedia(f *facts.Facts, in *facts.Instance) (string, []Evidence) {
	for i := range in.Storage {
		ps := &in.Storage[i]
		if ps.Role != "data" {
			continue
		}
		var ev []Evidence
		if ps.Mount != nil {
			ev = append(ev, Ev("data filesystem", ps.Mount.FSType+" on "+ps.Mount.MountPoint, "/proc/"+strconv.Itoa(in.PID)+"/mountinfo"))
		}
		switch {
		case ps.ZFSDataset != "":
			return "zfs", ev
		case ps.Mount != nil && strings.HasPrefix(ps.Mount.FSType, "nfs"):
			return "nfs", ev
		}
		flash, virt, n := 0, 0, 0
		for _, name := range ps.Physical {
			d := f.Storage.Devices[name]
			if d == nil {
				continue
			}
			r, why := d.Rotational.IntIn(0, 1)
			if why != "" {
				continue
			}
			n++
			ev = append(ev, EvReading("rotational ("+name+")", d.Rotational))
			switch {
			case r == 0:
				flash++
			case d.Virtual:
				virt++
			}
		}
		switch {
		case n == 0:
			return "", ev
		case flash == n:
			return "flash", ev
		case virt > 0:
			return "virtual", ev
		}
		return "rotational", ev
	}
	return "", nil
}

func checkFlushMethod(f *facts.Facts) []Result { return eachOf(f, engine.MySQL, judgeFlushMethod) }

func judgeFlushMethod(f *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	media, ev := dataMedia(f, in)
	s, ok := in.Setting("innodb_flush_method")
	if !ok || s.Value == "" {
		if b, ok := in.Setting("innodb_data_file_buffering"); ok {
			ev = append(ev, Ev("innodb_data_file_buffering", b.Value, b.Source))
			if on, _ := mysql.IsOn(b.Value); !on {
				return PassR(subj, "innodb_data_file_buffering is OFF: InnoDB reads and writes its data files with O_DIRECT, bypassing the page cache.", ev...)
			}
			return FailR(subj, "innodb_data_file_buffering is ON: InnoDB's data files go through the page cache, so pages are cached twice and the kernel's writeback adds stalls. Set it OFF (O_DIRECT).",
				myConfigFix(in, "Set innodb_data_file_buffering to OFF", false, "innodb_data_file_buffering", "OFF"), ev...)
		}
		return UnknownR(subj, "innodb_flush_method is not set in the option files and its default depends on the server version, which could not be learnt: "+versionWhy(in), ev...)
	}
	ev = append([]Evidence{Ev("innodb_flush_method", s.Value, s.Source)}, ev...)
	if why := defaultUnsure(in, "innodb_flush_method"); why != "" {
		return UnknownR(subj, why, ev...)
	}
	v := strings.ToUpper(strings.TrimSpace(s.Value))
	fx := myConfigFix(in, "Set innodb_flush_method to O_DIRECT", true, "innodb_flush_method", "O_DIRECT")
	switch v {
	case "O_DIRECT", "O_DIRECT_NO_FSYNC", "4", "6":
		reason := fmt.Sprintf("innodb_flush_method is %s on %s: data pages are cached once, in the buffer pool, not again in the page cache.", s.Value, myDesc(in))
		if media == "zfs" {
			reason += " The data is on ZFS, whose ARC still caches them unless the dataset has primarycache=metadata."
		}
		return PassR(subj, reason, ev...)
	case "ALL_O_DIRECT":
		return FailR(subj, "innodb_flush_method is ALL_O_DIRECT: it opens the redo log with O_DIRECT too, and in measurements it performed badly, worse than both fsync and O_DIRECT (the log's small sequential writes lose the page cache's write combining). Use O_DIRECT.", fx, ev...)
	case "NOSYNC", "LITTLESYNC", "2", "3":
		r := FailR(subj, fmt.Sprintf("innodb_flush_method is %s, a testing value: InnoDB skips fsync() of its files, so a crash or power loss can lose committed transactions and corrupt tables. Use O_DIRECT.", s.Value), fx, ev...)
		r.Severity = Critical
		return r
	}
	if media == "zfs" {
		return PassR(subj, fmt.Sprintf("innodb_flush_method is %s and the data is on ZFS: OpenZFS before 2.3 does not honour O_DIRECT, and the ARC is the page cache; avoid double caching with primarycache=metadata on the dataset instead.", s.Value), ev...)
	}
	reason := fmt.Sprintf("innodb_flush_method is %s on %s: InnoDB's data files go through the kernel's page cache, so every page is cached twice (buffer pool and page cache), memory the buffer pool could use holds the copy, and the kernel's dirty-page writeback adds its own stalls. O_DIRECT avoids both and measured slightly faster than fsync on flash.", s.Value, myDesc(in))
	switch media {
	case "flash":
		reason += " The data is on flash storage."
	case "rotational":
		reason += " The data is on spinning disks: O_DIRECT still avoids the double caching; its writes are fastest behind a battery-backed write cache, so measure after the change."
	}
	return FailR(subj, reason, fx, ev...)
}

// ---- account checks ----

func checkAnonymousUsers(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MySQL) {
		out = append(out, accountsFinding(in,
			func(u engine.MySQLUser) bool { return u.User == "" },
			"None of the %d accounts has an empty user name.",
			"Anonymous accounts %s let anyone connect without naming a user; for clients from a matching host they also take precedence over named accounts with a wildcard host, which then log in with the anonymous account's privileges. Drop them.",
			func(u engine.MySQLUser) string { return "DROP USER " + account(u) + ";" }))
	}
	return out
}

// localHosts are the hosts mysql_secure_installation keeps for root.
var localHosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}

func checkRemoteRoot(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MySQL) {
		out = append(out, accountsFinding(in,
			func(u engine.MySQLUser) bool { return u.User == "root" && !localHosts[strings.ToLower(u.Host)] },
			"root logs in only from localhost, 127.0.0.1 or ::1 (%d accounts checked).",
			"root accepts logins from %s: a network-reachable root is the first target of password guessing and holds every privilege. Drop these accounts; administer remotely through a named account with only the privileges it needs, or over SSH.",
			func(u engine.MySQLUser) string { return "DROP USER " + account(u) + ";" }))
	}
	return out
}

func checkEmptyPasswords(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MySQL) {
		maria := mysql.IsMariaDB(in.Instance)
		out = append(out, accountsFinding(in,
			func(u engine.MySQLUser) bool { return u.EmptyPassword },
			"No account that takes a password has an empty one (%d accounts checked; socket-authenticated and locked accounts have none by design).",
			"%s accept a password login with an empty password: anyone who can reach the server logs in as them. Set a password, or keep only socket authentication for local administrators.",
			func(u engine.MySQLUser) string { return emptyPasswordFix(u, maria) }))
	}
	return out
}

// emptyPasswordFix keeps socket authentication where the account has it
// (Debian's maintenance scripts log in as root over the socket) and sets a
// password otherwise.
func emptyPasswordFix(u engine.MySQLUser, maria bool) string {
	for _, p := range u.Plugins {
		switch {
		case p == "unix_socket" && maria:
			return "ALTER USER " + account(u) + " IDENTIFIED VIA unix_socket;  -- keeps socket login, drops the empty password"
		case p == "auth_socket" && !maria:
			return "ALTER USER " + account(u) + " IDENTIFIED WITH auth_socket;  -- keeps socket login, drops the empty password"
		}
	}
	return "ALTER USER " + account(u) + " IDENTIFIED BY '<a new strong password>';"
}

// ---- mysql.hardening.test_db ----

func checkTestDB(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MySQL) {
		subj := in.Name()
		if in.MySQL == nil || in.MySQL.DatabasesVia == "" {
			out = append(out, UnknownR(subj, "the databases could not be listed: no live connection ("+myOr(in.LiveErr, "none made")+") and the data directory "+myOr(in.DataDir, "(unknown)")+" could not be searched (run dbhost as root)"))
			continue
		}
		src := "live: SHOW DATABASES"
		if in.MySQL.DatabasesVia == "datadir" {
			src = in.DataDir + "/test"
		}
		has := false
		for _, d := range in.MySQL.Databases {
			if d == "test" {
				has = true
			}
		}
		if !has {
			val := strings.Join(in.MySQL.Databases, ", ")
			if in.MySQL.DatabasesVia == "datadir" {
				val = "no test directory"
			}
			out = append(out, PassR(subj, "There is no test database.", Ev("databases", val, src)))
			continue
		}
		fx := &fix.Fix{
			Summary: "Drop the test database and its default grants on " + subj,
			Manual:  "Run in the mysql client as an administrator (after checking nothing uses it):\nDROP DATABASE test;\nDELETE FROM mysql.db WHERE Db = 'test' OR Db = 'test\\\\_%';\nFLUSH PRIVILEGES;",
		}
		out = append(out, FailR(subj, "The test database exists. Installers created it with grants that let every account, anonymous ones included, create tables in test and in any test_% database: room for anyone who can connect to fill the disk. Drop it and the grants.", fx, Ev("database", "test", src)))
	}
	return out
}

// ---- mysql.hardening.skip_grant_tables ----

// defaultUnsure says why a setting taken from the compiled-in defaults
// cannot be trusted (part of the configuration could not be read, so a
// file may set it), or "".
func defaultUnsure(in *facts.Instance, name string) string {
	s, ok := in.Setting(name)
	if ok && s.Source != "default" {
		return ""
	}
	if gaps := configGaps(in); len(gaps) > 0 {
		return fmt.Sprintf("%s is not set where dbhost could read, and part of the configuration could not be read (%s), so the compiled-in default may not apply", name, strings.Join(gaps, "; "))
	}
	return ""
}

// configGaps lists what could not be read of the server's configuration.
func configGaps(in *facts.Instance) []string {
	var gaps []string
	for _, e := range in.ConfigErrors {
		if strings.HasPrefix(e, "cannot read") || strings.Contains(e, ": cannot read") {
			gaps = append(gaps, e)
		}
	}
	return gaps
}

func checkSkipGrantTables(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MySQL) {
		subj := in.Name()
		s, set := in.Setting("skip_grant_tables")
		on, _ := mysql.IsOn(s.Value)
		ev := []Evidence{mySettingEv(in, "skip_grant_tables")}
		if on {
			where := "the server's command line (the service unit's ExecStart or mysqld_safe's arguments)"
			src := s.Source
			if c, ok := in.MySQL.Configured["skip_grant_tables"]; ok {
				src = c.Source
			}
			if p, ok := strings.CutPrefix(src, "file:"); ok {
				where = p
			}
			fx := &fix.Fix{
				Summary: "Remove skip-grant-tables from " + subj,
				Manual:  "Remove skip-grant-tables from " + where + " and restart the server (a running server can also reload the grants with FLUSH PRIVILEGES, but the option returns at the next start while it is configured).",
			}
			out = append(out, FailR(subj, "The server runs with skip-grant-tables: it checks no passwords and no privileges, so every client that reaches it has full control. Remove it now.", fx, ev...))
			continue
		}
		if gaps := configGaps(in); len(gaps) > 0 && (in.SettingsSource != "live" || !set || s.Source != "live") {
			out = append(out, UnknownR(subj, "skip-grant-tables is not on the command line or in the files that could be read, but part of the configuration could not be read: "+strings.Join(gaps, "; "), ev...))
			continue
		}
		if !set && in.SettingsSource != "live" {
			out = append(out, UnknownR(subj, "skip-grant-tables could not be judged: no live connection and no readable configuration", ev...))
			continue
		}
		out = append(out, PassR(subj, "skip-grant-tables is off: the server checks passwords and privileges.", ev...))
	}
	return out
}

// ---- mysql.hardening.symbolic_links ----

func checkSymbolicLinks(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MySQL) {
		subj := in.Name()
		s, ok := in.Setting("symbolic_links")
		ev := []Evidence{mySettingEv(in, "symbolic_links")}
		if hs, ok := in.Setting("have_symlink"); ok {
			ev = append(ev, Ev("have_symlink", hs.Value, hs.Source))
		}
		if !ok {
			out = append(out, UnknownR(subj, "symbolic-links is not set in the option files and its default depends on the version (ON in MariaDB and in MySQL before 8.0.2), which could not be learnt: "+versionWhy(in), ev...))
			continue
		}
		on, known := mysql.IsOn(s.Value)
		if !known {
			out = append(out, UnknownR(subj, "symbolic-links has an unexpected value: "+s.Value, ev...))
			continue
		}
		if why := defaultUnsure(in, "symbolic_links"); why != "" {
			out = append(out, UnknownR(subj, why, ev...))
			continue
		}
		if !on {
			out = append(out, PassR(subj, "Symbolic-link support is off: table files cannot be redirected outside the data directory.", ev...))
			continue
		}
		reason := "Symbolic-link support is on"
		if s.Source == "default" || (s.Source == "live" && mysql.IsMariaDB(in.Instance)) {
			reason += fmt.Sprintf(" (the default of %s)", myDesc(in))
		}
		reason += ": a user who can create tables or has the FILE privilege can point table files outside the data directory and have the server overwrite files the mysql user may write. Set symbolic-links=0."
		out = append(out, FailR(subj, reason, myConfigFix(in, "Set symbolic-links to 0", true, "symbolic_links", "0"), ev...))
	}
	return out
}

// ---- mysql.hardening.skip_name_resolve ----

// hostIsName reports whether an account's host is a DNS name (or name
// pattern) rather than an address, network or wildcard.
func hostIsName(h string) bool {
	h = strings.ToLower(strings.TrimSpace(h))
	if h == "" || h == "localhost" || h == "%" {
		return false
	}
	if ip, _, ok := strings.Cut(h, "/"); ok { // 10.0.0.0/255.0.0.0
		return net.ParseIP(ip) == nil
	}
	if net.ParseIP(h) != nil || strings.Contains(h, ":") {
		return false
	}
	return strings.Trim(h, "0123456789.%_") != ""
}

func checkSkipNameResolve(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MySQL) {
		subj := in.Name()
		s, ok := in.Setting("skip_name_resolve")
		ev := []Evidence{mySettingEv(in, "skip_name_resolve")}
		on, known := mysql.IsOn(s.Value)
		if !ok || !known {
			out = append(out, UnknownR(subj, "skip_name_resolve could not be read", ev...))
			continue
		}
		if on {
			out = append(out, PassR(subj, "skip_name_resolve is ON: clients are matched by address, logins do not wait for DNS.", ev...))
			continue
		}
		// Only the client port matters: Galera's ports carry no logins.
		var tcp []string
		for _, l := range in.Listen {
			if l.Proto != "unix" && (in.Port == 0 || l.Port == in.Port) {
				ev = append(ev, Ev("listen", l.String(), "/proc/net/tcp"))
				if !l.Loopback() {
					tcp = append(tcp, l.String())
				}
			}
		}
		if in.ListenErr == "" && len(in.Listen) > 0 && len(tcp) == 0 {
			out = append(out, PassR(subj, "skip_name_resolve is OFF, but the server listens only on loopback addresses and its socket: local client names come from /etc/hosts, not DNS.", ev...))
			continue
		}
		if why := defaultUnsure(in, "skip_name_resolve"); why != "" {
			out = append(out, UnknownR(subj, why, ev...))
			continue
		}
		var named []string
		if in.MySQL != nil {
			for _, u := range in.MySQL.Users {
				if !u.Locked && hostIsName(u.Host) {
					named = append(named, account(u))
					ev = append(ev, accountEv(in, u))
				}
			}
		}
		sort.Strings(named)
		reason := "skip_name_resolve is OFF: for every new TCP client the server looks the address up in DNS and back before authenticating; a slow or failing DNS server stalls logins, and for grants by host name whoever controls the reverse zone picks which account a client matches. Set skip_name_resolve=ON and grant by IP address or network."
		fx := myConfigFix(in, "Set skip_name_resolve to ON", true, "skip_name_resolve", "ON")
		if len(named) > 0 {
			reason += " First re-create these accounts, which name hosts by DNS name and stop matching with the setting, for their IP addresses: " + strings.Join(named, ", ") + "."
			fx.Manual = "Before restarting with skip_name_resolve, re-create these accounts for IP addresses (CREATE USER 'u'@'10.0.0.5' ...; GRANT ...): " + strings.Join(named, ", ")
		} else if accountsUnknown(in) != "" {
			reason += " Accounts could not be read to see which name hosts by DNS name (" + accountsUnknown(in) + "); check mysql.user for host names before the change."
		}
		out = append(out, FailR(subj, reason, fx, ev...))
	}
	return out
}

// ---- galera.ports ----

// providerOptions parses wsrep_provider_options ("a=1; b = 2") into keys
// and values, in order.
func providerOptions(s string) [][2]string {
	var out [][2]string
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return out
}

func providerOption(s, key string) (string, bool) {
	for _, kv := range providerOptions(s) {
		if strings.EqualFold(kv[0], key) {
			return kv[1], true
		}
	}
	return "", false
}

// withProviderOption sets one key of a wsrep_provider_options list,
// keeping the others.
func withProviderOption(s, key, value string) string {
	var parts []string
	for _, kv := range providerOptions(s) {
		if !strings.EqualFold(kv[0], key) {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(append(parts, key+"="+value), ";")
}

// splitAddr reads "tcp://10.0.0.1:4567", "10.0.0.1:4567", "[::]:4567" or
// "10.0.0.1" into host and port (0 when absent).
func splitAddr(a string) (string, int) {
	a = strings.TrimSpace(a)
	if _, rest, ok := strings.Cut(a, "://"); ok {
		a = rest
	}
	if h, p, err := net.SplitHostPort(a); err == nil {
		n, _ := strconv.Atoi(p)
		return h, n
	}
	return strings.Trim(a, "[]"), 0
}

func wildcardHost(h string) bool {
	return h == "" || h == "0.0.0.0" || h == "::" || h == "*"
}

// galeraPorts are the node's group communication, IST and SST ports and
// the address group communication listens on.
type galeraPorts struct {
	gcommHost       string
	gcomm, ist, sst int
	listenAddrSet   bool
}

func readGaleraPorts(in *facts.Instance) galeraPorts {
	g := galeraPorts{gcommHost: "0.0.0.0", gcomm: 4567, sst: 4444}
	po := in.SettingValue("wsrep_provider_options")
	if bp, ok := providerOption(po, "base_port"); ok {
		if n, err := strconv.Atoi(bp); err == nil {
			g.gcomm = n
		}
	}
	if la, ok := providerOption(po, "gmcast.listen_addr"); ok {
		h, p := splitAddr(la)
		g.gcommHost, g.listenAddrSet = h, true
		if p > 0 {
			g.gcomm = p
		}
	}
	g.ist = g.gcomm + 1
	if ra, ok := providerOption(po, "ist.recv_addr"); ok {
		if _, p := splitAddr(ra); p > 0 {
			g.ist = p
		}
	}
	if _, p := splitAddr(in.SettingValue("wsrep_sst_receive_address")); p > 0 {
		g.sst = p
	}
	return g
}

func checkGaleraPorts(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		r, w := judgeGaleraPortsWants(in)
		if r.Status == Fail {
			r.Fix = galeraFix(in, readGaleraPorts(in), w)
		}
		out = append(out, r)
	}
	return out
}

// judgeGaleraPortsWants judges the ports and says which provider option
// the fix changes: group communication bound to wsrep_node_address, when
// that is an address.
func judgeGaleraPortsWants(in *facts.Instance) (Result, []providerWant) {
	r := judgeGaleraPorts(in)
	if r.Status != Fail {
		return r, nil
	}
	g := readGaleraPorts(in)
	node, _ := splitAddr(in.SettingValue("wsrep_node_address"))
	if wildcardHost(node) || net.ParseIP(node) == nil {
		return r, nil
	}
	return r, []providerWant{{"gmcast.listen_addr", "tcp://" + net.JoinHostPort(node, strconv.Itoa(g.gcomm))}}
}

func judgeGaleraPorts(in *facts.Instance) Result {
	subj := in.Name()
	g := readGaleraPorts(in)
	role := map[int]string{g.gcomm: "group communication", g.ist: "IST", g.sst: "SST"}
	ev := []Evidence{
		Ev("gmcast.listen_addr", fmt.Sprintf("tcp://%s:%d", myOr(g.gcommHost, "0.0.0.0"), g.gcomm), myPick(g.listenAddrSet, "wsrep_provider_options ("+in.Settings["wsrep_provider_options"].Source+")", "Galera default")),
		mySettingEv(in, "wsrep_node_address"),
	}
	var wild, bound []string
	for _, l := range in.Listen {
		r, ok := role[l.Port]
		if !ok || l.Proto == "unix" {
			continue
		}
		ev = append(ev, Ev("listen ("+r+")", l.String(), "the process's listening "+l.Proto+" sockets (sock_diag, /proc/PID/fd), in its network namespace"))
		if l.Wildcard() {
			wild = append(wild, fmt.Sprintf("%s (%s)", l.String(), r))
		} else {
			bound = append(bound, l.String())
		}
	}
	socketsKnown := in.ListenErr == "" && len(in.Listen) > 0
	cfgWild := wildcardHost(g.gcommHost)
	node, _ := splitAddr(in.SettingValue("wsrep_node_address"))
	switch {
	case len(wild) > 0:
		return FailR(subj, fmt.Sprintf("Galera listens on every address: %s. These ports carry the whole database between nodes without authentication; bind them to the cluster network and firewall them to the other nodes.", strings.Join(wild, ", ")), nil, ev...)
	case cfgWild && !socketsKnown:
		return FailR(subj, fmt.Sprintf("gmcast.listen_addr is not set, so Galera listens on tcp://0.0.0.0:%d, every address, whatever wsrep_node_address says (the real sockets %s). Bind it to the cluster network.", g.gcomm, unseenSockets(in)), nil, ev...)
	case !cfgWild && net.ParseIP(node) != nil && !wildcardHost(node) && !sameIP(g.gcommHost, node):
		// The other members reach this one at wsrep_node_address (and
		// the addresses of their wsrep_cluster_address).
		return FailR(subj, fmt.Sprintf("gmcast.listen_addr binds group communication to %s, but wsrep_node_address, where the other members reach this node, is %s: they cannot connect to it there. Bind it to the node's address on the cluster network.", g.gcommHost, node), nil, ev...)
	case !socketsKnown:
		return UnknownR(subj, fmt.Sprintf("The configuration binds group communication to %s, but the sockets the server really listens on %s: the SST port was seen on 0.0.0.0 regardless of the configuration.", g.gcommHost, unseenSockets(in)), ev...)
	}
	reason := "Galera's ports are bound to specific addresses"
	if len(bound) > 0 {
		reason += " (" + strings.Join(bound, ", ") + ")"
	}
	reason += fmt.Sprintf(". IST (%d) and SST (%d) listen only during a state transfer: check them then, and firewall all three ports to the cluster's nodes.", g.ist, g.sst)
	return PassR(subj, reason, ev...)
}

// unseenSockets says why a server's listening sockets are not known: the
// reason reading them failed (which says when root is needed, and only
// then), or that none of the sockets it holds listens.
func unseenSockets(in *facts.Instance) string {
	if in.ListenErr != "" {
		return "could not be read (" + in.ListenErr + ")"
	}
	return "are not known: none of the sockets the process holds was found listening"
}

// sameIP compares two addresses as IPs (::ffff:10.0.0.1 is 10.0.0.1).
func sameIP(a, b string) bool {
	x, y := net.ParseIP(strings.Trim(a, "[]")), net.ParseIP(strings.Trim(b, "[]"))
	return x != nil && y != nil && x.Equal(y)
}

// galeraFix binds group communication to wsrep_node_address, in the one
// wsrep_provider_options line the Galera fixes share (providerFix).
func galeraFix(in *facts.Instance, g galeraPorts, wants []providerWant) *fix.Fix {
	firewall := fmt.Sprintf("Firewall ports %d, %d and %d to the other cluster nodes.", g.gcomm, g.ist, g.sst)
	node, _ := splitAddr(in.SettingValue("wsrep_node_address"))
	if len(wants) == 0 {
		return &fix.Fix{
			Summary: "Bind Galera to the cluster network on " + in.Name(),
			Manual:  fmt.Sprintf("Set wsrep_node_address to this node's address on the cluster network and add gmcast.listen_addr=tcp://ADDRESS:%d to wsrep_provider_options (keep its other options), set wsrep_sst_receive_address=ADDRESS, then restart the node. %s", g.gcomm, firewall),
		}
	}
	fx := providerFix(in, "Bind Galera group communication to "+node, wants)
	if len(fx.Config) == 0 {
		// A manual step (the option files could not be read): the whole
		// change is for a person.
		fx.Manual = strings.TrimSpace(fx.Manual + " Set wsrep_sst_receive_address=" + node + " too. " + firewall)
		return fx
	}
	if _, set := in.Setting("wsrep_sst_receive_address"); !set || wildcardHost(in.SettingValue("wsrep_sst_receive_address")) || strings.EqualFold(in.SettingValue("wsrep_sst_receive_address"), "AUTO") {
		fx.Config = append(fx.Config, fix.ConfigChange{Instance: in.Name(), Engine: string(in.Engine), Key: "wsrep_sst_receive_address", Value: node, Restart: true})
	}
	fx.Manual = strings.TrimSpace(fx.Manual + " " + firewall)
	return fx
}

// myPick returns a when cond holds, else b.
func myPick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// myOr returns s, or def when s is empty.
func myOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
