package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

// testRoot is a command tree as one run of dbhost builds it.
func testRoot() *cobra.Command {
	return (&app{env: Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}}).root()
}

// find is the command args name in a fresh tree.
func find(t *testing.T, args ...string) *cobra.Command {
	t.Helper()
	c, rest, err := testRoot().Find(args)
	if err != nil || len(rest) > 0 {
		t.Fatalf("no command %q: %v %q", args, err, rest)
	}
	return c
}

// 'help CMD', 'CMD --help', 'CMD -h' and the old '-help' print the same
// help on stdout and exit 0.
func TestHelp(t *testing.T) {
	for _, cmd := range [][]string{{"audit"}, {"results", "show"}, {"experiment", "recover"}, {"fleet"}} {
		_, want, _ := runCLI(t, append([]string{"help"}, cmd...)...)
		if !strings.Contains(want, "Usage: dbhost "+strings.Join(cmd, " ")) || !strings.Contains(want, "--help") {
			t.Errorf("help %s:\n%s", cmd, want)
		}
		for _, h := range []string{"--help", "-h", "-help"} {
			code, out, errs := runCLI(t, append(slices.Clone(cmd), h)...)
			if code != ExitOK || out != want || errs != "" {
				t.Errorf("%s %s: exit %d, stderr %q, stdout differs from help %s:\n%s", cmd, h, code, errs, cmd, out)
			}
		}
	}
	code, out, _ := runCLI(t, "help")
	if code != ExitOK || !strings.Contains(out, "Usage: dbhost COMMAND") || !strings.Contains(out, "experiment ") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
	code, out, errs := runCLI(t, "help", "frobnicate")
	if code != ExitError || out != "" || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("help frobnicate: exit %d, %q %q", code, out, errs)
	}
	// No command: the usage, on stderr, and exit 2.
	code, out, errs = runCLI(t)
	if code != ExitError || out != "" || !strings.Contains(errs, "Usage: dbhost COMMAND") {
		t.Errorf("no command: exit %d, %q %q", code, out, errs)
	}
	code, _, errs = runCLI(t, "adit")
	if code != ExitError || !strings.Contains(errs, `unknown command "adit" (did you mean audit?)`) {
		t.Errorf("adit: exit %d, %q", code, errs)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, errs := runCLI(t, args...)
		if code != ExitOK || out != "dbhost "+devVersion+"\n" || errs != "" {
			t.Errorf("%s: exit %d, %q %q", args, code, out, errs)
		}
	}
}

// Flag and operand errors: exit 2, the command and the error on stderr.
func TestFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "--bogus"}, "dbhost audit: unknown flag: --bogus\n"},
		{[]string{"audit", "-bogus"}, "dbhost audit: unknown shorthand flag: 'b' in -bogus\n"},
		{[]string{"audit", "extra"}, "dbhost audit: unexpected argument \"extra\"\n"},
		{[]string{"audit", "--from"}, "dbhost audit: flag needs an argument: --from\n"},
		{[]string{"mem", "-top", "many"}, "dbhost mem: invalid argument \"many\" for \"--top\" flag"},
		{[]string{"collect", "--from", "x"}, "dbhost collect: unknown flag: --from\n"},
		{[]string{"results", "show", "--db", "x"}, "dbhost results show: want one experiment ID\n"},
		{[]string{"fix", "ID"}, "dbhost fix: unexpected argument \"ID\"\n"},
		{[]string{"fix", "--rollback", "a", "b"}, "dbhost fix: unexpected argument \"b\"\n"},
		{[]string{"results", "sho"}, "dbhost results: unknown subcommand \"sho\" (did you mean show?)"},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != ExitError || out != "" || !strings.HasPrefix(errs, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errs, c.want)
		}
	}
}

// compatArgs rewrites the flag spellings of the standard flag package for
// pflag, and nothing else.
func TestCompatArgs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"audit -from x -format=json -v -o f", "audit --from x --format=json -v -o f"},
		{"audit --from=x --o f --v", "audit --from=x -o f -v"},
		{"audit --o=f --v=false", "audit -o=f -v=false"},
		{"audit -help", "audit --help"},
		{"audit -h -v", "audit -h -v"},
		{"collect --note -from -o -", "collect --note -from -o -"},        // values
		{"collect -note -from -o -o", "collect --note -from -o -o"},       // values
		{"audit -vo -from -only x", "audit -vo -from --only x"},           // -o's value in a cluster
		{"audit -ofile -from x", "audit -ofile --from x"},                 // a value in the cluster
		{"mem -top -1 -pid 1,2", "mem --top -1 --pid 1,2"},                // a negative value
		{"diff -1 -v -- -from -v", "diff -1 -v -- -from -v"},              // operands; after --
		{"diff a.tar.gz - -format json", "diff a.tar.gz - --format json"}, // "-" is an operand
		{"audit -bogus -x", "audit -bogus -x"},                            // errors are pflag's
		{"results show -db x last -format=json", "results show --db x last --format=json"},
		{"results ls -db x", "results ls --db x"},
		{"experiment recover -journal j", "experiment recover --journal j"},
		{"experiment -f p.yaml -arm a:x=1 -clients 1,2 -select-only", "experiment -f p.yaml --arm a:x=1 --clients 1,2 --select-only"},
		{"serve -web.listen-address :1 -collector.thp -no-collector.limits=true", "serve --web.listen-address :1 --collector.thp --no-collector.limits=true"},
		{"fleet report -j 2 -o - x", "fleet report -j 2 -o - x"},
		{"-version", "--version"},
		{"frobnicate -from x", "frobnicate -from x"},
		{"__complete audit -fr", "__complete audit -fr"},
		{"", ""},
	} {
		got := compatArgs(testRoot(), strings.Fields(c.in))
		if strings.Join(got, " ") != c.want || got == nil {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}

// The old spellings work end to end.
func TestSingleDashFlags(t *testing.T) {
	code, out, errs := runCLI(t, "audit", "-from", fixture.Path("mem-swapfile"), "-only", "mem.swappiness", "-fail-on=none", "-format", "json")
	var doc struct{ Findings []struct{ ID string } }
	if code != ExitOK || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Findings) != 1 || doc.Findings[0].ID != "mem.swappiness" {
		t.Errorf("exit %d: %s%s", code, out, errs)
	}
}

// TestFlagsKept: every flag of every command before the move to cobra
// (testdata/flags-before.txt, from the help of that binary) is accepted in
// its old spelling (-name, and --name), listed by the command's help with
// the same default, and means the same flag.
func TestFlagsKept(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "flags-before.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sample := map[string]string{"int": "1", "uint64": "1", "float64": "0.5", "duration": "1s", "ints": "1,2", "percent": "2%", "size": "1GB"}
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		cols := strings.Split(sc.Text(), "\t")
		cmd, name, def := strings.Fields(cols[0]), cols[1], cols[2]
		n++
		_, help, _ := runCLI(t, append(slices.Clone(cmd), "-h")...)
		line := flagLine(help, name)
		if line == "" {
			t.Errorf("%s: --%s is not in the help:\n%s", cmd, name, help)
			continue
		}
		if def != "" && !strings.Contains(line, "default "+def) && !strings.Contains(line, `default "`+def+`"`) {
			t.Errorf("%s --%s: default %q not in %q", cmd, name, def, line)
		}
		for _, spelling := range []string{"-" + name, "--" + name} {
			root := testRoot()
			c, _, _ := root.Find(cmd)
			fl := c.Flags().Lookup(name)
			if len(name) == 1 {
				fl = c.Flags().ShorthandLookup(name)
			}
			if fl == nil {
				t.Errorf("%s: no flag %s", cmd, name)
				break
			}
			args := []string{spelling}
			if fl.NoOptDefVal == "" {
				v, ok := sample[fl.Value.Type()]
				if !ok {
					v = "x"
				}
				args = append(args, v)
			}
			args = compatArgs(root, append(slices.Clone(cmd), args...))[len(cmd):]
			if err := c.ParseFlags(args); err != nil || !fl.Changed {
				t.Errorf("%s %s: %v (changed %v)", cmd, strings.Join(args, " "), err, fl.Changed)
			}
		}
	}
	if n != 140 {
		t.Errorf("%d flags in testdata/flags-before.txt, want 140", n)
	}
}

// flagLine is the help's line of the flag name (-o or --name).
func flagLine(help, name string) string {
	for _, ln := range strings.Split(help, "\n") {
		f := strings.Fields(strings.ReplaceAll(ln, ",", " "))
		if len(f) > 0 && (slices.Contains(f[:min(2, len(f))], "--"+name) || len(name) == 1 && f[0] == "-"+name) {
			return ln
		}
	}
	return ""
}

// The help of 'experiment' lists its flags under headings, each flag once.
func TestExperimentHelpGroups(t *testing.T) {
	_, help, _ := runCLI(t, "experiment", "-h")
	help = help[strings.Index(help, "\nArms and knobs:\n"):] // the flags, after the usage line
	headings := []string{"Arms and knobs:", "Target database:", "Workload:", "Trials and statistics:", "Results and output:", "Other flags:"}
	at := -1
	for _, h := range headings {
		i := strings.Index(help, "\n"+h+"\n")
		if i < at {
			t.Fatalf("heading %q missing or out of order:\n%s", h, help)
		}
		at = i
	}
	section := func(flag string) string {
		i := strings.Index(help, "--"+flag+" ")
		if i < 0 {
			return ""
		}
		h := ""
		for _, s := range headings {
			if j := strings.Index(help, "\n"+s+"\n"); j >= 0 && j < i {
				h = s
			}
		}
		return h
	}
	for flag, want := range map[string]string{"arm": "Arms and knobs:", "file": "Arms and knobs:", "pg": "Target database:", "clients": "Workload:",
		"alpha": "Trials and statistics:", "seed": "Trials and statistics:", "db": "Results and output:", "help": "Other flags:"} {
		if got := section(flag); got != want {
			t.Errorf("--%s under %q, want %q", flag, got, want)
		}
	}
	// Every flag of the table has a heading, and the help lists it once
	// (the examples, after the flags, use them again).
	c := find(t, "experiment")
	flags, examples, ok := strings.Cut(help, "\nExamples:\n")
	if !ok || !strings.Contains(examples, strings.TrimSpace(strings.SplitN(c.Example, "\n", 2)[0])) {
		t.Errorf("the help does not end with the command's examples:\n%s", examples)
	}
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && len(f.Annotations[flagGroup]) == 0 {
			t.Errorf("--%s has no heading", f.Name)
		}
		if n := strings.Count(flags, "--"+f.Name+" "); n != 1 {
			t.Errorf("--%s listed %d times", f.Name, n)
		}
	})
}

// Every command refuses operands unless it takes them: none relies on
// cobra's default, which takes any.
func TestEveryCommandChecksOperands(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args == nil {
			t.Errorf("%s: no operand check", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(testRoot())
}

// TestVersionFromEnv: the version the program is built with reaches every
// output that names it through Env, with no package state to set.
func TestVersionFromEnv(t *testing.T) {
	const v = "1.2.3-test"
	runV := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(append([]string{"dbhost"}, args...), Env{Stdout: &out, Stderr: &errb, Version: v}); code != ExitOK && code != ExitFindings {
			t.Fatalf("%s: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	if out := runV("version"); out != "dbhost "+v+"\n" {
		t.Errorf("version: %q", out)
	}
	if out := runV("audit", "--from", fixture.Path("mem-swapfile"), "--format", "prom"); !strings.Contains(out, `version="`+v+`"`) {
		t.Errorf("prom output has no build_info version %q:\n%s", v, out)
	}
	if out := runV("man"); !strings.Contains(out, `"dbhost `+v+`"`) {
		t.Errorf("man page header lacks %q:\n%.300s", v, out)
	}
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	runV("collect", "-o", snap)
	h, err := host.OpenSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got := h.Manifest().ToolVersion; got != v {
		t.Errorf("snapshot manifest tool_version %q, want %q", got, v)
	}
}
