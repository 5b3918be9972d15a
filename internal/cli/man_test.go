package cli

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/fix"
)

// The man pages: one per command, each with its description and every
// flag; groff reads them without a warning.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if code, out, errs := runCLI(t, "man", dir); code != ExitOK || out != "" || errs != "" {
		t.Fatalf("man: exit %d, %q %q", code, out, errs)
	}
	cmds := manCommands(testRoot())
	if ents, _ := os.ReadDir(dir); len(ents) != len(cmds) || len(cmds) < 20 {
		t.Errorf("%d pages for %d commands", len(ents), len(cmds))
	}
	groff, _ := exec.LookPath("groff")
	for _, c := range cmds {
		file := filepath.Join(dir, manName(c)+".1")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Error(err)
			continue
		}
		page := string(b)
		if !strings.HasPrefix(page, `.TH "`+strings.ToUpper(manName(c))+`" 1 "2023-11-14" "dbhost `) || !strings.Contains(page, roffLine(c.Short)) {
			t.Errorf("%s:\n%s", file, page)
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(page, `\fB\-\-`+roffName(f.Name)+`\fR`) {
				t.Errorf("%s lacks --%s", file, f.Name)
			}
		})
		if groff != "" {
			cmd := exec.Command(groff, "-man", "-ww", "-z", file)
			if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("groff %s: %v %s", file, err, out)
			}
		}
	}
	// Without a directory: dbhost(1), naming every command.
	code, out, _ := runCLI(t, "man")
	for _, c := range testRoot().Commands() {
		if c.IsAvailableCommand() && !strings.Contains(out, `\fB`+roffName(manName(c))+`\fR(1)`) {
			t.Errorf("dbhost(1) does not name %s", c.Name())
		}
	}
	if code != ExitOK {
		t.Errorf("man: exit %d", code)
	}
}

// Every page has EXIT STATUS (with the failure status every command has:
// a bad flag is ExitError) and EXAMPLES; ENVIRONMENT and FILES where the
// command reads a variable or a file of mansections.go's tables, all of
// them on dbhost(1).
func TestManSections(t *testing.T) {
	root := testRoot()
	listed := map[string]bool{}
	for _, f := range manFiles {
		for _, c := range f.cmds {
			listed["FILES "+c] = true
		}
	}
	for _, v := range manVars {
		for _, c := range v.cmds {
			listed["ENVIRONMENT "+c] = true
		}
	}
	for _, c := range manCommands(root) {
		var b strings.Builder
		if err := writeMan(&b, c, "2023-11-14", "test"); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		name := strings.TrimPrefix(c.CommandPath(), "dbhost ")
		if _, ok := exits(c)[ExitError]; !ok {
			t.Errorf("%s: no exit status %d in its table", manName(c), ExitError)
		}
		for code, means := range exits(c) {
			if !strings.Contains(page, fmt.Sprintf(".TP\n.B %d\n%s\n", code, roffLine(means))) {
				t.Errorf("%s: exit status %d missing", manName(c), code)
			}
		}
		for _, sec := range []string{"EXIT STATUS", "EXAMPLES", "ENVIRONMENT", "FILES"} {
			want := sec == "EXIT STATUS" || sec == "EXAMPLES" || !c.HasParent() || listed[sec+" "+name]
			if got := strings.Contains(page, "\n.SH "+sec+"\n"); got != want {
				t.Errorf("%s: section %s present %v, want %v", manName(c), sec, got, want)
			}
		}
		// The sections come in the usual order.
		last := -1
		for _, sec := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"} {
			if i := strings.Index(page, "\n.SH "+sec+"\n"); i >= 0 {
				if i < last {
					t.Errorf("%s: %s out of order", manName(c), sec)
				}
				last = i
			}
		}
	}
	// dbhost(1) lists every file and variable.
	var b strings.Builder
	if err := writeMan(&b, root, "2023-11-14", "test"); err != nil {
		t.Fatal(err)
	}
	for _, f := range manFiles {
		if !strings.Contains(b.String(), ".I "+roffName(f.path)+"\n") {
			t.Errorf("dbhost(1) lacks %s", f.path)
		}
	}
	for _, v := range manVars {
		if !strings.Contains(b.String(), ".B "+roffName(v.name)+"\n") {
			t.Errorf("dbhost(1) lacks %s", v.name)
		}
	}
}

// Each example is a command line dbhost accepts: the command exists, its
// flags parse, its operands are as many as it takes.
func TestManExamples(t *testing.T) {
	n := 0
	for _, c := range manCommands(testRoot()) {
		if examples(c) == "" {
			t.Errorf("%s: no example", manName(c))
		}
		for _, ln := range strings.Split(examples(c), "\n") {
			words := shellWords(ln)
			if len(words) > 0 && words[0] == "sudo" {
				words = words[1:]
			}
			if len(words) == 0 || words[0] != "dbhost" {
				continue // another program's command line (man -l)
			}
			n++
			root := testRoot()
			cmd, rest, err := root.Find(words[1:])
			if err == nil {
				err = cmd.ParseFlags(rest)
			}
			if err == nil && cmd.Args != nil {
				err = cmd.Args(cmd, cmd.Flags().Args())
			}
			if err != nil {
				t.Errorf("%s: example %q: %v", manName(c), ln, err)
			}
		}
	}
	if n < 30 {
		t.Errorf("%d examples run dbhost", n)
	}
}

// shellWords splits an example line as the shell would, up to a comment,
// a pipe, a redirection or &&: words, and single-quoted strings.
func shellWords(ln string) []string {
	var words []string
	var w strings.Builder
	in, quoted := false, false
	flush := func() {
		if in {
			words = append(words, w.String())
		}
		w.Reset()
		in = false
	}
	for _, r := range ln {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			w.WriteRune(r)
		case r == '\'':
			quoted, in = true, true
		case r == ' ' || r == '\t':
			flush()
		case !in && (r == '#' || r == '|' || r == '>' || r == '&'):
			flush()
			return words
		default:
			w.WriteRune(r)
			in = true
		}
	}
	flush()
	return words
}

// The pages name only what the code reads: each path of FILES appears as
// a string in the code (root-relative or absolute; a path made of a fixed
// directory and the name fix writes, by that directory), each variable of
// ENVIRONMENT as a string in the package that reads it. And each variable
// the code reads with os.Getenv or os.LookupEnv is on a page, or in
// manUnlisted with the reason it is not.
func TestManSources(t *testing.T) {
	src := goSource(t, "../..", func(p string) bool {
		return strings.Contains(p, "/testdata/") || strings.Contains(p, "testdb") || strings.Contains(p, "testhost") || strings.Contains(p, "mongotest") ||
			strings.HasPrefix(p, "../../tools/") || strings.HasPrefix(p, "../../bench/") || strings.HasSuffix(p, "mansections.go")
	})
	all := strings.Join(slices.Collect(maps.Values(src)), "\n")
	for _, f := range manFiles {
		p := strings.TrimPrefix(f.path, "~/")
		// A placeholder (UNIT) or the name fix gives its files: the
		// directory before it is what the code holds.
		if i := strings.Index(p, "UNIT"); i >= 0 {
			p = p[:i]
		} else if i := strings.Index(p, fix.Name); i >= 0 {
			p = p[:i]
		} else {
			p += `"`
		}
		if !strings.Contains(all, `"`+p) && !strings.Contains(all, `"`+strings.TrimPrefix(p, "/")) {
			t.Errorf("FILES %s: the code has no %q", f.path, `"`+p)
		}
	}
	if fix.Name != "60-dbhost" {
		t.Errorf("fix writes %s.*, the pages say 60-dbhost", fix.Name)
	}
	documented := map[string]bool{}
	for _, v := range manVars {
		documented[v.name] = true
		dir := "../../" + v.pkg
		if !strings.HasPrefix(v.pkg, "internal/") {
			out, err := exec.Command("go", "list", "-f", "{{.Dir}}", v.pkg).Output()
			if err != nil {
				t.Errorf("ENVIRONMENT %s: go list %s: %v", v.name, v.pkg, err)
				continue
			}
			dir = strings.TrimSpace(string(out))
		}
		found := false
		skip := func(p string) bool {
			return filepath.Dir(p) != filepath.Clean(dir) || strings.HasSuffix(p, "mansections.go")
		}
		for _, text := range goSource(t, dir, skip) {
			found = found || strings.Contains(text, `"`+v.name+`"`)
		}
		if !found {
			t.Errorf("ENVIRONMENT %s: not read in %s", v.name, v.pkg)
		}
	}
	reads := regexp.MustCompile(`os\.(?:Getenv|LookupEnv)\("([A-Z_][A-Z0-9_]*)"\)`)
	for file, text := range src {
		for _, m := range reads.FindAllStringSubmatch(text, -1) {
			if !documented[m[1]] && manUnlisted[m[1]] == "" {
				t.Errorf("%s reads %s: no page says so (mansections.go)", file, m[1])
			}
		}
	}
}

// goSource is the text of the non-test Go files under dir, by path, less
// those skip names.
func goSource(t *testing.T, dir string, skip func(string) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || skip(p) {
			return nil
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
