package plan

import (

	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/fix"
)

// A setting is one thing on the host that takes one value: a kernel
// parameter, a sysfs knob, a device attribute, a database setting of one
// server, a limit. Two fixes that want different values for one setting
// cannot both be right; the plan either keeps one value by a rule that
// satisfies both (capacities: the larger covers the smaller) or applies
// neither.

// want is one fix's wish for a setting.
type want struct {
	item  int // index into the items
	value string
}

// Conflict is a setting two or more findings want different values for.
type Conflict struct {
	// Setting names it: "sysctl vm.swappiness", "postgres:5432 shared_buffers".
	Setting string `json:"setting"`
	// Wishes maps each finding ("mem.swap", "redis.maxmemory (redis:6379)")
	// to the value it wants.
	Wishes map[string]string `json:"wishes"`
	// Kept is the value the plan keeps when one value satisfies every
	// wish (the largest of capacities); "" when the plan applies none and
	// the findings stay failing.
	Kept string `json:"kept,omitempty"`
}

func (c Conflict) String() string {
	keys := make([]string, 0, len(c.Wishes))
	for k := range c.Wishes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ws []string
	for _, k := range keys {
		ws = append(ws, k+" wants "+c.Wishes[k])
	}
	s := c.Setting + ": " + strings.Join(ws, ", ")
	if c.Kept != "" {
		return s + "; the plan keeps " + c.Kept + ", which covers every wish"
	}
	return s + "; the plan applies neither, and these findings stay failing"
}

// settingsOf lists the settings a fix changes, keyed by the setting's name,
// with the value it wants. Runtime commands and manual steps are not
// settings: they are shown, never merged.
func settingsOf(f *fix.Fix) map[string]string {
	out := map[string]string{}
	for _, kv := range f.Sysctl {
		out["sysctl "+kv.Key] = kv.Value
	}
	for _, kv := range f.Sysfs {
		out["sysfs "+kv.Key] = kv.Value
	}
	for _, u := range f.Udev {
		out["device "+u.Device+" "+u.Attr] = u.Value
	}
	for _, kv := range f.TunedDisk {
		out["tuned disk "+kv.Key] = kv.Value
	}
	for _, c := range f.Config {
		out[c.Instance+" "+c.Key] = c.Value
	}
	for _, l := range f.Limits {
		out["limits.d "+l.Domain+" "+l.Type+" "+l.Item] = l.Value
	}
	for _, d := range f.Dropins {
		out["unit "+d.Unit+" ["+d.Section+"] "+d.Key] = d.Value
	}
	for _, r := range f.Rlimits {
		out["prlimit pid "+strconv.Itoa(r.PID)+" "+r.Item] = fix.FormatRlimit(r.Soft) + ":" + fix.FormatRlimit(r.Hard)
	}
	for _, a := range f.Cmdline {
		k, v, _ := strings.Cut(a, "=")
		out["kernel command line "+k] = v
	}
	for _, m := range f.Mount {
		for _, o := range m.Add {
			out["mount "+m.MountPoint+" "+optName(o)] = "+" + o
		}
		for _, o := range m.Remove {
			out["mount "+m.MountPoint+" "+optName(o)] = "-" + o
		}
	}
	return out
}

// optName is a mount option's name without its value ("commit=60" ->
// "commit"), so that two values of one option are one setting.
func optName(o string) string {
	k, _, _ := strings.Cut(o, "=")
	return k
}

// capacity reports whether a setting is a capacity, where the larger value
// satisfies every finding that asks for a smaller one: the huge page pool,
// limits, and the kernel's ceilings on queues and files.
func capacity(setting string) bool {
	switch {
	case strings.HasPrefix(setting, "limits.d ") && !strings.HasSuffix(setting, " priority"),
		strings.HasPrefix(setting, "prlimit "):
		return true
	case strings.HasPrefix(setting, "unit "):
		k := setting[strings.LastIndex(setting, " ")+1:]
		return strings.HasPrefix(k, "Limit")
	}
	switch strings.TrimPrefix(setting, "sysctl ") {
	case "vm.nr_hugepages", "fs.file-max", "fs.nr_open", "fs.aio-max-nr", "kernel.threads-max",
		"kernel.pid_max", "net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.core.netdev_max_backlog",
		"kernel.shmmax", "kernel.shmall", "kernel.shmmni", "vm.max_map_count", "vm.min_free_kbytes",
		"kernel.msgmax", "kernel.msgmnb", "fs.inotify.max_user_watches", "vm.overcommit_ratio":
		return true
	}
	return false
}

// largest returns the largest of capacity values, or false when one does
// not read as a number (then they are genuinely different wishes).
func largest(vals []string) (string, bool) {
	best, bestN := "", -1.0
	for _, v := range vals {
		n, ok := capNumber(v)
		if !ok {
			return "", false
		}
		if n > bestN {
			best, bestN = v, n
		}
	}
	return best, true
}

// capNumber reads a capacity: a number, "unlimited"/"infinity", or a
// prlimit SOFT:HARD pair (ordered by its hard, then soft limit).
func capNumber(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if s, h, ok := strings.Cut(v, ":"); ok {
		hn, ok1 := capNumber(h)
		sn, ok2 := capNumber(s)
		return hn*4 + sn/1e30, ok1 && ok2 // hard first, soft breaks ties
	}
	switch strings.ToLower(v) {
	case "unlimited", "infinity", "-1":
		return 1e300, true
	}
	n, err := strconv.ParseFloat(v, 64)
	return n, err == nil
}

// resolution is what resolve decided for one round's items.
type resolution struct {
	// kept are the items applied, with capacities set to the kept value.
	kept []fix.Item
	// dropped are the indexes of the items left out for a conflict.
	dropped   map[int]bool
	conflicts []Conflict
}

// resolve gives every setting one value. Items are in severity order. A
// capacity keeps the largest value wanted (written into every item that
// sets it, so files and commands agree); any other setting wanted with two
// values is a conflict: every item wanting it is left out whole (applying
// half a fix can be worse than none: huge_pages=on without its pool), and
// reported with each wish.
func resolve(items []fix.Item) resolution {
	wants := map[string][]want{}
	var order []string
	for i, it := range items {
		for s, v := range settingsOf(it.Fix) {
			if _, ok := wants[s]; !ok {
				order = append(order, s)
			}
			wants[s] = append(wants[s], want{i, v})
		}
	}
	sort.Strings(order)
	res := resolution{dropped: map[int]bool{}}
	kept := map[string]string{}
	for _, s := range order {
		ws := wants[s]
		vals := distinct(ws)
		if len(vals) < 2 {
			continue
		}
		c := Conflict{Setting: s, Wishes: map[string]string{}}
		for _, w := range ws {
			c.Wishes[tag(items[w.item])] = w.value
		}
		if big, ok := largest(vals); ok && capacity(s) {
			c.Kept, kept[s] = big, big
		} else {
			for _, w := range ws {
				res.dropped[w.item] = true
			}
		}
		res.conflicts = append(res.conflicts, c)
	}
	for i, it := range items {
		if res.dropped[i] {
			continue
		}
		if len(kept) > 0 {
			it.Fix = withCapacities(it.Fix, kept)
		}
		res.kept = append(res.kept, it)
	}
	return res
}

func distinct(ws []want) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range ws {
		if !seen[w.value] {
			seen[w.value] = true
			out = append(out, w.value)
		}
	}
	return out
}

// withCapacities returns a copy of f whose capacity settings carry the
// kept values, its runtime commands for them rewritten to match.
func withCapacities(f *fix.Fix, kept map[string]string) *fix.Fix {
	c := *f
	c.Sysctl = append([]fix.KV(nil), f.Sysctl...)
	for i, kv := range c.Sysctl {
		if v, ok := kept["sysctl "+kv.Key]; ok && v != kv.Value {
			c.Runtime = replaceValue(c.Runtime, kv.Key, kv.Value, v)
			c.Sysctl[i].Value = v
		}
	}
	c.Limits = append([]fix.LimitLine(nil), f.Limits...)
	for i, l := range c.Limits {
		if v, ok := kept["limits.d "+l.Domain+" "+l.Type+" "+l.Item]; ok {
			c.Limits[i].Value = v
		}
	}
	c.Dropins = append([]fix.Dropin(nil), f.Dropins...)
	for i, d := range c.Dropins {
		if v, ok := kept["unit "+d.Unit+" ["+d.Section+"] "+d.Key]; ok {
			c.Dropins[i].Value = v
		}
	}
	c.Rlimits = append([]fix.Rlimit(nil), f.Rlimits...)
	for i, r := range c.Rlimits {
		if v, ok := kept["prlimit pid "+strconv.Itoa(r.PID)+" "+r.Item]; ok {
			old := r.Command()
			s, h, _ := strings.Cut(v, ":")
			c.Rlimits[i].Soft, c.Rlimits[i].Hard = parseRlimit(s), parseRlimit(h)
			c.Runtime = replaceCommand(c.Runtime, old, c.Rlimits[i].Command())
		}
	}
	return &c
}

func parseRlimit(s string) uint64 {
	if s == "unlimited" {
		return fix.Unlimited
	}
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// replaceValue rewrites a check's own "sysctl -w KEY=OLD" command.
func replaceValue(cmds []string, key, old, v string) []string {
	out := append([]string(nil), cmds...)
	for i, c := range out {
		out[i] = strings.ReplaceAll(c, key+"="+old, key+"="+v)
	}
	return out
}

func replaceCommand(cmds []string, old, v string) []string {
	out := append([]string(nil), cmds...)
	for i, c := range out {
		out[i] = strings.ReplaceAll(c, old, v)
	}
	return out
}
