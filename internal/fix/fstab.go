package fix

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/conftext"
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

// mounts writes each mount change as the exact /etc/fstab line that
// mounts the filesystem now and the line to replace it with; rewriting the
// live fstab is left to a person.
func (r *renderer) mounts(items []Item) File {
	const file = "fstab-changes.txt"
	ctx := r.ctx
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
		b.WriteString("\n" + tagsComment(e.tags) + "\n")
		want := optionWords(e.add, e.remove)
		if !ctx.Fstab.OK() {
			commentf(&b, "%s could not be read (%s): in the line that mounts %s, %s.", orFstab(ctx.Fstab.Source), ctx.Fstab.Err, mp, want)
			continue
		}
		l, ok, other := findFstab(lines, mp, e.source)
		switch {
		case !ok && other != "":
			commentf(&b, "%s mounts %s at %s, but %s is mounted there now: no line is changed; check which is right, then %s.", ctx.Fstab.Source, other, mp, e.source, want)
		case !ok:
			commentf(&b, "No line of %s mounts %s (%s is mounted there by something else: the kernel's root= for /, a systemd mount unit or a script): %s there, or add a line for it.", ctx.Fstab.Source, mp, hostOrDash(e.source), want)
		default:
			after, changed := l.withOptions(e.add, e.remove)
			if !changed {
				commentf(&b, "%s:%d already has these options; the mount has not been remounted since:", ctx.Fstab.Source, l.no)
				b.WriteString(fstabComment(l.text))
				continue
			}
			if conftext.HasControl(strings.ReplaceAll(after, "\t", " ")) {
				r.refuse(file, e.tags, "fstab line "+quote(after), errControl)
				continue
			}
			commentf(&b, "%s:%d before:", ctx.Fstab.Source, l.no)
			b.WriteString(fstabComment(l.text) + after + "\n")
		}
	}
	return File{Path: file, Content: b.String(), Mode: 0o644}
}

// commentf writes a comment line; its string arguments are host text.
func commentf(b *strings.Builder, format string, a ...any) {
	for i, v := range a {
		if s, ok := v.(string); ok {
			a[i] = comment(s)
		}
	}
	fmt.Fprintf(b, "# "+format+"\n", a...)
}

// fstabComment shows an fstab line as a comment with its tabs, so that a
// person finds it as it is.
func fstabComment(line string) string {
	parts := strings.Split(line, "\t")
	for i, p := range parts {
		parts[i] = comment(p)
	}
	return "# " + strings.Join(parts, "\t") + "\n"
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
