package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// manCmd writes the man pages of the command tree. They are written here,
// in roff, rather than by cobra's doc package: its Markdown converter
// (go-md2man, blackfriday) would add most of a millisecond of package
// initialisation to every start of dbhost.
func (a *app) manCmd(root *cobra.Command) *cobra.Command {
	c := newCmd("man [DIR]", "write the man pages: dbhost(1) and one per command")
	c.Long = `Write the man pages, dbhost(1) and one per command (dbhost-audit(1),
dbhost-results-show(1), ...), into DIR; without DIR, dbhost(1) to standard output.
They are dated SOURCE_DATE_EPOCH when it is set (reproducible builds), else today.`
	c.Example = `  dbhost man ./man && man -l ./man/dbhost-audit.1
  dbhost man | man -l -          # dbhost(1)`
	c.Args = argCount(0, 1, "at most one directory")
	c.Run = a.do(func(_ context.Context, args []string) int {
		date, err := manDate()
		if err == nil && len(args) == 0 {
			err = writeMan(termsafe.Raw(a.env.Stdout), root, date, a.env.Version)
		} else if err == nil {
			err = writeManTree(args[0], root, date, a.env.Version)
		}
		if err != nil {
			fmt.Fprintln(a.env.Stderr, "dbhost man:", err)
			return ExitError
		}
		return ExitOK
	})
	return c
}

// exitAnnotation prefixes the annotations that hold what a command's exit
// statuses mean ("exit 1": "a finding failed..."), set by setExits beside
// the command's definition.
const exitAnnotation = "exit "

// setExits records what c's exit statuses mean: its page's EXIT STATUS.
// A command without them succeeds with ExitOK or fails with ExitError
// (plainExits).
func setExits(c *cobra.Command, means map[int]string) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	for code, m := range means {
		c.Annotations[exitAnnotation+strconv.Itoa(code)] = m
	}
}

// plainExits are the exit statuses of a command that sets none.
var plainExits = map[int]string{
	ExitOK:    "Success.",
	ExitError: "It could not run: a bad flag or argument, a file it could not read or write, an error of the system.",
}

// exits are c's exit statuses and what they mean, by status.
func exits(c *cobra.Command) map[int]string {
	out := map[int]string{}
	for k, v := range c.Annotations {
		if code, err := strconv.Atoi(strings.TrimPrefix(k, exitAnnotation)); err == nil && strings.HasPrefix(k, exitAnnotation) {
			out[code] = v
		}
	}
	if len(out) == 0 {
		return plainExits
	}
	return out
}

// manDate is the date in the pages' header.
func manDate() (string, error) {
	t := time.Now()
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		sec, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return "", fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		t = time.Unix(sec, 0)
	}
	return t.UTC().Format(time.DateOnly), nil
}

// manCommands is c and every command under it that has a page: all but
// the hidden ones and 'help'.
func manCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			out = append(out, manCommands(s)...)
		}
	}
	return out
}

// manName is a command's page name: dbhost-results-show.
func manName(c *cobra.Command) string { return strings.ReplaceAll(c.CommandPath(), " ", "-") }

func writeManTree(dir string, root *cobra.Command, date, version string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range manCommands(root) {
		err := safefile.Write(filepath.Join(dir, manName(c)+".1"), 0o644, func(w io.Writer) error { return writeMan(w, c, date, version) })
		if err != nil {
			return err
		}
	}
	return nil
}

// writeMan writes a command's page: the same text as its help, the flags
// under the same headings.
func writeMan(w io.Writer, c *cobra.Command, date, version string) error {
	c.InitDefaultHelpFlag()
	b := bufio.NewWriter(w)
	name := manName(c)
	fmt.Fprintf(b, ".TH %s 1 %s %s %s\n", roffQuote(strings.ToUpper(name)), roffQuote(date), roffQuote("dbhost "+version), roffQuote("dbhost manual"))
	fmt.Fprintf(b, ".SH NAME\n%s \\- %s\n", roffName(name), roffLine(c.Short))
	fmt.Fprintf(b, ".SH SYNOPSIS\n\\fB%s\\fR%s\n", roffName(c.CommandPath()), roffLine(strings.TrimPrefix(c.UseLine(), c.CommandPath())))
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	fmt.Fprintf(b, ".SH DESCRIPTION\n%s", roffText(desc))
	var subs []*cobra.Command
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			subs = append(subs, s)
		}
	}
	if len(subs) > 0 {
		fmt.Fprintln(b, ".SH COMMANDS")
		for _, s := range subs {
			fmt.Fprintf(b, ".TP\n\\fB%s\\fR\n%s\n", roffName(s.Name()), roffLine(s.Short))
		}
	}
	groups := flagGroups(c)
	if len(groups) > 0 {
		fmt.Fprintln(b, ".SH OPTIONS")
	}
	for _, g := range groups {
		if len(groups) > 1 {
			fmt.Fprintf(b, ".SS %s\n", roffLine(g.title))
		}
		for _, f := range g.flags {
			writeManFlag(b, f)
		}
	}
	writeManSections(b, c)
	var also []string
	if c.HasParent() {
		also = append(also, fmt.Sprintf("\\fB%s\\fR(1)", roffName(manName(c.Parent()))))
	}
	for _, s := range subs {
		also = append(also, fmt.Sprintf("\\fB%s\\fR(1)", roffName(manName(s))))
	}
	if len(also) > 0 {
		fmt.Fprintf(b, ".SH SEE ALSO\n%s\n", strings.Join(also, ", "))
	}
	return b.Flush()
}

// writeManSections writes EXIT STATUS, ENVIRONMENT, FILES and EXAMPLES:
// the files and variables of mansections.go that concern the command
// (all of them on dbhost(1)), its exit statuses and its Example.
func writeManSections(w io.Writer, c *cobra.Command) {
	codes := exits(c)
	fmt.Fprintln(w, ".SH EXIT STATUS")
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		fmt.Fprintf(w, ".TP\n.B %d\n%s\n", code, roffLine(codes[code]))
	}
	name, root := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "), !c.HasParent()
	concerns := func(cmds []string) bool { return root || slices.Contains(cmds, name) }
	var env, files []string
	for _, v := range manVars {
		if concerns(v.cmds) {
			env = append(env, fmt.Sprintf(".TP\n.B %s\n%s\n", roffName(v.name), roffLine(v.means)))
		}
	}
	for _, f := range manFiles {
		if concerns(f.cmds) {
			files = append(files, fmt.Sprintf(".TP\n.I %s\n%s\n", roffName(f.path), roffLine(f.means)))
		}
	}
	for _, sec := range []struct {
		head  string
		items []string
	}{{"ENVIRONMENT", env}, {"FILES", files}} {
		if len(sec.items) > 0 {
			fmt.Fprintf(w, ".SH %s\n%s", sec.head, strings.Join(sec.items, ""))
		}
	}
	if ex := examples(c); ex != "" {
		fmt.Fprintf(w, ".SH EXAMPLES\n.PP\n.nf\n")
		for _, ln := range strings.Split(ex, "\n") {
			fmt.Fprintln(w, roffLine(ln))
		}
		fmt.Fprintln(w, ".fi")
	}
}

// examples is c's Example without its indentation; for a command that
// only holds subcommands, theirs.
func examples(c *cobra.Command) string {
	if c.Example != "" {
		return trimIndent(c.Example)
	}
	var out []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() && s.Example != "" {
			out = append(out, trimIndent(s.Example))
		}
	}
	return strings.Join(out, "\n")
}

// trimIndent removes the indentation all of s's lines share.
func trimIndent(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	indent := -1
	for _, ln := range lines {
		if strings.TrimSpace(ln) == "" {
			continue
		}
		if n := len(ln) - len(strings.TrimLeft(ln, " ")); indent < 0 || n < indent {
			indent = n
		}
	}
	for i, ln := range lines {
		if len(ln) >= indent && indent > 0 {
			lines[i] = ln[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

// writeManFlag writes a flag as a tagged paragraph: -o, --output string.
func writeManFlag(w io.Writer, f *pflag.Flag) {
	arg, usage := pflag.UnquoteUsage(f)
	tag := "\\fB\\-\\-" + roffName(f.Name) + "\\fR"
	if f.Shorthand != "" {
		tag = "\\fB\\-" + roffName(f.Shorthand) + "\\fR, " + tag
	}
	if arg != "" {
		tag += " \\fI" + roffLine(arg) + "\\fR"
	}
	switch f.DefValue {
	case "", "0", "false", "0s":
	default:
		if f.Value.Type() == "string" {
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		} else {
			usage += " (default " + f.DefValue + ")"
		}
	}
	fmt.Fprintf(w, ".TP\n%s\n%s\n", tag, roffLine(usage))
}

// roffLine escapes text for one line of roff: backslashes, and a dot or
// quote that would start a request.
func roffLine(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffName escapes a command or flag name, whose hyphens are minus signs
// (to be typed, searched and copied as such).
func roffName(s string) string { return strings.ReplaceAll(roffLine(s), "-", `\-`) }

// roffQuote is an argument of a request.
func roffQuote(s string) string { return `"` + strings.ReplaceAll(roffLine(s), `"`, `\(dq`) + `"` }

// roffText sets a description: paragraphs apart at blank lines, and the
// indented lines (lists, examples) as they are.
func roffText(s string) string {
	var b strings.Builder
	verbatim := false
	for _, ln := range strings.Split(strings.TrimSpace(s), "\n") {
		indented := strings.HasPrefix(ln, "  ")
		if verbatim && !indented {
			b.WriteString(".fi\n")
			verbatim = false
		}
		switch {
		case ln == "":
			b.WriteString(".PP\n")
			continue
		case indented && !verbatim:
			b.WriteString(".PP\n.nf\n")
			verbatim = true
		}
		b.WriteString(roffLine(ln) + "\n")
	}
	if verbatim {
		b.WriteString(".fi\n")
	}
	return b.String()
}
