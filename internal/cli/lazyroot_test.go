package cli

import (
	"bytes"
	"context"
	"slices"
	"testing"
)

// lazyCommands names every top-level command of the whole tree but those
// that read the whole tree (help, completion, man), each by the name its
// command has.
func TestLazyCommandsMatchTree(t *testing.T) {
	a := &app{env: Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}}
	var tree []string
	for _, c := range a.root().Commands() {
		if n := c.Name(); n != "help" && n != "completion" && n != "man" {
			tree = append(tree, n)
		}
	}
	var lazy []string
	for n, build := range lazyCommands(a) {
		if got := build().Name(); got != n {
			t.Errorf("lazyCommands[%q] builds %q", n, got)
		}
		lazy = append(lazy, n)
	}
	slices.Sort(tree)
	slices.Sort(lazy)
	if !slices.Equal(tree, lazy) {
		t.Errorf("lazy commands %q, tree's %q", lazy, tree)
	}
}

// A run on the one-command tree prints and exits as on the whole tree:
// usage errors, groups without a subcommand, flags, operands. Only runs
// that stop at their arguments or read nothing of the host: each runs for
// real, twice.
func TestLazyTreeSameOutput(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"version"}, {"version", "extra"}, {"version", "--bogus"},
		{"checks"}, {"checks", "--format", "json"}, {"checks", "mem"}, {"checks", "--format", "nope"},
		{"audit", "--bogus"}, {"audit", "extra"}, {"audit", "--from", dir + "/none.tar.gz"},
		{"audit", "--format"}, {"audit", "-format", "nope", "--from", dir + "/none.tar.gz"},
		{"collect"}, {"fix"}, {"fix", "--bogus"}, {"mem", "--bogus"}, {"contention", "--bogus"},
		{"experiment"}, {"experiment", "bogus"}, {"results"}, {"results", "bogus"}, {"results", "ls", "--bogus"},
		{"serve", "--bogus"}, {"diff"}, {"fleet"}, {"fleet", "reprot"}, {"fleet", "report"},
		{"lab"}, {"lab", "galera", "--bogus"}, {"galera"}, {"galera", "tolerance", "--bogus"},
	} {
		if lazyCommand(&app{}, args) == nil {
			t.Errorf("%q: builds the whole tree", args)
			continue
		}
		var outs [2]string
		var codes [2]int
		for i, lazy := range []bool{false, true} {
			var stdout, stderr bytes.Buffer
			a := &app{env: Env{Stdout: &stdout, Stderr: &stderr, Version: "test"}}
			root := a.root()
			if lazy {
				root = a.rootFor(args)
			}
			codes[i] = a.execute(context.Background(), root, args)
			outs[i] = stdout.String() + "\x00" + stderr.String()
		}
		if codes[0] != codes[1] || outs[0] != outs[1] {
			t.Errorf("%q: whole tree exit %d %q\none command exit %d %q", args, codes[0], outs[0], codes[1], outs[1])
		}
	}
}

// What may show help, and what lazyCommands does not hold, gets the whole
// tree.
func TestLazyCommandFallsBack(t *testing.T) {
	for _, args := range [][]string{
		nil, {}, {"help"}, {"help", "audit"}, {"audit", "--help"}, {"audit", "-h"}, {"audit", "-help"},
		{"fleet", "report", "-h"}, {"completion", "bash"}, {"man"}, {"__complete", "au"}, {"--version"},
		{"frobnicate"}, {"ls"}, {"Audit"},
	} {
		if lazyCommand(&app{}, args) != nil {
			t.Errorf("%q: builds one command", args)
		}
	}
}
