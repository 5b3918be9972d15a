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
	// Unit is the systemd unit that runs the server ("" none known): what
	// a restart its settings need restarts.
	Unit string
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
// that rendering the same findings twice gives identical files. A value a
// file's format cannot hold safely is left out (see Refused).
func Render(ctx Context, items []Item) []File { return render(ctx, items).files }

// Refused lists what Render leaves out of the files, and why.
func Refused(ctx Context, items []Item) []Refusal { return render(ctx, items).refused }

// Refusal is a setting left out because the format it was to be written in
// cannot hold one of its strings safely.
type Refusal struct {
	// Tags name the findings that want it.
	Tags []string `json:"findings"`
	// What is the setting, its strings quoted and escaped.
	What string `json:"what"`
	// In is the file it was left out of, or the commands.
	In  string `json:"in"`
	Why string `json:"why"`
}

// renderer collects the files and what it refused to write into them.
type renderer struct {
	ctx     Context
	files   []File
	refused []Refusal
}

func render(ctx Context, items []Item) *renderer {
	r := &renderer{ctx: ctx}
	r.add(r.sysctl(items))
	r.add(r.udev(items))
	r.add(r.limits(items))
	r.files = append(r.files, r.dropins(items)...)
	r.add(r.tmpfiles(items))
	r.add(r.cmdline(items))
	if ctx.TunedProfile != "" {
		r.add(r.tuned(items))
	}
	r.files = append(r.files, r.config(items)...)
	r.add(r.mounts(items))
	sort.Slice(r.files, func(a, b int) bool { return r.files[a].Path < r.files[b].Path })
	return r
}

func (r *renderer) add(f File) {
	if f.Content != "" {
		r.files = append(r.files, f)
	}
}

// refuse records that what was left out of in, and why.
func (r *renderer) refuse(in string, tags []string, what string, err error) {
	r.refused = append(r.refused, Refusal{Tags: tags, What: what, In: in, Why: err.Error()})
}

const header = "# Written by dbhost. Each setting names the findings it fixes.\n"

// entry collects, for one key, its value and the findings that want it;
// line is the entry as its file's encoder wrote it.
type entry struct {
	key, value string
	tags       []string
	line       string
	// restart: a database setting the server takes only at a restart.
	restart bool
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

// encode keeps the entries enc accepts, with their lines, and refuses the
// others (kind names them: "sysctl").
func (r *renderer) encode(in, kind string, es []entry, enc func(k, v string) (string, error)) []entry {
	var out []entry
	for _, e := range es {
		l, err := enc(e.key, e.value)
		if err != nil {
			r.refuse(in, e.tags, kvWhat(kind, KV{e.key, e.value}), err)
			continue
		}
		e.line = l
		out = append(out, e)
	}
	return out
}

// writeEntries writes each entry as lead, its findings as a comment and
// its line.
func writeEntries(b *strings.Builder, lead string, es []entry) {
	for _, e := range es {
		b.WriteString(lead + tagsComment(e.tags) + "\n" + e.line + "\n")
	}
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// mergedSysctl is the one value per kernel parameter that both the files
// (sysctl.d, TuneD) and the commands to run now (Runbook) take.
func mergedSysctl(items []Item) []entry {
	return collect(items, func(it Item) []KV { return it.Fix.Sysctl })
}

// mergedSysfs is the one value per /sys knob, for tmpfiles.d and Runbook.
func mergedSysfs(items []Item) []entry {
	return collect(items, func(it Item) []KV { return it.Fix.Sysfs })
}

func (r *renderer) sysctl(items []Item) File {
	const file = "/etc/sysctl.d/" + Name + ".conf"
	es := r.encode(file, "sysctl", mergedSysctl(items), sysctlLine)
	if len(es) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# Apply now with: sysctl --system\n")
	if r.ctx.Container && !allNamespaced(es) {
		b.WriteString("# dbhost ran in a container: install the vm.*, kernel.* and fs.* settings on the container's host.\n")
	}
	if r.ctx.TunedProfile != "" && !r.ctx.TunedReapplySysctl {
		b.WriteString("# TuneD is active and does not re-apply sysctl.d: the same values are in the dbhost TuneD profile.\n")
	}
	writeEntries(&b, "\n", es)
	return File{Path: file, Content: b.String(), Mode: 0o644}
}

// udevDev is one device's merged queue attributes and the findings that
// want any of them.
type udevDev struct {
	attrs map[string]string
	tags  []string
	// attrTags names the findings per attribute (for Runbook).
	attrTags map[string][]string
}

// mergedUdev is the one value per device attribute that both the udev
// rules and Runbook take: the first finding to ask sets it.
func mergedUdev(items []Item) map[string]*udevDev {
	devs := map[string]*udevDev{}
	for _, it := range items {
		for _, u := range it.Fix.Udev {
			d, ok := devs[u.Device]
			if !ok {
				d = &udevDev{attrs: map[string]string{}, attrTags: map[string][]string{}}
				devs[u.Device] = d
			}
			if _, set := d.attrs[u.Attr]; !set {
				d.attrs[u.Attr] = u.Value
			}
			d.tags = appendUnique(d.tags, it.tag())
			d.attrTags[u.Attr] = appendUnique(d.attrTags[u.Attr], it.tag())
		}
	}
	return devs
}

func (r *renderer) udev(items []Item) File {
	const file = "/etc/udev/rules.d/" + Name + ".rules"
	devs := mergedUdev(items)
	var rules []string
	for _, name := range sortedKeys(devs) {
		d := devs[name]
		var attrs []string
		for _, a := range sortedKeys(d.attrs) {
			l, err := udevAttr(a, d.attrs[a])
			if err = firstErr(udevDevice(name), err); err != nil {
				r.refuse(file, d.tags, udevWhat(UdevAttr{name, a, d.attrs[a]}), err)
				continue
			}
			attrs = append(attrs, l)
		}
		if len(attrs) > 0 {
			rules = append(rules, fmt.Sprintf("\n%s\nACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"%s\"%s\n", tagsComment(d.tags), name, strings.Join(attrs, "")))
		}
	}
	if len(rules) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# Apply now with: udevadm control --reload && udevadm trigger --subsystem-match=block --action=change\n")
	b.WriteString("# Kernel names can change between boots when disks are added; match on ENV{ID_SERIAL} if yours do.\n")
	b.WriteString(strings.Join(rules, ""))
	return File{Path: file, Content: b.String(), Mode: 0o644}
}

func (r *renderer) limits(items []Item) File {
	const file = "/etc/security/limits.d/" + Name + ".conf"
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
	var lines []string
	for _, k := range sortedKeys(idx) {
		e := idx[k]
		l, err := limitsLine(e.l)
		if err != nil {
			r.refuse(file, e.tags, "limit "+quote(e.l.Domain)+" "+quote(e.l.Type)+" "+quote(e.l.Item)+" "+quote(e.l.Value), err)
			continue
		}
		lines = append(lines, "\n"+tagsComment(e.tags)+"\n"+l+"\n")
	}
	if len(lines) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# pam_limits applies these to logins and to services started outside systemd;\n")
	b.WriteString("# systemd services need the LimitXXX= drop-ins written next to this file.\n")
	b.WriteString(strings.Join(lines, ""))
	return File{Path: file, Content: b.String(), Mode: 0o644}
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

func (r *renderer) dropins(items []Item) []File {
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
		file := "/etc/systemd/system/" + u + ".d/" + Name + ".conf"
		var sections []string
		for _, s := range sortedKeys(units[u]) {
			var es []entry
			for _, k := range sortedKeys(units[u][s]) {
				es = append(es, *units[u][s][k])
			}
			enc := func(k, v string) (string, error) {
				l, err := unitLine(k, v)
				return encoded(l, unitName(u), iniName(s), err)
			}
			es = r.encode(file, "unit setting "+quote(u)+" ["+quote(s)+"]", es, enc)
			if len(es) == 0 {
				continue
			}
			var b strings.Builder
			fmt.Fprintf(&b, "\n[%s]\n", s)
			writeEntries(&b, "", es)
			sections = append(sections, b.String())
		}
		if len(sections) == 0 {
			continue
		}
		var b strings.Builder
		b.WriteString(header)
		fmt.Fprintf(&b, "# Read when %s starts; systemctl daemon-reload makes systemd see it (see the finding for what applies it now).\n", u)
		b.WriteString(strings.Join(sections, ""))
		files = append(files, File{Path: file, Content: b.String(), Mode: 0o644})
	}
	return files
}

// tmpfiles persists /sys knobs (THP defrag, khugepaged) that have no kernel
// parameter: systemd-tmpfiles writes them early at every boot.
func (r *renderer) tmpfiles(items []Item) File {
	const file = "/etc/tmpfiles.d/" + Name + ".conf"
	es := r.encode(file, "sysfs", mergedSysfs(items), tmpfilesLine)
	if len(es) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# systemd-tmpfiles writes these /sys values at every boot. Apply now with:\n")
	b.WriteString("#   systemd-tmpfiles --create " + file + "\n")
	writeEntries(&b, "\n", es)
	return File{Path: file, Content: b.String(), Mode: 0o644}
}

// cmdline writes a GRUB drop-in (Debian and Ubuntu read
// /etc/default/grub.d/*.cfg); RHEL-family hosts use grubby instead.
func (r *renderer) cmdline(items []Item) File {
	const file = "/etc/default/grub.d/" + Name + ".cfg"
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
	sort.Strings(params)
	var ok []string
	for _, p := range params {
		if err := kernelParam(p); err != nil {
			r.refuse(file, tags[p], "kernel parameter "+quote(p), err)
			continue
		}
		ok = append(ok, p)
	}
	if len(ok) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	for _, p := range ok {
		fmt.Fprintf(&b, "# %s: %s\n", p, comment(strings.Join(tags[p], ", ")))
	}
	b.WriteString("# Then run update-grub and reboot. On RHEL-family hosts instead run:\n")
	fmt.Fprintf(&b, "#   grubby --update-kernel=ALL --args=\"%s\"\n", strings.Join(ok, " "))
	fmt.Fprintf(&b, "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX %s\"\n", strings.Join(ok, " "))
	return File{Path: file, Content: b.String(), Mode: 0o644}
}

// tuned writes a child TuneD profile that includes the active one and
// overrides what the findings need, so TuneD stops re-applying bad values.
func (r *renderer) tuned(items []Item) File {
	const file = "/etc/tuned/dbhost/tuned.conf"
	ctx := r.ctx
	sys := mergedSysctl(items)
	var thp []entry
	for _, it := range items {
		for _, kv := range it.Fix.Sysfs {
			if kv.Key == "/sys/kernel/mm/transparent_hugepage/enabled" && len(thp) == 0 {
				thp = []entry{{key: "transparent_hugepages", value: kv.Value, tags: []string{it.tag()}}}
			}
		}
	}
	disk := collect(items, func(it Item) []KV { return it.Fix.TunedDisk })
	include := ctx.TunedInclude
	if include == "" && ctx.TunedProfile != "dbhost" {
		include = ctx.TunedProfile
	}
	if include != "" {
		if err := tunedName(include); err != nil {
			r.refuseAll(file, "TuneD profile "+quote(include), err, sys, thp, disk)
			return File{}
		}
	}
	thp = r.encode(file, "TuneD [vm]", thp, func(k, v string) (string, error) { return tunedLine(k, v, iniName) })
	disk = r.encode(file, "TuneD [disk]", disk, func(k, v string) (string, error) { return tunedLine(k, v, iniName) })
	sys = r.encode(file, "sysctl", sys, func(k, v string) (string, error) { return tunedLine(k, v, sysctlName) })
	if len(sys) == 0 && len(thp) == 0 && len(disk) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "# TuneD profile %q is active and re-applies its values at every start.\n", ctx.TunedProfile)
	b.WriteString("# Activate this child profile with: tuned-adm profile dbhost\n")
	if include != "" {
		fmt.Fprintf(&b, "\n[main]\nsummary=%s with dbhost's database fixes\ninclude=%s\n", include, include)
	} else {
		b.WriteString("\n[main]\nsummary=dbhost's database fixes\n")
	}
	if len(thp) > 0 {
		fmt.Fprintf(&b, "\n[vm]\n%s\n", thp[0].line)
	}
	if len(disk) > 0 {
		b.WriteString("\n[disk]\n")
		writeEntries(&b, "", disk)
	}
	if len(sys) > 0 {
		b.WriteString("\n[sysctl]\n")
		writeEntries(&b, "", sys)
	}
	return File{Path: file, Content: b.String(), Mode: 0o644}
}

// refuseAll refuses a whole file: every entry of every group.
func (r *renderer) refuseAll(in, what string, err error, groups ...[]entry) {
	var tags []string
	for _, es := range groups {
		for _, e := range es {
			for _, t := range e.tags {
				tags = appendUnique(tags, t)
			}
		}
	}
	if len(tags) > 0 {
		r.refuse(in, tags, what, err)
	}
}

// config writes one snippet per database instance into the directory the
// server includes, or next to its main file with a note to include it.
// configMerge is the one value per instance and setting that both the
// snippets and Runbook take: the first finding to ask sets it.
type configMerge struct {
	byInst   map[string][]entry
	restart  map[string]bool // an instance has a setting that needs a restart
	engineOf map[string]string
}

func mergedConfig(items []Item) configMerge {
	m := configMerge{byInst: map[string][]entry{}, restart: map[string]bool{}, engineOf: map[string]string{}}
	for _, it := range items {
		for _, c := range it.Fix.Config {
			es := m.byInst[c.Instance]
			found := false
			for i := range es {
				if es[i].key == c.Key {
					es[i].tags = appendUnique(es[i].tags, it.tag())
					es[i].restart = es[i].restart || c.Restart
					found = true
				}
			}
			if !found {
				es = append(es, entry{key: c.Key, value: c.Value, tags: []string{it.tag()}, restart: c.Restart})
			}
			m.byInst[c.Instance] = es
			m.restart[c.Instance] = m.restart[c.Instance] || c.Restart
			m.engineOf[c.Instance] = c.Engine
		}
	}
	return m
}

func (r *renderer) config(items []Item) []File {
	m := mergedConfig(items)
	byInst, restart, engineOf := m.byInst, m.restart, m.engineOf
	var files []File
	for _, inst := range sortedKeys(byInst) {
		es := byInst[inst]
		sort.Slice(es, func(a, b int) bool { return es[a].key < es[b].key })
		info, known := r.ctx.Instances[inst]
		if known && info.NoConfig {
			continue // the finding's Manual says where the setting goes instead
		}
		eng := engineOf[inst]
		var refused []Refusal
		sn := engine.Snippet{Instance: inst, Dir: info.ConfDir, File: info.ConfFile, Name: ConfigName, Restart: restart[inst],
			Refuse: func(e engine.SnippetEntry, why string) {
				refused = append(refused, Refusal{Tags: e.Tags, What: "setting " + quote(e.Key) + " = " + quote(e.Value) + " of " + quote(inst), Why: why})
			}}
		for _, e := range es {
			sn.Entries = append(sn.Entries, engine.SnippetEntry{Key: e.key, Value: e.value, Tags: e.tags})
		}
		p, text := engine.ProfileOf(engine.Engine(eng)).ConfigSnippet(sn)
		for _, rf := range refused {
			rf.In = p
			r.refused = append(r.refused, rf)
		}
		if len(refused) == len(es) {
			continue
		}
		var b strings.Builder
		b.WriteString(header)
		fmt.Fprintf(&b, "# Settings for %s.\n", comment(inst))
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
