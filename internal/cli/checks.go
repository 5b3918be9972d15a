package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/textio"
)

type catalogEntry struct {
	ID        string         `json:"id"`
	Title     string         `json:"title"`
	Problem   string         `json:"problem"`
	Severity  check.Severity `json:"severity"`
	AppliesTo []string       `json:"applies_to"`
	Doc       string         `json:"doc"`
	Sysctls   []string       `json:"sysctls,omitempty"`
	// AllSysctls: the check reads every kernel parameter gathered, not
	// only its own Sysctls (check.Check.AllSysctls).
	AllSysctls bool     `json:"all_sysctls,omitempty"`
	Refs       []string `json:"refs,omitempty"`
}

// catalogView is what 'dbhost checks' renders: the selected entries, and
// whether they were named one by one (then text shows each in full).
type catalogView struct {
	Entries []catalogEntry
	Full    bool
}

func entryOf(c *check.Check) catalogEntry {
	return catalogEntry{ID: c.ID, Title: c.Title, Problem: c.Problem, Severity: c.Severity, AppliesTo: c.AppliesTo,
		Doc: c.Doc, Sysctls: c.Sysctls, AllSysctls: c.AllSysctls, Refs: c.Refs}
}

// catalogFormats are the formats of 'dbhost checks'; markdown is what
// docs/checks.md holds.
var catalogFormats = new(report.Formats[catalogView]).
	Add("text", catalogText).
	Add("json", func(w io.Writer, v catalogView) error { return writeJSON(w, v.Entries) }).
	Add("markdown", catalogMarkdown, "md")

func (a *app) checksCmd() *cobra.Command {
	c := newCmd("checks [ID|DOMAIN...]", "list the check catalog, or document the named checks")
	c.Long = `List the check catalog. Named by ID (dbhost checks mem.overcommit), each check is
documented in full: what it looks at and why, the state it wants and the one it fails as,
the kernel parameters it reads and the paths its doc names, how to see its fix, and
references. A domain prefix (dbhost checks mem, dbhost checks storage.zfs) lists that
domain; an unknown name is an error that suggests the closest IDs.`
	c.Example = `  dbhost checks
  dbhost checks mem.overcommit
  dbhost checks --format markdown > checks.md`
	c.Args = cobra.ArbitraryArgs
	c.ValidArgsFunction = completeCheckArgs
	format := c.Flags().String("format", "text", "output format: text, json, markdown")
	c.Run = a.do(func(_ context.Context, args []string) int {
		env := a.env
		if err := catalogFormats.Check(*format); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost checks:", err)
			return ExitError
		}
		v, err := selectCatalog(args)
		if err == nil {
			err = catalogFormats.Render(env.Stdout, *format, v)
		}
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost checks:", err)
			return ExitError
		}
		return ExitOK
	})
	return c
}

// selectCatalog picks the checks the arguments name: all without any; an
// exact ID names one check, anything else must be a domain prefix.
func selectCatalog(args []string) (catalogView, error) {
	all := check.All()
	if len(args) == 0 {
		v := catalogView{}
		for _, c := range all {
			v.Entries = append(v.Entries, entryOf(c))
		}
		return v, nil
	}
	v := catalogView{Full: true}
	seen := map[string]bool{}
	for _, arg := range args {
		name := strings.TrimSuffix(strings.TrimSpace(arg), ".*")
		var picked []*check.Check
		if c, ok := check.Lookup(name); ok {
			picked = []*check.Check{c}
		} else if name != "" {
			for _, c := range all {
				if strings.HasPrefix(c.ID, name+".") {
					picked = append(picked, c)
				}
			}
			v.Full = v.Full && len(picked) == 0
		}
		if len(picked) == 0 {
			return catalogView{}, unknownCheck(arg, all)
		}
		for _, c := range picked {
			if !seen[c.ID] {
				seen[c.ID] = true
				v.Entries = append(v.Entries, entryOf(c))
			}
		}
	}
	return v, nil
}

// unknownCheck names what the user gave and the IDs closest to it.
func unknownCheck(arg string, all []*check.Check) error {
	msg := fmt.Sprintf("unknown check %q", arg)
	if s := closestIDs(arg, all, 3); len(s) > 0 {
		msg += " (did you mean " + textio.OrList(s) + "?)"
	}
	return fmt.Errorf("%s; 'dbhost checks' lists them", msg)
}

// closestIDs ranks check IDs by edit distance to name, whole or against
// the ID's last part (a name given without its domain), and keeps the
// close ones. An ID that contains name comes first.
func closestIDs(name string, all []*check.Check, limit int) []string {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return nil
	}
	type cand struct {
		id   string
		dist int
	}
	var cs []cand
	for _, c := range all {
		d := editDistance(name, c.ID)
		if i := strings.LastIndexByte(c.ID, '.'); i >= 0 {
			d = min(d, editDistance(name, c.ID[i+1:])+1)
		}
		if strings.Contains(c.ID, name) {
			d = 0
		}
		if d <= max(2, len(name)/4) {
			cs = append(cs, cand{c.ID, d})
		}
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].dist < cs[b].dist })
	var out []string
	for i := 0; i < len(cs) && i < limit; i++ {
		out = append(out, cs[i].id)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b (bytes: IDs are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func catalogText(w io.Writer, v catalogView) error {
	if v.Full {
		for i, c := range v.Entries {
			if i > 0 {
				fmt.Fprintln(w)
			}
			checkDocText(w, c)
		}
		return nil
	}
	for _, c := range v.Entries {
		fmt.Fprintf(w, "%-34s %-8s %-28s %s\n", c.ID, c.Severity, strings.Join(c.AppliesTo, ","), c.Title)
	}
	fmt.Fprintf(w, "\n%d checks. 'dbhost checks ID' documents one: what it looks at, why, what it reads, its fix.\n", len(v.Entries))
	return nil
}

// checkDocText writes one check's documentation.
func checkDocText(w io.Writer, c catalogEntry) {
	fmt.Fprintf(w, "%s\n", c.ID)
	fmt.Fprintf(w, "  %-12s %s\n", "Wants:", c.Title)
	fmt.Fprintf(w, "  %-12s %s\n", "Fails as:", c.Problem)
	fmt.Fprintf(w, "  %-12s %s\n", "Severity:", c.Severity)
	fmt.Fprintf(w, "  %-12s %s\n", "Applies to:", strings.Join(c.AppliesTo, ", "))
	fmt.Fprintln(w, "\n  What it looks at, and why:")
	for _, l := range strings.Split(strings.TrimSpace(c.Doc), "\n") {
		fmt.Fprintf(w, "    %s\n", l)
	}
	// The kernel parameters are the ones the check declares (and the
	// facts gather for it); the paths are the ones its doc names, which
	// are mostly what it reads and sometimes where its fix writes.
	fmt.Fprintln(w, "\n  Evidence it reads:")
	paths := docPaths(c.Doc)
	if params := sysctlsRead(c); params != "" {
		fmt.Fprintf(w, "    %-20s %s\n", "kernel parameters:", params)
	}
	if len(paths) > 0 {
		fmt.Fprintf(w, "    %-20s %s\n", "paths the doc names:", strings.Join(paths, ", "))
	}
	if len(c.Sysctls) == 0 && len(paths) == 0 {
		fmt.Fprintln(w, "    as described above")
	}
	fmt.Fprintln(w, "\n  Fix (written for the host it judges, so shown by the commands that judge one):")
	fmt.Fprintf(w, "    dbhost audit --only %s -v       the finding, its evidence and its fix\n", c.ID)
	fmt.Fprintf(w, "    dbhost fix --only %s --out DIR  the persistent files that fix it\n", c.ID)
	if len(c.Refs) > 0 {
		fmt.Fprintln(w, "\n  References:")
		for _, r := range c.Refs {
			fmt.Fprintf(w, "    %s\n", r)
		}
	}
}

// sysctlsRead says which kernel parameters a check reads.
func sysctlsRead(c catalogEntry) string {
	own := strings.Join(c.Sysctls, ", ")
	switch {
	case c.AllSysctls && own != "":
		return "every one the catalog's checks declare, and " + own
	case c.AllSysctls:
		return "every one the catalog's checks declare"
	}
	return own
}

// pathInDoc finds the absolute paths a check's doc says it reads.
var pathInDoc = textio.LazyRegexp(`(?:^|[\s(,])(/(?:proc|sys|etc|run|usr|lib|var|dev)/[A-Za-z0-9_./*<>+-]*[A-Za-z0-9_*>])`)

// docPaths lists, in order and once each, the files and directories under
// /proc, /sys, /etc, ... that a doc names.
func docPaths(doc string) []string {
	var out []string
	for _, m := range pathInDoc.FindAllStringSubmatch(doc, -1) {
		if p := m[1]; !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func catalogMarkdown(w io.Writer, v catalogView) error {
	cat := v.Entries
	fmt.Fprintf(w, "# dbhost check catalog\n\nGenerated by `dbhost checks --format markdown`; %d checks.\n\n", len(cat))
	fmt.Fprintln(w, "| ID | severity | applies to | title |\n|---|---|---|---|")
	for _, c := range cat {
		fmt.Fprintf(w, "| [`%s`](#%s) | %s | %s | %s |\n", c.ID, strings.ReplaceAll(c.ID, ".", ""), c.Severity, strings.Join(c.AppliesTo, ", "), c.Title)
	}
	for _, c := range cat {
		fmt.Fprintf(w, "\n## %s\n\n**%s** — severity %s, applies to %s.\n\nFails as: *%s*.\n\n%s\n", c.ID, c.Title, c.Severity, strings.Join(c.AppliesTo, ", "), c.Problem, strings.Join(strings.Fields(c.Doc), " "))
		if params := sysctlsRead(c); params != "" {
			fmt.Fprintf(w, "\nKernel parameters read: %s.\n", params)
		}
		if len(c.Refs) > 0 {
			fmt.Fprintln(w, "\nReferences:")
			for _, r := range c.Refs {
				fmt.Fprintf(w, "- %s\n", r)
			}
		}
	}
	return nil
}
