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
var secretKey = regexp.MustCompile(`(?i)(pass(word|wd|phrase)|[-_]pass\b|secret|requirepass|masterauth|sst_auth|token|credential|private[_-]?key)`)

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
	if !mayHoldSecret(s) {
		return s
	}
	t := strings.TrimSpace(s)
	if t == "" || t[0] == '#' || t[0] == ';' || t[0] == '[' || t[0] == '!' {
		return s
	}
	if m := assignment.FindStringSubmatch(s); m != nil && secretKey.MatchString(m[1]) && !emptyValue(m[3]) {
		return m[1] + m[2] + Redacted
	}
	if r, ok := redactACLUser(s); ok {
		return r
	}
	return inlineSecret.ReplaceAllString(s, "${1}="+Redacted)
}

// secretHints are substrings one of which every line RedactLine changes
// must contain (secretKey's names, inlineSecret's, Redis ACL "user" lines):
// a cheap test before the regular expressions, which would otherwise run on
// every line of every config file and every live setting.
var secretHints = []string{"pass", "pwd", "secret", "masterauth", "sst_auth", "token", "credential", "private", "user"}

func mayHoldSecret(s string) bool {
	l := strings.ToLower(s)
	for _, h := range secretHints {
		if strings.Contains(l, h) {
			return true
		}
	}
	return false
}

// emptyValue reports a value that sets nothing (`requirepass ""`): keeping
// it lets a snapshot tell "no password" from "a password".
func emptyValue(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || v == `""` || v == "''"
}

// aclHash is a SHA-256 password hash in a Redis ACL rule (#hex, !hex).
var aclHash = regexp.MustCompile(`^[#!][0-9a-fA-F]{64}$`)

// redactACLUser redacts the passwords of a Redis ACL user definition
// (redis.conf `user` lines and aclfile lines): ">pw" and "<pw" rules, and
// "#hash"/"!hash" rules. Other rules are kept so the user's state (on,
// nopass) still reads the same.
func redactACLUser(s string) (string, bool) {
	toks := rawTokens(s)
	if len(toks) < 3 || !strings.EqualFold(toks[0], "user") {
		return s, false
	}
	changed := false
	for i, t := range toks[2:] {
		u := strings.Trim(t, `"'`)
		switch {
		case len(u) > 1 && (u[0] == '>' || u[0] == '<'):
			toks[i+2] = u[:1] + Redacted
			changed = true
		case aclHash.MatchString(u):
			toks[i+2] = u[:1] + Redacted
			changed = true
		}
	}
	if !changed {
		return s, false
	}
	lead := s[:len(s)-len(strings.TrimLeft(s, " \t"))]
	return lead + strings.Join(toks, " "), true
}

// rawTokens splits a line on white space, keeping quoted parts ("a b",
// 'a b') in one token with their quotes.
func rawTokens(s string) []string {
	var out []string
	start, quote := -1, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(s) {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == ' ' || c == '\t':
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
		default:
			if start < 0 {
				start = i
			}
			if c == '"' || c == '\'' {
				quote = c
			}
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// RedactArgs redacts secrets in a command line: --password=x, --password x,
// --requirepass x (Redis), -c name=value and --name=value whose name carries
// a secret (PostgreSQL), and password=... inside connection strings.
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = inlineSecret.ReplaceAllString(a, "${1}="+Redacted)
	}
	for i := 0; i < len(out); i++ {
		a := out[i]
		// "-c name=value" (PostgreSQL) and "-cname=value".
		if a == "-c" && i+1 < len(out) {
			out[i+1] = redactAssignment(out[i+1])
			i++
			continue
		}
		if strings.HasPrefix(a, "-c") && !strings.HasPrefix(a, "--") && strings.Contains(a, "=") {
			out[i] = "-c" + redactAssignment(a[2:])
			continue
		}
		// Redis "--user NAME rule..." takes ACL rules up to the next option.
		if a == "--user" {
			for i++; i < len(out) && !strings.HasPrefix(out[i], "--"); i++ {
				u := out[i]
				if (len(u) > 1 && (u[0] == '>' || u[0] == '<')) || aclHash.MatchString(u) {
					out[i] = u[:1] + Redacted
				}
			}
			i--
			continue
		}
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

func redactAssignment(s string) string {
	name, _, ok := strings.Cut(s, "=")
	if ok && secretKey.MatchString(name) {
		return name + "=" + Redacted
	}
	return s
}
