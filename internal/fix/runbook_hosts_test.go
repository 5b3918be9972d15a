package fix_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
)

// shownStep is one line of the apply-now list as a person reads it: a
// command, or a restart (with or without a command).
type shownStep struct {
	cmd     string
	restart bool
}

// assertions of TestRunbookRecordedHosts, by name, for the counts.
const (
	aParse    = "parses as one simple command"
	aOnce     = "no setting set twice"
	aPersist  = "kernel value ends on the sysctl.d value"
	aRestart  = "no restart before a non-restart step"
	aPoolLast = "the pool before any restart"
)

// TestRunbookRecordedHosts: on every recorded host, the commands the
// README of `dbhost fix --out` lists are safe to paste top to bottom. Each
// parses as exactly one simple command (a value with blanks is one word);
// no setting is set twice; each kernel parameter ends on the value the
// rendered sysctl.d file keeps; no restart comes before a command that is
// not one; the huge page pool is set before any restart. It catches
// commands listed per finding or by check ID (two pools, a RESTART first),
// unquoted values, and a runbook that merges differently from Render.
func TestRunbookRecordedHosts(t *testing.T) {
	failed := map[string][]string{}
	hosts := fixture.Names(t)
	for _, name := range hosts {
		f := fixture.Facts(t, name)
		var items []fix.Item
		for _, fd := range check.Run(f, check.Selector{}) {
			if fd.Status == check.Fail && fd.Fix != nil && !fd.Untrusted {
				items = append(items, fix.Item{ID: fd.ID, Subject: fd.Subject, Fix: fd.Fix})
			}
		}
		ctx := fix.ContextFrom(f)
		for _, a := range judgeRunbook(shownSteps(ctx, items), fix.Render(ctx, items)) {
			failed[a.name] = append(failed[a.name], name)
			t.Errorf("%s: %s: %s", name, a.name, a.detail)
		}
	}
	var names []string
	for a := range failed {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		t.Logf("%q fails on %d of %d hosts: %s", a, len(failed[a]), len(hosts), strings.Join(failed[a], " "))
	}
}

type violation struct{ name, detail string }

func judgeRunbook(steps []shownStep, files []fix.File) []violation {
	var out []violation
	seen := map[string]bool{}
	report := func(name, detail string) {
		if !seen[name] { // one per assertion and host is enough to count
			seen[name] = true
			out = append(out, violation{name, detail})
		}
	}
	persisted := sysctlFile(files)
	set := map[string]string{}
	last := map[string]string{}
	restarted, pool := -1, -1
	for i, s := range steps {
		if s.restart {
			if restarted < 0 {
				restarted = i
			}
			if s.cmd == "" {
				continue
			}
		} else if restarted >= 0 {
			report(aRestart, fmt.Sprintf("%q after a restart (step %d)", s.cmd, restarted+1))
		}
		words, err := simpleCommand(s.cmd)
		if err != nil {
			report(aParse, fmt.Sprintf("%q: %v", s.cmd, err))
			continue
		}
		key, val, ok := settingOf(words)
		if !ok {
			continue
		}
		if prev, dup := set[key]; dup {
			report(aOnce, fmt.Sprintf("%s set to %q and to %q", key, prev, val))
		}
		set[key] = val
		if k, isSysctl := strings.CutPrefix(key, "sysctl "); isSysctl {
			last[k] = val
			if k == "vm.nr_hugepages" && pool < 0 {
				pool = i
			}
		}
	}
	for k, v := range last {
		if p, ok := persisted[k]; ok && p != v {
			report(aPersist, fmt.Sprintf("%s ends on %q, sysctl.d keeps %q", k, v, p))
		}
	}
	if pool >= 0 && restarted >= 0 && pool > restarted {
		report(aPoolLast, fmt.Sprintf("vm.nr_hugepages at step %d, a restart at step %d", pool+1, restarted+1))
	}
	return out
}

// sysctlFile reads the rendered sysctl.d file: key → value.
func sysctlFile(files []fix.File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		if f.Path != "/etc/sysctl.d/"+fix.Name+".conf" {
			continue
		}
		for _, ln := range strings.Split(f.Content, "\n") {
			if k, v, ok := strings.Cut(ln, " = "); ok && !strings.HasPrefix(ln, "#") {
				out[k] = v
			}
		}
	}
	return out
}

// simpleCommand parses a command as the shell would and returns its words
// and redirections (">" then the file), or why it is not exactly one
// simple command of literal words.
func simpleCommand(cmd string) ([]string, error) {
	file, err := syntax.NewParser().Parse(strings.NewReader(cmd), "")
	if err != nil {
		return nil, err
	}
	if len(file.Stmts) != 1 {
		return nil, fmt.Errorf("%d commands", len(file.Stmts))
	}
	st := file.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Background || st.Negated || st.Coprocess || len(call.Assigns) > 0 {
		return nil, fmt.Errorf("not one simple command (%T)", st.Cmd)
	}
	var words []string
	for _, w := range call.Args {
		s, err := literal(w)
		if err != nil {
			return nil, err
		}
		words = append(words, s)
	}
	for _, r := range st.Redirs {
		if r.Op != syntax.RdrOut || r.N != nil {
			return nil, fmt.Errorf("redirection %s", r.Op)
		}
		s, err := literal(r.Word)
		if err != nil {
			return nil, err
		}
		words = append(words, ">", s)
	}
	return words, nil
}

// literal is the value of a word made of literal and quoted parts only.
func literal(w *syntax.Word) (string, error) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(strings.ReplaceAll(p.Value, `\`, ""))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", fmt.Errorf("$'...' quoting")
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", fmt.Errorf("expansion in double quotes")
				}
				b.WriteString(l.Value)
			}
		default:
			return "", fmt.Errorf("expansion %T", p)
		}
	}
	return b.String(), nil
}

// settingOf names the setting a command changes, and its value.
func settingOf(w []string) (key, value string, ok bool) {
	switch {
	case len(w) == 3 && w[0] == "sysctl" && w[1] == "-w":
		k, v, ok := strings.Cut(w[2], "=")
		return "sysctl " + k, v, ok
	case len(w) == 4 && w[0] == "echo" && w[2] == ">":
		return "file " + w[3], w[1], true
	case len(w) == 5 && w[0] == "printf" && w[3] == ">":
		return "file " + w[4], w[2], true
	case len(w) == 4 && w[0] == "prlimit" && w[1] == "--pid":
		item, v, _ := strings.Cut(strings.TrimPrefix(w[3], "--"), "=")
		return "rlimit " + w[2] + " " + item, v, true
	case len(w) == 4 && w[0] == "mount" && w[1] == "-o":
		return "mount " + w[3], w[2], true
	}
	for i := 0; i+3 < len(w); i++ {
		if w[0] == "redis-cli" && strings.EqualFold(w[i], "CONFIG") && strings.EqualFold(w[i+1], "SET") {
			return "config " + strings.Join(w[1:i], " ") + " " + w[i+2], strings.Join(w[i+3:], " "), true
		}
	}
	return "", "", false
}
