package host

import (
	"bytes"
	"regexp"
	"strings"
)

// Redacted replaces secret values in snapshots and output.
const Redacted = "<redacted>"

// secretKey matches setting names that carry credentials in the config
// dialects dbhost reads (postgresql.conf, my.cnf, mongod.conf, redis.conf).
var secretKey = regexp.MustCompile(`(?i)(pass(word|wd|phrase)|secret|requirepass|masterauth|sst_auth|token|credential|private[_-]?key)`)

// assignment splits "key = value", "key: value" and "key value" lines.
var assignment = regexp.MustCompile(`^(\s*[-]?\s*[A-Za-z0-9_.\-]+)(\s*[=:]\s*|\s+)(.*)$`)

// inlineSecret finds "password=..." inside connection strings
// (primary_conninfo, wsrep_sst_auth=user:pass is caught by its key).
var inlineSecret = regexp.MustCompile(`(?i)(password|passwd|pwd)\s*=\s*('[^']*'|"[^"]*"|[^\s'"]+)`)

// Redact returns config text with the values of password-bearing settings
// replaced. Keys, comments and line structure are kept, so a redacted file
// parses to the same settings except for the secrets.
func Redact(b []byte) []byte {
	lines := bytes.Split(b, []byte("\n"))
	for i, ln := range lines {
		lines[i] = []byte(RedactLine(string(ln)))
	}
	return bytes.Join(lines, []byte("\n"))
}

// RedactLine redacts one config line.
func RedactLine(s string) string {
	t := strings.TrimSpace(s)
	if t == "" || t[0] == '#' || t[0] == ';' || t[0] == '[' || t[0] == '!' {
		return s
	}
	if m := assignment.FindStringSubmatch(s); m != nil && secretKey.MatchString(m[1]) && strings.TrimSpace(m[3]) != "" {
		return m[1] + m[2] + Redacted
	}
	return inlineSecret.ReplaceAllString(s, "${1}="+Redacted)
}

// RedactArgs redacts secrets in a command line: --password=x, --password x,
// --requirepass x (Redis). Server command lines are all dbhost reads.
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case secretKey.MatchString(name) && hasValue:
			out[i] = a[:strings.IndexByte(a, '=')+1] + Redacted
		case secretKey.MatchString(name) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-"):
			out[i+1] = Redacted
			i++
		}
	}
	return out
}
