package host

import (
	"bytes"
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/textio"
)

// Redacted replaces secret values in snapshots and output.
const Redacted = "<redacted>"

// secretKey matches setting names that carry credentials in the config
// dialects dbhost reads (postgresql.conf, my.cnf, mongod.conf, redis.conf)
// and in environment assignments on command lines (PGPASSWORD, MYSQL_PWD,
// REDISCLI_AUTH).
var secretKey = textio.LazyRegexp(`(?i)(pass(word|wd|phrase)|[-_]pass\b|^-*pass$|[-_]pwd\b|^pwd$|secret|requirepass|masterauth|[-_]auth$|^auth$|token|credential|private[_-]?key|api[-_]?key|access[-_]?key)`)

// policyKey matches names secretKey would take for a secret that only set
// a policy about passwords: their values are what checks judge
// (password_encryption = md5) and hold no credential.
var policyKey = textio.LazyRegexp(`(?i)^(password_encryption|password_(reuse|history|lifetime|require|required|check)\w*|default_password_lifetime|disconnect_on_expired_password|validate_password\W?\w*|passfile|\w*_supports_reload)$`)

// secretName reports whether a setting's name says its value is a secret.
func secretName(name string) bool {
	name = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(name), "-"))
	// Every name secretKey matches holds one of these; most setting names
	// hold none, and the regular expression costs more than the test.
	l := strings.ToLower(name)
	if !strings.Contains(l, "pass") && !strings.Contains(l, "pwd") && !strings.Contains(l, "secret") &&
		!strings.Contains(l, "auth") && !strings.Contains(l, "token") && !strings.Contains(l, "credential") &&
		!strings.Contains(l, "key") {
		return false
	}
	return secretKey.MatchString(name) && !policyKey.MatchString(name)
}

// assignment splits "key = value", "key: value" and "key value" lines.
var assignment = textio.LazyRegexp(`^(\s*[-]?\s*[A-Za-z0-9_.\-]+)(\s*[=:]\s*|\s+)(.*)$`)

// inlineSecret finds "password=..." inside connection strings and query
// strings (primary_conninfo, ?password=, sslpassword=, MASTER_PASSWORD='x';
// wsrep_sst_auth=user:pass is caught by its key), and options in the middle
// of a line (pg_hba.conf's ldapbindpasswd=, radiussecrets=).
// A value quoted inside a single-quoted postgresql.conf string doubles its
// quotes: password=”p w”.
var inlineSecret = textio.LazyRegexp(`(?i)(password|passwd|pwd|secrets?)\s*=\s*(''(?:[^']|\\')*''|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s'"&;,)]+)`)

// uriUserinfo finds the password of a URI's userinfo in any scheme
// (postgresql://u:PW@h, mysql://, mongodb+srv://, redis://:PW@h, amqp://,
// and scheme-relative //u:PW@h):
// group 1 is the scheme, user and colon, group 2 the password. A password
// may hold anything but the characters that end the authority.
var uriUserinfo = textio.LazyRegexp(`(?i)((?:[a-z][a-z0-9+.\-]*:)?//[^\s/?#@:'"]*:)([^\s/?#@'"]*(?:@[^\s/?#@'"]*)*)@`)

// redisUserOnly finds redis://PW@host: Redis clients take a userinfo
// without a colon as the password.
var redisUserOnly = textio.LazyRegexp(`(?i)((?:redis|rediss|valkey|valkeys)://)([^\s/?#@:'"]+)@`)

// identifiedBy finds SQL that sets a password (CREATE USER ... IDENTIFIED
// BY 'pw', IDENTIFIED WITH plugin BY 'pw', SET PASSWORD = 'pw',
// PASSWORD('pw')).
var identifiedBy = textio.LazyRegexp(`(?i)(identified\s+(?:with\s+\S+\s+)?(?:by|as)\s+(?:password\s+)?|set\s+password\s*(?:for\s+\S+\s*)?=\s*(?:password\s*\(\s*)?|\bpassword\s*\(\s*)('[^']*'|"[^"]*"|[^\s;,)]+)`)

// bearer finds HTTP credentials in a header-like value.
var bearer = textio.LazyRegexp(`(?i)\b(basic|bearer)\s+([A-Za-z0-9+/=._~\-]{8,})`)

// redactInline redacts the secrets a value carries whatever its name:
// URI passwords, key=value passwords, SQL and HTTP credentials.
func redactInline(s string) string {
	l := strings.ToLower(s)
	if strings.Contains(l, "//") {
		s = uriUserinfo.ReplaceAllString(s, "${1}"+Redacted+"@")
		s = redisUserOnly.ReplaceAllString(s, "${1}"+Redacted+"@")
	}
	if strings.Contains(l, "password") || strings.Contains(l, "passwd") || strings.Contains(l, "pwd") || strings.Contains(l, "secret") {
		s = inlineSecret.ReplaceAllString(s, "${1}="+Redacted)
	}
	if strings.Contains(l, "identified") || strings.Contains(l, "password") {
		s = identifiedBy.ReplaceAllString(s, "${1}'"+Redacted+"'")
	}
	if strings.Contains(l, "basic") || strings.Contains(l, "bearer") {
		s = bearer.ReplaceAllString(s, "${1} "+Redacted)
	}
	return s
}

// RedactValue redacts one setting's value: all of it when its name marks a
// secret (an empty value stays empty: "no password" is what checks judge),
// else the secrets it carries inline (a URI's password in any setting).
func RedactValue(name, value string) string {
	if secretName(name) && !emptyValue(value) {
		return Redacted
	}
	if strings.EqualFold(strings.TrimSpace(name), "user") {
		if r, ok := redactACLUser("user " + value); ok {
			return strings.TrimPrefix(r, "user ")
		}
	}
	if !mayHoldSecret(value) {
		return value
	}
	return redactInline(value)
}

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
	if t == "" || t[0] == '[' || t[0] == '!' {
		return s
	}
	// A commented-out password is still a password (#requirepass x).
	if t[0] == '#' || t[0] == ';' {
		lead := len(s) - len(strings.TrimLeft(s, " \t#;"))
		return s[:lead] + RedactLine(s[lead:])
	}
	if m := assignment.FindStringSubmatch(s); m != nil && secretName(m[1]) && !emptyValue(m[3]) {
		return m[1] + m[2] + Redacted
	}
	if r, ok := redactACLUser(s); ok {
		return r
	}
	if f := strings.Fields(t); len(f) > 1 && strings.EqualFold(f[0], "auth") {
		return s[:len(s)-len(strings.TrimLeft(s, " \t"))] + f[0] + " " + Redacted // a Redis AUTH command
	}
	return redactInline(s)
}

// secretHints are substrings one of which every line RedactLine changes
// must contain (secretKey's names, inlineSecret's, Redis ACL "user" lines,
// URIs, SQL and HTTP credentials):
// a cheap test before the regular expressions, which would otherwise run on
// every line of every config file and every live setting.
var secretHints = []string{"pass", "pwd", "secret", "auth", "token", "credential", "key", "user", "//", "identified", "bearer"}

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
var aclHash = textio.LazyRegexp(`^[#!][0-9a-fA-F]{64}$`)

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
// a secret (PostgreSQL), NAME=value environment assignments (env
// PGPASSWORD=x ...), passwords inside connection strings and URIs, and the
// short options of clients that take a password: mysql -px, redis-cli -a x.
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		switch {
		case strings.ContainsAny(a, " \t") && mayHoldSecret(a):
			out[i] = RedactLine(a) // a whole config line as one argument
		case mayHoldSecret(a):
			out[i] = redactInline(a)
		}
	}
	prog := ""
	for i := 0; i < len(out); i++ {
		a := out[i]
		// The program: after "env", "sudo -u x" and assignments, the first
		// word names what the short options mean.
		if prog == "" && !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
			if b := path.Base(a); b != "env" && b != "sudo" && b != "nohup" && b != "exec" {
				prog = b
			}
		}
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
		// Redis "--user NAME rule..." and "ACL SETUSER NAME rule..." take
		// ACL rules up to the next option.
		if a == "--user" || strings.EqualFold(a, "setuser") {
			for i++; i < len(out) && !strings.HasPrefix(out[i], "--"); i++ {
				u := out[i]
				if (len(u) > 1 && (u[0] == '>' || u[0] == '<')) || aclHash.MatchString(u) {
					out[i] = u[:1] + Redacted
				}
			}
			i--
			continue
		}
		switch {
		case mysqlClient(prog) && len(a) > 2 && strings.HasPrefix(a, "-p") && !strings.HasPrefix(a, "--"):
			out[i] = "-p" + Redacted // -pSECRET; a bare -p prompts
			continue
		case redisClient(prog) && a == "-a" && i+1 < len(out):
			out[i+1] = Redacted
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			// An environment assignment (env PGPASSWORD=x prog) or a
			// name=value argument.
			if name, v, ok := strings.Cut(a, "="); ok && envName(name) && secretName(name) && !emptyValue(v) {
				out[i] = name + "=" + Redacted
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case secretName(name) && hasValue:
			out[i] = a[:strings.IndexByte(a, '=')+1] + Redacted
		case secretName(name) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-"):
			out[i+1] = Redacted
			i++
		}
	}
	return out
}

// mysqlClient reports a MySQL or MariaDB program, whose -pSECRET is a
// password (psql's -p5432 is a port).
func mysqlClient(prog string) bool {
	return strings.HasPrefix(prog, "mysql") || strings.HasPrefix(prog, "mariadb")
}

// redisClient reports redis-cli and its kin, whose -a takes a password.
func redisClient(prog string) bool {
	return strings.HasSuffix(prog, "-cli") || strings.HasSuffix(prog, "-benchmark")
}

func envName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c == '.' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func redactAssignment(s string) string {
	name, _, ok := strings.Cut(s, "=")
	if ok && secretName(name) {
		return name + "=" + Redacted
	}
	return s
}
