package host

import (
	"strings"
	"testing"
)

// secretKeys are spellings of settings and options that hold a password.
var secretKeys = []string{"password", "passwd", "requirepass", "masterauth", "wsrep_sst_auth", "sslpassword",
	"tls-key-file-pass", "api_key", "secret", "vault_token", "PGPASSWORD", "MYSQL_PWD", "REDISCLI_AUTH", "security.keyFilePassword"}

var schemes = []string{"postgresql", "postgres", "mysql", "mariadb", "mongodb", "mongodb+srv", "redis", "rediss", "amqp", "https"}

// keep reduces fuzzer text to characters that cannot end the token they are
// planted in, so every generated line is a well-formed credential.
func keep(s, allowed string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(allowed, r) && b.Len() < max {
			b.WriteRune(r)
		}
	}
	return b.String()
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// FuzzRedactPlanted plants a secret in every credential form with
// fuzzer-chosen spellings and surroundings, and asserts that no redaction
// path lets it through.
func FuzzRedactPlanted(f *testing.F) {
	for form := range 10 {
		f.Add(uint8(form), uint8(form), uint8(0), uint8(1), "xY7zQ", "app", "db1.example", "note ", " more")
	}
	f.Fuzz(func(t *testing.T, form, key, sep, quote uint8, secret, user, hostname, pre, post string) {
		secret = "S3cr3t" + keep(secret, alnum, 24)
		user = keep(user, alnum+"_.", 16)
		if user == "" {
			user = "u"
		}
		hostname = keep(hostname, alnum+".-", 32)
		if hostname == "" {
			hostname = "h"
		}
		// Free text around the credential: no quote, separator or
		// line break that would end or split it.
		plain := alnum + " _,."
		pre, post = keep(pre, plain, 20), keep(post, plain, 20)
		k := secretKeys[int(key)%len(secretKeys)]
		if key&0x80 != 0 {
			k = strings.ToUpper(k)
		}
		sp := []string{" = ", "=", " ", ": ", " =\t"}[int(sep)%5]
		q := []string{"", "'", `"`}[int(quote)%3]
		scheme := schemes[int(key)%len(schemes)]

		var line string
		var args []string
		switch form % 10 {
		case 0:
			line = k + sp + q + secret + q
		case 1:
			line = pre + scheme + "://" + user + ":" + secret + "@" + hostname + "/db" + post
		case 2:
			line = "primary_conninfo = 'host=" + hostname + " user=" + user + " password=" + secret + " " + post + "'"
		case 3:
			line = pre + "CREATE USER '" + user + "'@'%' IDENTIFIED BY " + q + secret + q + ";"
		case 4:
			line = "user " + user + " on >" + secret + " ~* +@all"
		case 5:
			line = "# " + k + sp + secret
		case 6:
			args = []string{"mysql", "-u" + user, "-p" + secret, "-h", hostname}
		case 7:
			args = []string{"app", "--" + strings.ToLower(k), secret, pre}
		case 8:
			args = []string{"env", strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(k)) + "=" + secret, "prog", post}
		case 9:
			args = []string{"redis-cli", "-h", hostname, "-a", secret, "ping"}
		}
		if line != "" {
			if got := RedactLine(line); strings.Contains(got, secret) {
				t.Fatalf("RedactLine(%q) = %q", line, got)
			}
			if got := string(Redact([]byte(pre + "\n" + line + "\n" + post))); strings.Contains(got, secret) {
				t.Fatalf("Redact(%q) = %q", line, got)
			}
			if m := assignment.FindStringSubmatch(line); m != nil {
				if got := RedactValue(m[1], m[3]); strings.Contains(got, secret) {
					t.Fatalf("RedactValue(%q, %q) = %q", m[1], m[3], got)
				}
			}
			args = []string{"prog", line}
		}
		if got := strings.Join(RedactArgs(args), "\x00"); strings.Contains(got, secret) {
			t.Fatalf("RedactArgs(%q) = %q", args, got)
		}
	})
}
