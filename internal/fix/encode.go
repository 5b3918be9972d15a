package fix

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/conftext"
)

// One encoder per file format dbhost writes. Strings from the host (names
// of instances, units, users, devices, paths) reach root's files and
// commands, so each encoder either writes a value so that the format reads
// back exactly it, or refuses it with the reason; a refused value is left
// out and reported (Refusal), never written raw.

var (
	errControl    = conftext.ErrControl
	errBlanks     = errors.New("blanks at its ends would be lost")
	errBackslash  = errors.New("a backslash at its end would continue the line")
	errUnescape   = errors.New("tmpfiles would unescape its backslash")
	errExpansion  = errors.New("TuneD expands or cuts at its '$', '#' or '%'")
	errSubstitute = errors.New("udev substitutes or ends the value at its quote, backslash, '$' or '%'")
)

// encoded is line, unless one of the checks refused a part of it.
func encoded(line string, checks ...error) (string, error) {
	if err := firstErr(checks...); err != nil {
		return "", err
	}
	return line, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// refuseIf is err when bad.
func refuseIf(bad bool, err error) error {
	if bad {
		return err
	}
	return nil
}

// comment encodes the text of a '#' comment (see conftext.Comment).
func comment(s string) string { return conftext.Comment(s) }

// tagsComment is the comment line naming the findings that want a setting.
func tagsComment(tags []string) string { return "# " + comment(strings.Join(tags, ", ")) }

// plainValue refuses what no line-based format can hold: control
// characters, and blanks at either end, which parsers strip.
func plainValue(v string) error {
	switch {
	case conftext.HasControl(v):
		return errControl
	case strings.TrimSpace(v) != v:
		return errBlanks
	}
	return nil
}

// onlyChars reports whether s is not empty and every byte of it is an
// ASCII letter, digit or one of extra.
func onlyChars(s, extra string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

// ---- sysctl.d ----

// sysctlName accepts dotted or slashed parameter names of plain words; a
// leading '-' (ignore errors) or a glob would change what the line sets.
func sysctlName(k string) error {
	for _, part := range strings.Split(strings.ReplaceAll(k, "/", "."), ".") {
		if !conftext.PlainWord(part) {
			return errors.New("not a sysctl name")
		}
	}
	return nil
}

// sysctlLine is "key = value" of sysctl.d(5).
func sysctlLine(k, v string) (string, error) {
	return encoded(k+" = "+v, sysctlName(k), plainValue(v))
}

// ---- limits.d ----

// limitItems are the items pam_limits knows.
var limitItems = map[string]bool{"core": true, "data": true, "fsize": true, "memlock": true, "nofile": true, "rss": true,
	"stack": true, "cpu": true, "nproc": true, "as": true, "maxlogins": true, "maxsyslogins": true, "nonewprivs": true,
	"priority": true, "locks": true, "sigpending": true, "msgqueue": true, "nice": true, "rtprio": true}

// limitsDomain accepts *, a user, @group or %group name, or a uid/gid
// range (1000:, @500:600).
func limitsDomain(d string) bool {
	if d == "*" {
		return true
	}
	rest := d
	if d != "" && (d[0] == '@' || d[0] == '%') {
		rest = d[1:]
	}
	if lo, hi, ok := strings.Cut(rest, ":"); ok {
		return lo+hi != "" && strings.Trim(lo+hi, "0123456789") == ""
	}
	return conftext.PlainWord(strings.TrimSuffix(rest, "$"))
}

// limitsValue accepts a number, unlimited, infinity or -1.
func limitsValue(v string) bool {
	if v == "unlimited" || v == "infinity" {
		return true
	}
	_, err := strconv.ParseInt(v, 10, 64)
	return err == nil && v[0] != '+'
}

// limitsLine is one limits.conf(5) line, columns aligned.
func limitsLine(l LimitLine) (string, error) {
	switch {
	case !limitsDomain(l.Domain):
		return "", errors.New("the domain is not a user, group or range")
	case l.Type != "soft" && l.Type != "hard" && l.Type != "-":
		return "", errors.New("the type is not soft, hard or -")
	case !limitItems[l.Item]:
		return "", errors.New("not a pam_limits item")
	case !limitsValue(l.Value):
		return "", errors.New("the value is not a number, unlimited or infinity")
	}
	return fmt.Sprintf("%-12s %-5s %-8s %s", l.Domain, l.Type, l.Item, l.Value), nil
}

// ---- udev rules ----

// udevDevice accepts kernel names (sda, nvme0n1, dm-0, cciss!c0d0): no
// glob, '|' or quote that a KERNEL== match would read, and no path.
func udevDevice(d string) error {
	if !onlyChars(d, "_.:!+-") || d[0] == '.' || d[0] == '-' {
		return errors.New("not a block device name")
	}
	return nil
}

// udevAttr is `, ATTR{queue/x}="value"`.
func udevAttr(a, v string) (string, error) {
	name, ok := strings.CutPrefix(a, "queue/")
	switch {
	case !ok || !onlyChars(name, "_"):
		return "", errors.New("not a queue attribute")
	case conftext.HasControl(v):
		return "", errControl
	case strings.ContainsAny(v, "\"\\$%"):
		return "", errSubstitute
	}
	return fmt.Sprintf(", ATTR{%s}=\"%s\"", a, v), nil
}

// ---- tmpfiles.d ----

// sysfsPath accepts a clean absolute path under /sys of plain characters
// (tmpfiles unquotes, unescapes and expands specifiers in paths).
func sysfsPath(p string) error {
	if !strings.HasPrefix(p, "/sys/") || path.Clean(p) != p || !onlyChars(p, "/_.:,+@=-") {
		return errors.New("not a plain path under /sys")
	}
	return nil
}

// tmpfilesLine is a "w" line: write the argument to the path at boot.
func tmpfilesLine(p, arg string) (string, error) {
	return encoded("w "+p+" - - - - "+strings.ReplaceAll(arg, "%", "%%"),
		sysfsPath(p), plainValue(arg), refuseIf(strings.Contains(arg, `\`), errUnescape))
}

// ---- systemd units and TuneD profiles (ini) ----

// unitTypes are the unit suffixes systemd knows.
var unitTypes = map[string]bool{"service": true, "socket": true, "target": true, "device": true, "mount": true, "automount": true,
	"swap": true, "timer": true, "path": true, "slice": true, "scope": true}

// unitName applies systemd's unit name rules: NAME[@INSTANCE].TYPE of
// letters, digits and ":-_.\", at most 255 bytes; it names a directory.
func unitName(u string) error {
	bad := errors.New("not a unit name")
	dot := strings.LastIndexByte(u, '.')
	if len(u) > 255 || dot < 1 || !unitTypes[u[dot+1:]] {
		return bad
	}
	name, inst, templ := strings.Cut(u[:dot], "@")
	if !onlyChars(name, `:-_.\`) || name[0] == '.' || templ && inst != "" && !onlyChars(inst, `:-_.\@`) {
		return bad
	}
	return nil
}

// iniName accepts a section or key name: one plain word.
func iniName(s string) error {
	if !conftext.PlainWord(s) || strings.Contains(s, ".") {
		return errors.New("not a plain section or key name")
	}
	return nil
}

// iniValue refuses what ends or continues an ini line or is stripped.
func iniValue(v string) error {
	return firstErr(plainValue(v), refuseIf(strings.HasSuffix(v, `\`), errBackslash))
}

// unitLine is "Key=Value" with '%' doubled (systemd expands specifiers).
func unitLine(k, v string) (string, error) {
	return encoded(k+"="+strings.ReplaceAll(v, "%", "%%"), iniName(k), iniValue(v))
}

// tunedName accepts a TuneD profile name, or several separated by single
// spaces.
func tunedName(s string) error {
	for _, w := range strings.Split(s, " ") {
		if !conftext.PlainWord(w) {
			return errors.New("not a TuneD profile name")
		}
	}
	return nil
}

// tunedLine is "key=value"; TuneD expands ${...} (${f:exec:...} runs a
// command) and cuts '#' comments, so values holding them are refused.
func tunedLine(k, v string, keyOK func(string) error) (string, error) {
	return encoded(k+"="+v, keyOK(k), iniValue(v), refuseIf(strings.ContainsAny(v, "$#%"), errExpansion))
}

// ---- GRUB ----

// kernelParam accepts parameters of characters that mean nothing to the
// shell that sources /etc/default/grub nor to the kernel's parser.
func kernelParam(p string) error {
	if !onlyChars(p, "_.,:=+/@-") {
		return errors.New("holds characters that the shell reading the GRUB file would interpret")
	}
	return nil
}

// ---- shell commands shown to people ----

// shellWord writes s as one word of a POSIX shell command: as it is when
// no character means anything to the shell, else single-quoted.
func shellWord(s string) string {
	if onlyChars(s, "_@%+=:,./-") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellCommand joins words into a command, each quoted as needed.
func shellCommand(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellWord(w)
	}
	return strings.Join(q, " ")
}

// writeCommand writes value to a kernel file: echo where it prints the
// value as it is, printf where echo would read an option or an escape.
func writeCommand(value, file string) string {
	if value == "" || value[0] == '-' || strings.Contains(value, `\`) {
		return shellCommand("printf", `%s\n`, value) + " > " + shellWord(file)
	}
	return shellCommand("echo", value) + " > " + shellWord(file)
}

// quote shows a refused string escaped and cut to a readable length.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
