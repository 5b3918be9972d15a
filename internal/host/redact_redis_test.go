package host

import (
	"strings"
	"testing"
)

// Redis ACL users carry passwords as rules (">pw", "#sha256"); a snapshot
// must keep the rules that decide whether auth is on, never the secrets.
func TestRedactRedisACL(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	cases := []struct{ in, want string }{
		{"user default on >s3cret ~* &* +@all", "user default on >" + Redacted + " ~* &* +@all"},
		{`user alice on ">two words" ~cache:* +get`, "user alice on >" + Redacted + " ~cache:* +get"},
		{"user bob on #" + hash + " +@read", "user bob on #" + Redacted + " +@read"},
		{"user default on nopass ~* +@all", "user default on nopass ~* +@all"},
		{"user = mysql", "user = mysql"},
		{"user = mysql # not a hash", "user = mysql # not a hash"},
		{`requirepass ""`, `requirepass ""`},
		{"requirepass ''", "requirepass ''"},
		{"tls-key-file-pass hunter2", "tls-key-file-pass " + Redacted},
	}
	for _, c := range cases {
		if got := RedactLine(c.in); got != c.want {
			t.Errorf("RedactLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	args := RedactArgs([]string{"redis-server", "--user", "default", "on", ">pw1", "#" + hash, "--port", "7000"})
	s := strings.Join(args, " ")
	if strings.Contains(s, "pw1") || strings.Contains(s, hash) || !strings.Contains(s, "--port 7000") {
		t.Errorf("RedactArgs = %s", s)
	}
}
