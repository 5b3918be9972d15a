package host

import (
	"strings"
	"testing"
)

func TestRedactLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"password = hunter2", "password = " + Redacted},
		{"password=hunter2", "password=" + Redacted},
		{"  requirepass s3cret", "  requirepass " + Redacted},
		{"masterauth foo", "masterauth " + Redacted},
		{"wsrep_sst_auth = sst:pw", "wsrep_sst_auth = " + Redacted},
		{"primary_conninfo = 'host=a user=r password=pw port=5432'", "primary_conninfo = 'host=a user=r password=" + Redacted + " port=5432'"},
		{"  keyFile: /etc/mongo.key", "  keyFile: /etc/mongo.key"},
		{"  authorization: enabled", "  authorization: enabled"},
		{"# password = commented", "# password = " + Redacted},
		{"#requirepass foobared", "#requirepass " + Redacted},
		{"# a comment about the password policy", "# a comment about the password policy"},
		{"port = 3306", "port = 3306"},
		{"[client]", "[client]"},
		{"password_encryption = scram-sha-256", "password_encryption = scram-sha-256"}, // a policy, judged by checks
	}
	for _, c := range cases {
		if got := RedactLine(c.in); got != c.want {
			t.Errorf("RedactLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRedactArgs(t *testing.T) {
	got := RedactArgs([]string{"redis-server", "--port", "6379", "--requirepass", "s3cret", "--masterauth=x", "-p5433",
		"-c", "primary_conninfo=host=a password=pw1", "-cssl_key_passphrase_command=x", "-c", "shared_buffers=1GB"})
	s := strings.Join(got, " ")
	if strings.Contains(s, "s3cret") || strings.Contains(s, "masterauth=x") || strings.Contains(s, "pw1") || strings.Contains(s, "passphrase_command=x") {
		t.Errorf("secret kept: %s", s)
	}
	if !strings.Contains(s, "--port 6379") || !strings.Contains(s, "-p5433") || !strings.Contains(s, "-c shared_buffers=1GB") {
		t.Errorf("non-secret changed: %s", s)
	}
}
