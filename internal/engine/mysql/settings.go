package mysql

import (
	"fmt"
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Flavors of the MySQL family, as engine.Instance.Flavor.
const (
	FlavorMySQL   = "MySQL"
	FlavorMariaDB = "MariaDB"
	FlavorPercona = "Percona Server"
	FlavorPXC     = "Percona XtraDB Cluster"
)

// IsMariaDB reports whether the instance is MariaDB (whose defaults, option
// groups and account tables differ from MySQL's).
func IsMariaDB(in *engine.Instance) bool { return in.Flavor == FlavorMariaDB }

// FlavorOf names the product from a version string and version comment
// (live variables or `mysqld --version` output).
func FlavorOf(version, comment string) string {
	all := version + " " + comment
	switch {
	case strings.Contains(all, "MariaDB"):
		return FlavorMariaDB
	case strings.Contains(all, "Percona XtraDB Cluster"):
		return FlavorPXC
	case strings.Contains(all, "Percona Server"), strings.Contains(all, "Percona"):
		return FlavorPercona
	}
	return FlavorMySQL
}

// majorMinor returns "10.11" for "10.11.6-MariaDB", or "".
func majorMinor(version string) string {
	v, _ := engine.VersionParts(version)
	if len(v) < 2 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v[0], v[1])
}

// ServerGroups lists the option-file groups the server reads. MariaDB adds
// its own names and [client-server]/[galera]; --defaults-group-suffix adds a
// suffixed copy of each group. Without a version the version-specific groups
// ([mysqld-8.0]) cannot be named and are left out.
func ServerGroups(flavor, version, suffix string) []string {
	mm := majorMinor(version)
	var g []string
	add := func(name string, versioned bool) {
		g = append(g, name)
		if versioned && mm != "" {
			g = append(g, name+"-"+mm)
		}
	}
	add("mysqld", true)
	add("server", false)
	if flavor == FlavorMariaDB {
		add("mariadb", true)
		add("mariadbd", true)
		add("client-server", false)
		add("galera", false)
	}
	if suffix != "" {
		for _, n := range append([]string(nil), g...) {
			g = append(g, n+suffix)
		}
	}
	return g
}

// literalSkip names options that begin with "skip-" themselves; for every
// other "skip-X" the server sets X off.
var literalSkip = map[string]bool{
	"skip_name_resolve": true, "skip_networking": true, "skip_grant_tables": true,
	"skip_show_database": true, "skip_external_locking": true, "skip_slave_start": true,
	"skip_replica_start": true, "skip_host_cache": true, "skip_new": true,
	"skip_character_set_client_handshake": true, "skip_stack_trace": true,
}

// ResolveOption turns an option as written into the setting it sets:
// dashes become underscores, "loose-" is dropped, "skip-X" and "disable-X"
// set X off, "enable-X" sets it on, a bare name sets a boolean on.
// "maximum-X" (a cap on SET) sets nothing: ok is false.
func ResolveOption(name, value string, hasValue bool) (setting, val string, ok bool) {
	n := engine.NormalizeName(name)
	n = strings.TrimPrefix(n, "loose_")
	if strings.HasPrefix(n, "maximum_") || n == "" {
		return "", "", false
	}
	if literalSkip[n] {
		if !hasValue {
			return n, "ON", true
		}
		return n, value, true
	}
	for _, p := range []struct{ prefix, val string }{{"skip_", "OFF"}, {"disable_", "OFF"}, {"enable_", "ON"}} {
		if base, found := strings.CutPrefix(n, p.prefix); found && base != "" {
			if p.prefix == "enable_" && hasValue {
				return base, value, true
			}
			return base, p.val, true
		}
	}
	if !hasValue {
		return n, "ON", true
	}
	return n, value, true
}

// IsOn reads a boolean setting value the way the server does (ON, 1, TRUE,
// YES; OFF, 0, FALSE, NO, DISABLED). ok is false for anything else.
func IsOn(v string) (on, ok bool) {
	switch strings.ToUpper(strings.Trim(strings.TrimSpace(v), `'"`)) {
	case "ON", "1", "TRUE", "YES":
		return true, true
	case "OFF", "0", "FALSE", "NO", "DISABLED":
		return false, true
	}
	return false, false
}

// redactValue hides a value whose setting name marks it as a secret
// (wsrep_sst_auth), using the same rule as snapshots.
func redactValue(name, value string) string { return host.RedactValue(name, value) }

// applyOptions sets the settings of the options in the wanted groups, in
// order (later options win). Options read from the command line have no
// file and the source "cmdline".
func applyOptions(in *engine.Instance, opts []Option, groups []string) {
	want := map[string]bool{}
	for _, g := range groups {
		want[strings.ToLower(g)] = true
	}
	for _, o := range opts {
		if o.File != "" && !want[o.Group] {
			continue
		}
		name, val, ok := ResolveOption(o.Name, o.Value, o.HasValue)
		if !ok {
			continue
		}
		src := "cmdline"
		if o.File != "" {
			src = o.Source()
		}
		in.Set(name, redactValue(name, val), src)
	}
}

// cmdline is what the server's command line says about option files.
type cmdline struct {
	noDefaults   bool
	defaultsFile string
	extraFile    string
	groupSuffix  string
	options      []Option // File "" (source "cmdline")
}

// shortOptions maps the server's one-letter options to their long names.
var shortOptions = map[byte]string{
	'h': "datadir", 'P': "port", 'u': "user", 'b': "basedir",
	'C': "character_set_server", 'W': "log_warnings", 'L': "lc_messages_dir",
}

// parseCmdline reads the server's arguments. The option-file options
// (--no-defaults, --defaults-file, --defaults-extra-file,
// --defaults-group-suffix) count only at the start, where the server looks
// for them.
func parseCmdline(args []string) cmdline {
	var c cmdline
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--no-defaults":
			c.noDefaults = true
		case strings.HasPrefix(a, "--defaults-file="):
			c.defaultsFile = strings.TrimPrefix(a, "--defaults-file=")
		case strings.HasPrefix(a, "--defaults-extra-file="):
			c.extraFile = strings.TrimPrefix(a, "--defaults-extra-file=")
		case strings.HasPrefix(a, "--defaults-group-suffix="):
			c.groupSuffix = strings.TrimPrefix(a, "--defaults-group-suffix=")
		default:
			goto rest
		}
	}
rest:
	for ; i < len(args); i++ {
		a := args[i]
		next := func() (string, bool) {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				return args[i], true
			}
			return "", false
		}
		switch {
		case strings.HasPrefix(a, "--") && len(a) > 2:
			name, value, has := strings.Cut(a[2:], "=")
			if !has {
				value, has = next()
			}
			c.options = append(c.options, Option{Name: name, Value: value, HasValue: has})
		case len(a) >= 2 && a[0] == '-' && a[1] != '-':
			long, known := shortOptions[a[1]]
			value, has := a[2:], len(a) > 2
			if !has {
				value, has = next()
			}
			if known {
				c.options = append(c.options, Option{Name: long, Value: value, HasValue: has})
			}
		}
	}
	return c
}

// resolveDir makes a directory setting absolute: relative values ("./")
// are relative to the data directory.
func resolveDir(v, datadir string) string {
	v = strings.TrimSpace(v)
	if v == "" || v == "." || v == "./" {
		return path.Clean(datadir)
	}
	if path.IsAbs(v) {
		return path.Clean(v)
	}
	if datadir == "" {
		return ""
	}
	return path.Join(datadir, v)
}
