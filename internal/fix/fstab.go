package fix

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/textio"
)

// fstabLine is one mount line of /etc/fstab with where its fields are.
type fstabLine struct {
	no    int // 1-based line number
	text  string
	spec  string
	file  string // mount point, octal escapes decoded
	spans [][2]int
}

// parseFstab returns the mount lines of an fstab; comments, blank and
// short lines are skipped (mount(8) ignores them too).
func parseFstab(s string) []fstabLine {
	var out []fstabLine
	for i, text := range strings.Split(s, "\n") {
		text = strings.TrimRight(text, "\r")
		spans := fieldSpans(text)
		if len(spans) < 4 || strings.HasPrefix(text[spans[0][0]:], "#") {
			continue
		}
		out = append(out, fstabLine{no: i + 1, text: text, spans: spans,
			spec: textio.UnescapeOctal(text[spans[0][0]:spans[0][1]]), file: textio.UnescapeOctal(text[spans[1][0]:spans[1][1]])})
	}
	return out
}

// fieldSpans finds the blank-separated fields of a line (spaces or tabs).
func fieldSpans(s string) [][2]int {
	var out [][2]int
	start := -1
	for i := 0; i <= len(s); i++ {
		blank := i == len(s) || s[i] == ' ' || s[i] == '\t'
		switch {
		case blank && start >= 0:
			out = append(out, [2]int{start, i})
			start = -1
		case !blank && start < 0:
			start = i
		}
	}
	return out
}

// findFstab picks the line that mounts mountPoint: the last such line (a
// later one mounts over an earlier), preferring one whose device is the
// mounted source when the spec names a device path. UUID=, LABEL= and
// PARTUUID= specs cannot be compared without the by-uuid links and count
// as matching. mismatch is set when the only candidates name another
// device.
func findFstab(lines []fstabLine, mountPoint, source string) (l fstabLine, ok bool, mismatch string) {
	for _, c := range lines {
		if c.file != mountPoint {
			continue
		}
		if strings.HasPrefix(c.spec, "/dev/") && strings.HasPrefix(source, "/dev/") && c.spec != source {
			mismatch = c.spec
			continue
		}
		l, ok = c, true
	}
	return l, ok, mismatch
}

// withOptions returns the line with its options column changed: add
// noatime replaces the other atime modes; removing the last option leaves
// "defaults". The rest of the line, blanks included, is kept as it is.
func (l fstabLine) withOptions(add, remove []string) (string, bool) {
	sp := l.spans[3]
	old := strings.Split(l.text[sp[0]:sp[1]], ",")
	drop := map[string]bool{}
	for _, r := range remove {
		drop[r] = true
	}
	for _, a := range add {
		if a == "noatime" {
			drop["relatime"], drop["strictatime"], drop["atime"] = true, true, true
		}
	}
	var opts []string
	for _, o := range old {
		if !drop[o] && o != "" {
			opts = appendUnique(opts, o)
		}
	}
	for _, a := range add {
		opts = appendUnique(opts, a)
	}
	if len(opts) == 0 {
		opts = []string{"defaults"}
	}
	nw := strings.Join(opts, ",")
	return l.text[:sp[0]] + nw + l.text[sp[1]:], nw != l.text[sp[0]:sp[1]]
}

// renderMounts writes each mount change as the exact /etc/fstab line that
// mounts the filesystem now and the line to replace it with; rewriting the
// live fstab is left to a person.
func renderMounts(ctx Context, items []Item) File {
	type mc struct {
		source      string
		add, remove []string
		tags        []string
	}
	ms := map[string]*mc{}
	for _, it := range items {
		for _, m := range it.Fix.Mount {
			e, ok := ms[m.MountPoint]
			if !ok {
				e = &mc{source: m.Source}
				ms[m.MountPoint] = e
			}
			for _, a := range m.Add {
				e.add = appendUnique(e.add, a)
			}
			for _, r := range m.Remove {
				e.remove = appendUnique(e.remove, r)
			}
			e.tags = appendUnique(e.tags, it.tag())
		}
	}
	if len(ms) == 0 {
		return File{}
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# Lines of /etc/fstab to change: replace each \"before\" line with the line below it,\n")
	b.WriteString("# then run the mount -o remount command the finding gives.\n")
	lines := parseFstab(ctx.Fstab.Value)
	for _, mp := range sortedKeys(ms) {
		e := ms[mp]
		fmt.Fprintf(&b, "\n# %s\n", strings.Join(e.tags, ", "))
		want := optionWords(e.add, e.remove)
		if !ctx.Fstab.OK() {
			fmt.Fprintf(&b, "# %s could not be read (%s): in the line that mounts %s, %s.\n", orFstab(ctx.Fstab.Source), ctx.Fstab.Err, mp, want)
			continue
		}
		l, ok, other := findFstab(lines, mp, e.source)
		switch {
		case !ok && other != "":
			fmt.Fprintf(&b, "# %s mounts %s at %s, but %s is mounted there now: no line is changed; check which is right, then %s.\n", ctx.Fstab.Source, other, mp, e.source, want)
		case !ok:
			fmt.Fprintf(&b, "# No line of %s mounts %s (%s is mounted there by something else: the kernel's root= for /, a systemd mount unit or a script): %s there, or add a line for it.\n", ctx.Fstab.Source, mp, hostOrDash(e.source), want)
		default:
			after, changed := l.withOptions(e.add, e.remove)
			if !changed {
				fmt.Fprintf(&b, "# %s:%d already has these options; the mount has not been remounted since:\n# %s\n", ctx.Fstab.Source, l.no, l.text)
				continue
			}
			fmt.Fprintf(&b, "# %s:%d before:\n# %s\n%s\n", ctx.Fstab.Source, l.no, l.text, after)
		}
	}
	return File{Path: "fstab-changes.txt", Content: b.String(), Mode: 0o644}
}

func optionWords(add, remove []string) string {
	var p []string
	if len(add) > 0 {
		p = append(p, "add "+strings.Join(add, ",")+" to the options column")
	}
	if len(remove) > 0 {
		p = append(p, "remove "+strings.Join(remove, ",")+" from it")
	}
	return strings.Join(p, " and ")
}

func orFstab(s string) string {
	if s == "" {
		return "/etc/fstab"
	}
	return s
}

func hostOrDash(s string) string {
	if s == "" {
		return "an unknown source"
	}
	return s
}
