package fix

import (
	"errors"
	"fmt"
	"strings"
)

// Small parsers that read the files dbhost renders the way the programs
// that load them do, for the property tests in encode_test.go. Where the
// program would read a line differently from how it was meant (a specifier,
// a substitution, an inline comment), the parser returns the value marked
// as changed, so that it matches nothing intended. Where the project has a
// parser that mimics a server (postgresql.conf, option files, redis.conf,
// unit files), the tests use that one instead.

// changed marks a value the reading program would not take as written.
const changed = "\x00changed:"

// contentLines splits a file into lines at '\n' only; every rendered file
// is first checked to hold no other line end (\r, NUL), which systemd's
// readers also end lines at.
func contentLines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// isComment: blank or starting with '#' or ';' after blanks.
func isComment(ln string) bool {
	ln = strings.TrimLeft(ln, " \t")
	return ln == "" || ln[0] == '#' || ln[0] == ';'
}

// parseSysctlD reads sysctl.d as systemd-sysctl does: "key = value", both
// trimmed; a key starting with '-' is kept as written (it would mean
// "ignore failure" and set another name).
func parseSysctlD(s string) ([]KV, error) {
	var out []KV
	for _, ln := range contentLines(s) {
		if isComment(ln) {
			continue
		}
		k, v, ok := strings.Cut(ln, "=")
		if !ok {
			return nil, fmt.Errorf("line without '=': %q", ln)
		}
		out = append(out, KV{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return out, nil
}

// parseLimits reads limits.conf as pam_limits does: everything after '#'
// is a comment, the rest four fields split at C isspace().
func parseLimits(s string) ([]LimitLine, error) {
	var out []LimitLine
	for _, ln := range contentLines(s) {
		if i := strings.IndexByte(ln, '#'); i >= 0 {
			ln = ln[:i]
		}
		f := strings.FieldsFunc(ln, func(r rune) bool { return strings.ContainsRune(" \t\n\v\f\r", r) })
		if len(f) == 0 {
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("%d fields: %q", len(f), ln)
		}
		out = append(out, LimitLine{f[0], f[1], f[2], f[3]})
	}
	return out, nil
}

// udevPair is one KEY op "value" of a udev rule.
type udevPair struct{ key, op, value string }

// parseUdev reads rules: one rule per line (a trailing backslash would
// continue it), comma-separated KEY op "value" pairs. Each rule must be
// dbhost's form: ACTION, SUBSYSTEM, KERNEL matches, then ATTR assignments;
// a KERNEL glob or alternative would match other devices, a '$' or '%'
// in an assignment is substituted by udev.
func parseUdev(s string) ([]UdevAttr, error) {
	var out []UdevAttr
	for _, ln := range contentLines(s) {
		if isComment(ln) {
			continue
		}
		if strings.HasSuffix(ln, `\`) {
			return nil, fmt.Errorf("continued line: %q", ln)
		}
		pairs, err := udevPairs(ln)
		if err != nil {
			return nil, err
		}
		if len(pairs) < 4 || pairs[0] != (udevPair{"ACTION", "==", "add|change"}) || pairs[1] != (udevPair{"SUBSYSTEM", "==", "block"}) ||
			pairs[2].key != "KERNEL" || pairs[2].op != "==" {
			return nil, fmt.Errorf("not dbhost's rule: %q", ln)
		}
		dev := pairs[2].value
		if strings.ContainsAny(dev, "*?[|") {
			dev = changed + dev
		}
		for _, p := range pairs[3:] {
			attr, ok := strings.CutPrefix(p.key, "ATTR{")
			if !ok || !strings.HasSuffix(attr, "}") || p.op != "=" {
				return nil, fmt.Errorf("not an ATTR assignment: %+v", p)
			}
			v := p.value
			if strings.ContainsAny(v, "$%") {
				v = changed + v
			}
			out = append(out, UdevAttr{dev, strings.TrimSuffix(attr, "}"), v})
		}
	}
	return out, nil
}

func udevPairs(ln string) ([]udevPair, error) {
	var out []udevPair
	for {
		ln = strings.TrimLeft(ln, " ,")
		if ln == "" {
			return out, nil
		}
		end := strings.IndexAny(ln, "=!+-:")
		if end <= 0 {
			return nil, fmt.Errorf("no operator: %q", ln)
		}
		var p udevPair
		p.key, ln = ln[:end], ln[end:]
		for _, op := range []string{"==", "!=", "+=", "-=", ":=", "="} {
			if strings.HasPrefix(ln, op) {
				p.op, ln = op, ln[len(op):]
				break
			}
		}
		if p.op == "" || !strings.HasPrefix(ln, `"`) {
			return nil, fmt.Errorf("no quoted value: %q", ln)
		}
		end = strings.IndexByte(ln[1:], '"')
		if end < 0 {
			return nil, fmt.Errorf("unterminated value: %q", ln)
		}
		p.value, ln = ln[1:end+1], ln[end+2:]
		if strings.Contains(p.value, `\`) {
			return nil, fmt.Errorf("escape in value: %q", p.value)
		}
		out = append(out, p)
	}
}

// parseTmpfiles reads "w" lines: six fields (unquoted and unescaped by
// tmpfiles, so neither may hold quotes or backslashes), then the argument,
// whose specifiers are expanded.
func parseTmpfiles(s string) ([]KV, error) {
	var out []KV
	for _, ln := range contentLines(s) {
		if isComment(ln) {
			continue
		}
		rest := ln
		var f []string
		for len(f) < 6 {
			rest = strings.TrimLeft(rest, " \t")
			i := strings.IndexAny(rest, " \t")
			if i < 0 {
				i = len(rest)
			}
			f, rest = append(f, rest[:i]), rest[i:]
		}
		if f[0] != "w" || f[2] != "-" || f[3] != "-" || f[4] != "-" || f[5] != "-" {
			return nil, fmt.Errorf("not dbhost's w line: %q", ln)
		}
		p := f[1]
		if strings.ContainsAny(p, "\"'\\%") {
			p = changed + p
		}
		out = append(out, KV{p, unspecify(strings.TrimLeft(rest, " \t"))})
	}
	return out, nil
}

// unspecify resolves systemd's specifiers as far as a test can: %% is a
// percent sign, any other specifier changes the value.
func unspecify(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 < len(v) && v[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		return changed + v
	}
	return b.String()
}

// parseGrub reads the GRUB drop-in as the shell that sources it: comments
// and exactly one assignment appending plain words to GRUB_CMDLINE_LINUX
// inside double quotes (where $, ` and \ would still act).
func parseGrub(s string) ([]string, error) {
	const head, tail = `GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX `, `"`
	var out []string
	n := 0
	for _, ln := range contentLines(s) {
		if isComment(ln) {
			continue
		}
		n++
		inner, ok := strings.CutPrefix(ln, head)
		if !ok || n > 1 || !strings.HasSuffix(inner, tail) {
			return nil, fmt.Errorf("not the one assignment: %q", ln)
		}
		inner = strings.TrimSuffix(inner, tail)
		if strings.ContainsAny(inner, "\"$`\\") {
			return nil, fmt.Errorf("the shell acts on %q", inner)
		}
		out = append(out, strings.Split(inner, " ")...)
	}
	return out, nil
}

// iniKV is one setting of an ini file.
type iniKV struct{ section, key, value string }

// parseTuned reads a TuneD profile: [sections], key=value lines trimmed,
// '#' and ';' comment lines; an indented line would continue a value, an
// inline '#' starts a comment, ${...} and % are expanded.
func parseTuned(s string) ([]iniKV, error) {
	var out []iniKV
	section := ""
	for _, ln := range contentLines(s) {
		switch {
		case ln == "":
			continue
		case ln[0] == ' ' || ln[0] == '\t':
			return nil, fmt.Errorf("continuation line: %q", ln)
		case ln[0] == '#' || ln[0] == ';':
			continue
		case ln[0] == '[':
			if !strings.HasSuffix(ln, "]") {
				return nil, fmt.Errorf("bad section: %q", ln)
			}
			section = ln[1 : len(ln)-1]
			continue
		}
		k, v, ok := strings.Cut(ln, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("not a setting: %q", ln)
		}
		if i := strings.IndexByte(v, '#'); i >= 0 {
			v = v[:i]
		}
		v = strings.TrimSpace(v)
		if strings.Contains(v, "${") || strings.Contains(v, "%") {
			v = changed + v
		}
		out = append(out, iniKV{section, strings.TrimSpace(k), v})
	}
	return out, nil
}

// errMeta: the shell would read a character of the command as syntax.
var errMeta = errors.New("shell syntax outside quotes")

// shellArgs splits a command as a POSIX shell would, for the subset a
// command dbhost shows may use: plain words, '...' quoting, \ escapes and
// a "> FILE" redirection (returned as the word ">"). Any other syntax
// (expansions, globs, separators, other quoting) is an error.
func shellArgs(cmd string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == ' ':
			if in {
				out, in = append(out, cur.String()), false
				cur.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated quote")
			}
			cur.WriteString(cmd[i+1 : i+1+j])
			i, in = i+1+j, true
		case c == '\\' && i+1 < len(cmd):
			cur.WriteByte(cmd[i+1])
			i, in = i+1, true
		case c == '>' && !in:
			out = append(out, ">")
		case strings.IndexByte("\"$`;&|<>(){}*?[]~#!\\\t\n\r", c) >= 0 || c < 0x20 || c == 0x7f:
			return nil, fmt.Errorf("%w: %q in %q", errMeta, c, cmd)
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}
