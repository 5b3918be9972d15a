package fix

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/conftext"
)

// Phases of the commands that apply fixes now, in the order they must run:
// the persistent files are installed first (they are listed before the
// commands), then the daemons that read them reload, then the running
// kernel and processes change. A restart is never among them (see Restart).
const (
	phaseReload = iota
	phaseApply
)

// reloadPrefixes start commands that make a daemon re-read installed files.
var reloadPrefixes = []string{"systemctl daemon-reload", "sysctl --system", "sysctl -p", "udevadm control", "udevadm trigger", "systemd-tmpfiles", "tuned-adm"}

// restartPrefixes start commands that restart a server; a check says so
// with Fix.Restart instead.
var restartPrefixes = []string{"systemctl restart", "systemctl try-restart", "service "}

func phaseOf(cmd string) (int, bool) {
	for _, p := range restartPrefixes {
		if strings.HasPrefix(cmd, p) || strings.Contains(cmd, "&& "+p) {
			return 0, false
		}
	}
	for _, p := range reloadPrefixes {
		if strings.HasPrefix(cmd, p) {
			return phaseReload, true
		}
	}
	return phaseApply, true
}

// commandsIn names where a refused command was to be shown.
const commandsIn = "the commands to run now"

// RuntimeCommands derives the commands that apply a fix now from its
// structured parts and adds the check's own, ordered so that running them
// top to bottom after installing the fix's files is correct. systemctl is
// left out where PID 1 is not systemd, and restarts are never listed.
// Host values are shell-quoted; what cannot be shown safely is left out
// (Steps says so).
func RuntimeCommands(f *Fix, ctx Context) []string {
	cmds, _ := runtimeCommands(f, ctx)
	return cmds
}

func runtimeCommands(f *Fix, ctx Context) ([]string, []Refusal) {
	var refused []Refusal
	refuse := func(what string, err error) {
		refused = append(refused, Refusal{What: what, In: commandsIn, Why: err.Error()})
	}
	var steps [2][]string
	add := func(cmd string) {
		ph, ok := phaseOf(cmd)
		if !ok || (!ctx.Systemd && strings.HasPrefix(cmd, "systemctl")) {
			return
		}
		for _, s := range steps[ph] {
			if s == cmd {
				return
			}
		}
		steps[ph] = append(steps[ph], cmd)
	}
	if len(f.Dropins) > 0 {
		add("systemctl daemon-reload")
	}
	for _, kv := range append(f.Sysctl[:len(f.Sysctl):len(f.Sysctl)], f.SysctlNow...) {
		if err := sysctlKnob(kv); err != nil {
			refuse(kvWhat("sysctl", kv), err)
			continue
		}
		add(shellCommand("sysctl", "-w", kv.Key+"="+kv.Value))
	}
	for _, kv := range f.Sysfs {
		if err := sysfsKnob(kv); err != nil {
			refuse(kvWhat("sysfs", kv), err)
			continue
		}
		add(writeCommand(kv.Value, kv.Key))
	}
	for _, u := range f.Udev {
		if err := udevKnob(u); err != nil {
			refuse(udevWhat(u), err)
			continue
		}
		add(writeCommand(u.Value, udevPath(u)))
	}
	for _, m := range f.Mount {
		if len(m.Remove) == 0 && len(m.Add) > 0 {
			opts := "remount," + strings.Join(m.Add, ",")
			if conftext.HasControl(opts + m.MountPoint) {
				refuse("remount of "+quote(m.MountPoint), errControl)
				continue
			}
			add(shellCommand("mount", "-o", opts, m.MountPoint))
		}
	}
	for _, r := range f.Runtime {
		if conftext.HasControl(r) {
			refuse("the command "+quote(r), errControl)
			continue
		}
		add(r)
	}
	return append(steps[phaseReload], steps[phaseApply]...), refused
}

// Steps is the rest of what a person must know to apply the fix: the
// restart it needs, if any, with its warning, and what replaces the
// systemctl steps where PID 1 is not systemd. It is "" when nothing is
// left to say.
func Steps(f *Fix, ctx Context) string { return stepsText(f, ctx, true) }

// stepsText is Steps, with the restart paragraph only when withRestart
// (the runbook lists restarts as its last steps instead).
func stepsText(f *Fix, ctx Context, withRestart bool) string {
	var out []string
	list, refused := runtimeCommands(f, ctx)
	cmds := len(list) > 0
	if !ctx.Systemd && (len(f.Dropins) > 0 || hasSystemctl(f.Runtime)) {
		units := map[string]bool{}
		for _, d := range f.Dropins {
			units[d.Unit] = true
		}
		s := "PID 1 is not systemd here, so no systemctl step is offered"
		if len(units) > 0 {
			s += ": the drop-in for " + strings.Join(sortedKeys(units), ", ") + " takes effect only when systemd starts that unit"
		}
		if cmds {
			s += "; the commands listed change the running system"
		}
		out = append(out, s+".")
	}
	for _, inst := range noConfig(f, ctx) {
		if f.Manual != "" {
			break // the check already says where the setting goes
		}
		out = append(out, inst+" reads no configuration file, so dbhost writes no snippet for it: set these options where the server is started (its command line), or start it with a configuration file.")
	}
	out = append(out, refusalSentences(append(Refused(ctx, []Item{{Fix: f}}), refused...))...)
	if r := f.Restart; r != nil && withRestart {
		how := "restart it the way it is started"
		if r.Unit != "" && ctx.Systemd {
			how = "systemctl restart " + r.Unit
		} else if r.Unit != "" {
			how += " (PID 1 is not systemd here, so not with systemctl)"
		}
		head := "RESTART NEEDED"
		if cmds {
			head += " (no command listed restarts it)"
		}
		out = append(out, fmt.Sprintf("%s: %s. A restart interrupts every connection: plan it for a maintenance window, then %s.", head, r.Why, how))
	}
	return strings.Join(out, " ")
}

// refusalSentences says what was left out where and why, one sentence per
// setting however many places refused it.
func refusalSentences(rs []Refusal) []string {
	type key struct{ what, why string }
	var order []key
	in := map[key][]string{}
	for _, r := range rs {
		k := key{r.What, r.Why}
		if _, ok := in[k]; !ok {
			order = append(order, k)
		}
		in[k] = appendUnique(in[k], r.In)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, fmt.Sprintf("Left out of %s as unsafe to write: %s (%s).", strings.Join(in[k], " and "), k.what, k.why))
	}
	return out
}

// noConfig lists the instances the fix configures that read no
// configuration file (Render writes them no snippet).
func noConfig(f *Fix, ctx Context) []string {
	seen := map[string]bool{}
	for _, c := range f.Config {
		if info, ok := ctx.Instances[c.Instance]; ok && info.NoConfig {
			seen[c.Instance] = true
		}
	}
	return sortedKeys(seen)
}

func hasSystemctl(cmds []string) bool {
	for _, c := range cmds {
		if strings.HasPrefix(c, "systemctl") {
			return true
		}
	}
	return false
}

// Complete adds to a copy of the fix what showing it needs: its ordered
// commands, its steps in Manual, and its own files.
func Complete(f *Fix, ctx Context, id, subject string) *Fix {
	fx := *f
	fx.Runtime = RuntimeCommands(f, ctx)
	if s := Steps(f, ctx); s != "" {
		fx.Manual = strings.TrimSpace(fx.Manual + "\n" + s)
	}
	fx.Files = Render(ctx, []Item{{ID: id, Subject: subject, Fix: &fx}})
	return &fx
}
