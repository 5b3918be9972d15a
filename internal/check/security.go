package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

func init() {
	Register(Check{
		ID:        "security.mac",
		Title:     "Mandatory access control (SELinux or AppArmor) is enforcing",
		Problem:   "Mandatory access control (SELinux or AppArmor) is not enforcing",
		Severity:  Warning,
		AppliesTo: []string{"host", "selinux"},
		Doc: `Reads /sys/fs/selinux/enforce and SELINUX= in /etc/selinux/config (what the next
boot uses), and /sys/module/apparmor/parameters/enabled with the loaded profiles
(/sys/kernel/security/apparmor/profiles, root only). SELinux enforcing (RHEL family)
or AppArmor enabled (Debian, Ubuntu, SUSE) confines a compromised database server to
its own files and ports. Permissive mode only logs denials. With non-default paths,
label them rather than turning MAC off: denials are in the audit log, and a minimal
policy module can be built in permissive mode first, then enforced.`,
		Refs: []string{"https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/9/html/using_selinux/index", "https://wiki.debian.org/AppArmor"},
		Run:  checkMAC,
	})
	Register(Check{
		ID:        "security.selinux_labels",
		Title:     "Data directories carry the database's SELinux type",
		Problem:   "Data directories lack the database's SELinux type",
		Severity:  Warning,
		AppliesTo: []string{"selinux", "postgres", "mysql", "mongodb", "redis", "galera"},
		Doc: `With SELinux on, reads the security.selinux label of each data directory. The
confined server may only use files of its type: postgresql_db_t, mysqld_db_t,
mongod_var_lib_t, redis_var_lib_t. The policy labels the default paths; a data
directory moved elsewhere (/data/pgsql) keeps default_t or var_t, and the server
fails to start or write under enforcing. The fix records the path in the policy with
semanage fcontext and relabels it with restorecon (a plain chcon is lost at the next
relabel). Galera's ports 4567, 4568 and 4444 must likewise be mysqld_port_t
(semanage port).`,
		Refs: []string{"https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/9/html/using_selinux/configuring-selinux-for-applications-and-services-with-non-standard-configurations_using-selinux"},
		Run:  checkSELinuxLabels,
	})
	Register(Check{
		ID:        "security.db_as_root",
		Title:     "Database servers do not run as root",
		Problem:   "A database server runs as root",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads the effective user of each server process. A database server running as
root turns any server-side compromise into root on the host: Redis can be told to
write its dump file anywhere (CONFIG SET dir/dbfilename), MySQL reads and writes
files with LOAD DATA/SELECT INTO OUTFILE. Run it as its service user (postgres,
mysql, mongodb, redis); the distributions' units do. PostgreSQL refuses to run as
root by itself.`,
		Refs: []string{"https://redis.io/docs/latest/operate/oss_and_stack/management/security/", "https://dev.mysql.com/doc/refman/8.0/en/changing-mysql-user.html"},
		Run:  checkDBAsRoot,
	})
}

func checkMAC(f *facts.Facts) []Result {
	se, aa := f.Security.SELinux, f.Security.AppArmor
	ev := []Evidence{EvReading("SELinux enforce", se.Enforce), EvReading("SELinux config", se.Config), EvReading("AppArmor enabled", aa.Enabled)}
	hostOnly := f.System.Container != ""
	note := ""
	if hostOnly {
		note = " dbhost runs in a container: the mandatory access control that matters is the host's (and the runtime's profile for the container)."
	}
	if !se.Enforce.OK() && !aa.Enabled.OK() && !strings.HasSuffix(se.Enforce.Err, "not present on this host") && !strings.HasSuffix(aa.Enabled.Err, "not present on this host") {
		return []Result{UnknownR(SubjectHost, "cannot tell whether SELinux or AppArmor is active: "+se.Enforce.Err+"; "+aa.Enabled.Err, ev...)}
	}
	switch se.Mode() {
	case "enforcing":
		if se.Config.OK() && se.Config.Value != "enforcing" {
			return []Result{FailR(SubjectHost, fmt.Sprintf("SELinux is enforcing now, but /etc/selinux/config says SELINUX=%s: the next boot turns enforcement off.%s", se.Config.Value, note),
				&fix.Fix{Summary: "Keep SELinux enforcing after reboot", Manual: "Set SELINUX=enforcing in /etc/selinux/config.", HostOnly: hostOnly}, ev...)}
		}
		return []Result{PassR(SubjectHost, "SELinux is enforcing."+note, ev...)}
	case "permissive":
		return []Result{FailR(SubjectHost, "SELinux is permissive: it logs what it would deny and enforces nothing, so a compromised server is not confined. Review the denials (ausearch -m avc), label non-default paths, then enforce."+note,
			&fix.Fix{Summary: "Enforce SELinux", Runtime: []string{"setenforce 1"}, Manual: "After fixing the denials in the audit log, run setenforce 1 and set SELINUX=enforcing in /etc/selinux/config.", HostOnly: hostOnly}, ev...)}
	}
	if aa.On() {
		var dbProfiles []string
		for name, mode := range aa.Profiles {
			if dbProfile(name) {
				dbProfiles = append(dbProfiles, name+" ("+mode+")")
			}
		}
		sort.Strings(dbProfiles)
		reason := "AppArmor is enabled."
		switch {
		case len(dbProfiles) > 0:
			ev = append(ev, Ev("database profiles", strings.Join(dbProfiles, ", "), "/sys/kernel/security/apparmor/profiles"))
			reason += " Database profiles loaded: " + strings.Join(dbProfiles, ", ") + "."
		case aa.ProfilesErr != "":
			reason += " Its profiles could not be listed (" + aa.ProfilesErr + ")."
		case aa.Profiles != nil:
			reason += fmt.Sprintf(" None of its %d loaded profiles confines a database server; the distributions ship one for mysqld (apparmor-profiles).", len(aa.Profiles))
		}
		return []Result{PassR(SubjectHost, reason+note, ev...)}
	}
	return []Result{FailR(SubjectHost, "Neither SELinux nor AppArmor is active: nothing confines a compromised database server to its own files and ports."+note,
		&fix.Fix{Summary: "Enable mandatory access control", Manual: macAdvice(f), HostOnly: hostOnly}, ev...)}
}

func macAdvice(f *facts.Facts) string {
	like := f.System.OSID + " " + f.System.OSLike
	switch {
	case strings.Contains(like, "rhel") || strings.Contains(like, "fedora") || strings.Contains(like, "centos"):
		return "Set SELINUX=permissive in /etc/selinux/config, touch /.autorelabel and reboot; fix the denials in the audit log, then set SELINUX=enforcing."
	case strings.Contains(like, "debian") || strings.Contains(like, "ubuntu") || strings.Contains(like, "suse"):
		return "Install apparmor (and apparmor-profiles), boot with apparmor=1 security=apparmor if the kernel does not enable it by default, and load the profiles (aa-enforce)."
	}
	return "Enable SELinux (RHEL family) or AppArmor (Debian, Ubuntu, SUSE) and confine the database servers."
}

// dbProfile recognises AppArmor profiles of database servers.
func dbProfile(name string) bool {
	for _, s := range []string{"mysqld", "mariadbd", "postgres", "mongod", "redis"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// selinuxTypes are the file types each engine's policy module grants.
var selinuxTypes = map[engine.Engine]string{
	engine.Postgres: "postgresql_db_t",
	engine.MySQL:    "mysqld_db_t",
	engine.MongoDB:  "mongod_var_lib_t",
	engine.Redis:    "redis_var_lib_t",
}

// selinuxDefaultDirs are the data directories the policies label already.
var selinuxDefaultDirs = map[engine.Engine][]string{
	engine.Postgres: {"/var/lib/pgsql", "/var/lib/postgresql"},
	engine.MySQL:    {"/var/lib/mysql"},
	engine.MongoDB:  {"/var/lib/mongo", "/var/lib/mongodb"},
	engine.Redis:    {"/var/lib/redis"},
}

func checkSELinuxLabels(f *facts.Facts) []Result {
	mode := f.Security.SELinux.Mode()
	if mode == "disabled" {
		return nil
	}
	var out []Result
	for _, in := range f.Instances {
		want, ok := selinuxTypes[in.Engine]
		if !ok || in.DataDir == "" {
			continue
		}
		subj := in.Name()
		ev := []Evidence{EvReading("data directory label", in.DataLabel), Ev("SELinux", mode, f.Security.SELinux.Enforce.Source)}
		if !in.DataLabel.OK() {
			out = append(out, UnknownR(subj, "cannot read the SELinux label of "+in.DataDir+": "+in.DataLabel.Err, ev...))
			continue
		}
		parts := strings.Split(in.DataLabel.Value, ":")
		if len(parts) >= 3 && parts[2] == want {
			out = append(out, PassR(subj, fmt.Sprintf("%s is labelled %s, the type the %s policy grants.", in.DataDir, want, in.Flavor), ev...))
			continue
		}
		got := in.DataLabel.Value
		if len(parts) >= 3 {
			got = parts[2]
		}
		def := false
		for _, d := range selinuxDefaultDirs[in.Engine] {
			if in.DataDir == d || strings.HasPrefix(in.DataDir, d+"/") {
				def = true
			}
		}
		steps := fmt.Sprintf("restorecon -Rv %s", in.DataDir)
		why := fmt.Sprintf("%s has type %s, not %s: ", in.DataDir, got, want)
		if def {
			why += "the policy labels this default path correctly, so the files were copied or created without relabelling. restorecon restores the policy's label."
		} else {
			steps = fmt.Sprintf("semanage fcontext -a -t %s \"%s(/.*)?\" && %s", want, strings.TrimSuffix(in.DataDir, "/"), steps)
			why += "a data directory outside the default path keeps a generic type, and the confined server is denied access to it"
			if mode == "enforcing" {
				why += " (it fails to start or to write)."
			} else {
				why += " as soon as SELinux enforces."
			}
			why += " Record the path in the policy with semanage fcontext, then relabel."
		}
		if in.MySQL != nil && in.MySQL.Galera {
			steps += "; semanage port -a -t mysqld_port_t -p tcp 4567; semanage port -a -t mysqld_port_t -p tcp 4568; semanage port -a -t mysqld_port_t -p tcp 4444"
			why += " Galera's ports 4567, 4568 and 4444 must be mysqld_port_t too."
		}
		out = append(out, FailR(subj, why, &fix.Fix{Summary: "Label " + in.DataDir + " " + want, Manual: steps}, ev...))
	}
	return out
}

func checkDBAsRoot(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		subj := in.Name()
		ev := []Evidence{Ev("user", fmt.Sprintf("%s (uid %d)", hostOr(in.User, "?"), in.UID), fmt.Sprintf("/proc/%d/status", in.PID))}
		if in.UID != 0 {
			out = append(out, PassR(subj, fmt.Sprintf("The server runs as %s, not root.", hostOr(in.User, fmt.Sprint(in.UID))), ev...))
			continue
		}
		user := secServiceUser(in)
		why := fmt.Sprintf("%s runs as root: whoever gets control of the server gets the host.", limPidDesc(in))
		if r := in.Profile().RootRisk(); r != "" {
			why += " " + r
		}
		fx := &fix.Fix{Summary: "Run " + in.Name() + " as " + user}
		manual := fmt.Sprintf("Stop the server, chown -R %s: the data directory%s, and start it as %s", user, secDirSuffix(in.DataDir), user)
		if u := dropinUnit(in); u != "" {
			fx.Dropins = []fix.Dropin{{Unit: u, Section: "Service", Key: "User", Value: user}, {Unit: u, Section: "Service", Key: "Group", Value: user}}
			manual += " through " + u + "."
		} else {
			manual += " (User= in its systemd unit, or runuser -u " + user + " -- in its start script)."
		}
		fx.Manual = manual
		out = append(out, FailR(subj, why, fx, ev...))
	}
	return out
}

func secDirSuffix(d string) string {
	if d == "" {
		return ""
	}
	return " (" + d + ")"
}

// secServiceUser is the account distributions create for an engine.
func secServiceUser(in *facts.Instance) string {
	if a := in.Profile().ServiceAccounts(); len(a) > 0 {
		return a[0]
	}
	return string(in.Engine)
}
