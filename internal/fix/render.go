package fix

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Name is the stem of the system files dbhost writes; 60 orders it after
// distribution defaults (10-50) and before local overrides (99).
const Name = "60-dbhost"

// ConfigName is the stem of database configuration snippets. Servers read
// included directories in name order and the last value wins, so the snippet
// must sort after every packaged file (60-galera.cnf, mysqld.cnf).
const ConfigName = "zz-dbhost"

// Context is what rendering needs to know about the host.
type Context struct {
	// TunedProfile is the active TuneD profile, if any; TuneD re-applies
	// its own values, so fixes also go into a child profile.
	TunedProfile string
	// TunedInclude is the profile the child profile includes: the active
	// one, or, when dbhost's own profile is already active, its parent.
	TunedInclude string
	// TunedReapplySysctl: TuneD re-reads sysctl.d after its profile (its
	// default), so sysctl.d wins for sysctls.
	TunedReapplySysctl bool
	// Container: dbhost runs in a container; kernel settings belong on the
	// host.
	Container bool
	// Systemd: PID 1 is systemd, so systemctl can reload and restart
	// units; elsewhere no systemctl step is offered.
	Systemd bool
	// Fstab is /etc/fstab as read (its Err says why it could not be), to
	// render the exact line a mount change edits.
	Fstab host.Reading
	// Instances describes each database instance by name.
	Instances map[string]InstanceInfo
}

// InstanceInfo tells where an instance's configuration snippet belongs.
type InstanceInfo struct {
	Engine string
	// ConfDir is a directory the server includes (conf.d), if any;
	// ConfFile is its main configuration file.
	ConfDir  string
	ConfFile string
	// NoConfig: the server reads no configuration file, so no snippet
	// can reach it.
	NoConfig bool
}

// Item is one finding's fix, with the finding's identity for comments.
type Item struct {
	ID      string
	Subject string
	Fix     *Fix
}

func (it Item) tag() string {
	if it.Subject == "" || it.Subject == "host" {
		return it.ID
	}
	return it.ID + " (" + it.Subject + ")"
}

// Render turns fixes into persistent files, merged per file and sorted so
// that rendering the same findings twice gives identical files.
func Render(ctx Context, items []Item) []File {
	var files []File
	add := func(f File) {
		if f.Content != "" {
			files = append(files, f)
		}
	}
	add(renderSysctl(ctx, items))
	add(renderUdev(items))
	add(renderLimits(items))
	files = append(files, renderDropins(items)...)
	add(renderTmpfiles(items))
	add(renderCmdline(items))
	if ctx.TunedProfile != "" {
		add(renderTuned(ctx, items))
	}
	files = append(files, renderConfig(ctx, items)...)
	add(renderMounts(ctx, items))
	sort.Slice(files, func(a, b int) bool { return files[a].Path < files[b].Path })
	return files
}

const header = "# Written by dbhost. Each setting names the findings it fixes.\n"

// entry collects, for one key, its value and the findings that want it.
type entry struct {
	key, value string
	tags       []string
}

func collect(items []Item, get func(Item) []KV) []entry {
	idx := map[string]*entry{}
	var order []string
	for _, it := range items {
		for _, kv := range get(it) {
			e, ok := idx[kv.Key]
			if !ok {
				e = &entry{key: kv.Key, value: kv.Value}
				idx[kv.Key] = e
				order = append(order, kv.Key)
			}
			// The first finding to ask sets the value; findings are
			// ordered by severity, so the most severe one wins a conflict.
			e.tags = appendUnique(e.tags, it.tag())
		}
	}
	sort.Strings(order)
	out := make([]entry, 0, len(order))
	for _, k := range order {
		out = append(out, *idx[k])
	}
	return out
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func renderSysctl(ctx Context, items []Item) File {
	es := collect(items, func(it Item) []KV { return it.Fix.Sysctl })
	if len(es) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# Apply now with: sysctl --system\n")
	if ctx.Container && !allNamespaced(es) {
		b.WriteString("# dbhost ran in a container: install the vm.*, kernel.* and fs.* settings on the container's host.\n")
	}
	if ctx.TunedProfile != "" && !ctx.TunedReapplySysctl {
		b.WriteString("# TuneD is active and does not re-apply sysctl.d: the same values are in the dbhost TuneD profile.\n")
	}
	for _, e := range es {
		fmt.Fprintf(&b, "\n# %s\n%s = %s\n", strings.Join(e.tags, ", "), e.key, e.value)
	}
	return File{Path: "/etc/sysctl.d/" + Name + ".conf", Content: b.String(), Mode: 0o644}
}

func renderUdev(items []Item) File {
	type dev struct {
		attrs map[string]string
		tags  []string
	}
	devs := map[string]*dev{}
	for _, it := range items {
		for _, u := range it.Fix.Udev {
			d, ok := devs[u.Device]
			if !ok {
				d = &dev{attrs: map[string]string{}}
				devs[u.Device] = d
			}
			if _, set := d.attrs[u.Attr]; !set {
				d.attrs[u.Attr] = u.Value
			}
			d.tags = appendUnique(d.tags, it.tag())
		}
	}
	if len(devs) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# Apply now with: udevadm control --reload && udevadm trigger --subsystem-match=block --action=change\n")
	b.WriteString("# Kernel names can change between boots when disks are added; match on ENV{ID_SERIAL} if yours do.\n")
	for _, name := range sortedKeys(devs) {
		d := devs[name]
		fmt.Fprintf(&b, "\n# %s\nACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"%s\"", strings.Join(d.tags, ", "), name)
		for _, a := range sortedKeys(d.attrs) {
			fmt.Fprintf(&b, ", ATTR{%s}=\"%s\"", a, d.attrs[a])
		}
		b.WriteString("\n")
	}
	return File{Path: "/etc/udev/rules.d/" + Name + ".rules", Content: b.String(), Mode: 0o644}
}

func renderLimits(items []Item) File {
	type line struct {
		l    LimitLine
		tags []string
	}
	idx := map[string]*line{}
	for _, it := range items {
		for _, l := range it.Fix.Limits {
			k := l.Domain + " " + l.Type + " " + l.Item
			if e, ok := idx[k]; ok {
				// Servers of one user share its limit: the largest need wins.
				if larger(l.Value, e.l.Value) {
					e.l.Value = l.Value
				}
				e.tags = appendUnique(e.tags, it.tag())
				continue
			}
			idx[k] = &line{l: l, tags: []string{it.tag()}}
		}
	}
	if len(idx) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# pam_limits applies these to logins and to services started outside systemd;\n")
	b.WriteString("# systemd services need the LimitXXX= drop-ins written next to this file.\n")
	for _, k := range sortedKeys(idx) {
		e := idx[k]
		fmt.Fprintf(&b, "\n# %s\n%-12s %-5s %-8s %s\n", strings.Join(e.tags, ", "), e.l.Domain, e.l.Type, e.l.Item, e.l.Value)
	}
	return File{Path: "/etc/security/limits.d/" + Name + ".conf", Content: b.String(), Mode: 0o644}
}

// larger reports whether limit value a exceeds b ("unlimited" exceeds
// every number; what is not a number never wins).
func larger(a, b string) bool {
	if b == "unlimited" || b == "infinity" {
		return false
	}
	if a == "unlimited" || a == "infinity" {
		return true
	}
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

func renderDropins(items []Item) []File {
	units := map[string]map[string]map[string]*entry{} // unit → section → key
	for _, it := range items {
		for _, d := range it.Fix.Dropins {
			secs, ok := units[d.Unit]
			if !ok {
				secs = map[string]map[string]*entry{}
				units[d.Unit] = secs
			}
			keys, ok := secs[d.Section]
			if !ok {
				keys = map[string]*entry{}
				secs[d.Section] = keys
			}
			e, ok := keys[d.Key]
			if !ok {
				e = &entry{key: d.Key, value: d.Value}
				keys[d.Key] = e
			}
			e.tags = appendUnique(e.tags, it.tag())
		}
	}
	var files []File
	for _, u := range sortedKeys(units) {
		var b strings.Builder
		b.WriteString(header)
		fmt.Fprintf(&b, "# Read when %s starts; systemctl daemon-reload makes systemd see it (see the finding for what applies it now).\n", u)
		for _, s := range sortedKeys(units[u]) {
			fmt.Fprintf(&b, "\n[%s]\n", s)
			keys := units[u][s]
			for _, k := range sortedKeys(keys) {
				e := keys[k]
				fmt.Fprintf(&b, "# %s\n%s=%s\n", strings.Join(e.tags, ", "), e.key, e.value)
			}
		}
		files = append(files, File{Path: "/etc/systemd/system/" + u + ".d/" + Name + ".conf", Content: b.String(), Mode: 0o644})
	}
	return files
}

// renderTmpfiles persists /sys knobs (THP defrag, khugepaged) that have no
// kernel parameter: systemd-tmpfiles writes them early at every boot.
func renderTmpfiles(items []Item) File {
	es := collect(items, func(it Item) []KV { return it.Fix.Sysfs })
	if len(es) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# systemd-tmpfiles writes these /sys values at every boot. Apply now with:\n")
	b.WriteString("#   systemd-tmpfiles --create " + "/etc/tmpfiles.d/" + Name + ".conf\n")
	for _, e := range es {
		fmt.Fprintf(&b, "\n# %s\nw %s - - - - %s\n", strings.Join(e.tags, ", "), e.key, e.value)
	}
	return File{Path: "/etc/tmpfiles.d/" + Name + ".conf", Content: b.String(), Mode: 0o644}
}

// renderCmdline writes a GRUB drop-in (Debian and Ubuntu read
// /etc/default/grub.d/*.cfg); RHEL-family hosts use grubby instead.
func renderCmdline(items []Item) File {
	var params []string
	tags := map[string][]string{}
	for _, it := range items {
		for _, p := range it.Fix.Cmdline {
			if _, ok := tags[p]; !ok {
				params = append(params, p)
			}
			tags[p] = appendUnique(tags[p], it.tag())
		}
	}
	if len(params) == 0 {
		return File{}
	}
	sort.Strings(params)
	var b strings.Builder
	b.WriteString(header)
	for _, p := range params {
		fmt.Fprintf(&b, "# %s: %s\n", p, strings.Join(tags[p], ", "))
	}
	b.WriteString("# Then run update-grub and reboot. On RHEL-family hosts instead run:\n")
	fmt.Fprintf(&b, "#   grubby --update-kernel=ALL --args=\"%s\"\n", strings.Join(params, " "))
	fmt.Fprintf(&b, "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX %s\"\n", strings.Join(params, " "))
	return File{Path: "/etc/default/grub.d/" + Name + ".cfg", Content: b.String(), Mode: 0o644}
}

// renderTuned writes a child TuneD profile that includes the active one and
// overrides what the findings need, so TuneD stops re-applying bad values.
func renderTuned(ctx Context, items []Item) File {
	sys := collect(items, func(it Item) []KV { return it.Fix.Sysctl })
	var thp string
	for _, it := range items {
		for _, kv := range it.Fix.Sysfs {
			if kv.Key == "/sys/kernel/mm/transparent_hugepage/enabled" && thp == "" {
				thp = kv.Value
			}
		}
	}
	disk := collect(items, func(it Item) []KV { return it.Fix.TunedDisk })
	if len(sys) == 0 && thp == "" && len(disk) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "# TuneD profile %q is active and re-applies its values at every start.\n", ctx.TunedProfile)
	b.WriteString("# Activate this child profile with: tuned-adm profile dbhost\n")
	include := ctx.TunedInclude
	if include == "" && ctx.TunedProfile != "dbhost" {
		include = ctx.TunedProfile
	}
	if include != "" {
		fmt.Fprintf(&b, "\n[main]\nsummary=%s with dbhost's database fixes\ninclude=%s\n", include, include)
	} else {
		b.WriteString("\n[main]\nsummary=dbhost's database fixes\n")
	}
	if thp != "" {
		fmt.Fprintf(&b, "\n[vm]\ntransparent_hugepages=%s\n", thp)
	}
	if len(disk) > 0 {
		b.WriteString("\n[disk]\n")
		for _, e := range disk {
			fmt.Fprintf(&b, "# %s\n%s=%s\n", strings.Join(e.tags, ", "), e.key, e.value)
		}
	}
	if len(sys) > 0 {
		b.WriteString("\n[sysctl]\n")
		for _, e := range sys {
			fmt.Fprintf(&b, "# %s\n%s=%s\n", strings.Join(e.tags, ", "), e.key, e.value)
		}
	}
	return File{Path: "/etc/tuned/dbhost/tuned.conf", Content: b.String(), Mode: 0o644}
}

// renderConfig writes one snippet per database instance into the directory
// the server includes, or next to its main file with a note to include it.
func renderConfig(ctx Context, items []Item) []File {
	byInst := map[string][]entry{}
	restart := map[string]bool{}
	engineOf := map[string]string{}
	for _, it := range items {
		for _, c := range it.Fix.Config {
			es := byInst[c.Instance]
			found := false
			for i := range es {
				if es[i].key == c.Key {
					es[i].tags = appendUnique(es[i].tags, it.tag())
					found = true
				}
			}
			if !found {
				es = append(es, entry{key: c.Key, value: c.Value, tags: []string{it.tag()}})
			}
			byInst[c.Instance] = es
			restart[c.Instance] = restart[c.Instance] || c.Restart
			engineOf[c.Instance] = c.Engine
		}
	}
	var files []File
	for _, inst := range sortedKeys(byInst) {
		es := byInst[inst]
		sort.Slice(es, func(a, b int) bool { return es[a].key < es[b].key })
		info, known := ctx.Instances[inst]
		if known && info.NoConfig {
			continue // the finding's Manual says where the setting goes instead
		}
		eng := engineOf[inst]
		var b strings.Builder
		b.WriteString(header)
		fmt.Fprintf(&b, "# Settings for %s.\n", inst)
		sn := engine.Snippet{Instance: inst, Dir: info.ConfDir, File: info.ConfFile, Name: ConfigName, Restart: restart[inst]}
		for _, e := range es {
			sn.Entries = append(sn.Entries, engine.SnippetEntry{Key: e.key, Value: e.value, Tags: e.tags})
		}
		p, text := engine.ProfileOf(engine.Engine(eng)).ConfigSnippet(sn)
		b.WriteString(text)
		files = append(files, File{Path: p, Content: b.String(), Mode: 0o640})
	}
	return files
}

// allNamespaced reports whether every sysctl is per network namespace
// (net.*), so a container can set them itself.
func allNamespaced(es []entry) bool {
	for _, e := range es {
		if !strings.HasPrefix(e.key, "net.") {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
