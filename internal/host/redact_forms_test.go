package host

import (
	"strings"
	"testing"
)

// redactForm is one way a credential is written. The secret must be gone
// after redaction and every keep fragment must remain (so a redacted file
// still says which user, host or setting it was).
type redactForm struct {
	name   string
	in     string
	secret string
	keep   []string
}

var lineForms = []redactForm{
	{"pg conninfo keyword", "primary_conninfo = 'host=db1 user=rep password=S3cretPw1 port=5432'", "S3cretPw1", []string{"primary_conninfo", "user=rep", "host=db1", "port=5432"}},
	{"pg conninfo quoted", `primary_conninfo = 'host=db1 password=''S3cret Pw2'' user=rep'`, "S3cret", []string{"host=db1"}},
	{"pg sslpassword", "primary_conninfo = 'host=db1 sslpassword=S3cretPw3'", "S3cretPw3", []string{"host=db1"}},
	{"postgresql URI", "primary_conninfo = 'postgresql://rep:S3cretPw4@db1:5432/postgres?sslmode=require'", "S3cretPw4", []string{"rep", "db1:5432", "sslmode=require"}},
	{"postgres URI multi-host", "conn = postgres://rep:S3cretPw5@h1:5432,h2:5433/db", "S3cretPw5", []string{"rep", "h1:5432,h2:5433/db"}},
	{"URI IPv6", "url = postgresql://u:S3cretPw6@[::1]:5432/db", "S3cretPw6", []string{"[::1]:5432"}},
	{"URI percent-encoded", "url = mysql://app:S3cret%40Pw7@db1/app", "S3cret%40Pw7", []string{"app", "db1/app"}},
	{"URI password with @", "url = mysql://app:S3cret@Pw8@db1/app", "S3cret@Pw8", []string{"db1/app"}},
	{"URI query password", "url = postgresql://db1/app?user=u&password=S3cretPw9&sslmode=verify-full", "S3cretPw9", []string{"sslmode=verify-full", "user=u"}},
	{"mysql URI", "dsn: mysql://root:S3cretPwA@tcp(127.0.0.1:3306)/", "S3cretPwA", []string{"root"}},
	{"mongodb URI", "  uri: \"mongodb://admin:S3cretPwB@m1:27017,m2:27017/?replicaSet=rs0\"", "S3cretPwB", []string{"admin", "replicaSet=rs0"}},
	{"mongodb+srv URI", "uri=mongodb+srv://app:S3cretPwC@cluster0.example.net/db", "S3cretPwC", []string{"cluster0.example.net"}},
	{"redis URI empty user", "replicaof-url redis://:S3cretPwD@r1:6379/0", "S3cretPwD", []string{"r1:6379"}},
	{"redis URI password only", "url rediss://S3cretPwE@r1:6380", "S3cretPwE", []string{"r1:6380"}},
	{"redis URI user and password", "url redis://default:S3cretPwF@r1:6379", "S3cretPwF", []string{"default", "r1:6379"}},
	{"amqp URI", "broker = amqp://guest:S3cretPwG@mq:5672/", "S3cretPwG", []string{"guest", "mq:5672"}},
	{"my.cnf password", "password = S3cretPwH", "S3cretPwH", []string{"password"}},
	{"my.cnf quoted password", `password="S3cret PwI"`, "S3cret", []string{"password"}},
	{"wsrep_sst_auth", "wsrep_sst_auth = sst:S3cretPwJ", "S3cretPwJ", []string{"wsrep_sst_auth"}},
	{"SQL identified by", "CREATE USER 'app'@'%' IDENTIFIED BY 'S3cretPwK';", "S3cretPwK", []string{"'app'@'%'"}},
	{"SQL identified with plugin by", "ALTER USER app IDENTIFIED WITH mysql_native_password BY \"S3cretPwL\"", "S3cretPwL", []string{"mysql_native_password"}},
	{"SQL set password", "SET PASSWORD FOR 'app'@'%' = PASSWORD('S3cretPwM')", "S3cretPwM", []string{"'app'@'%'"}},
	{"SQL change master", "CHANGE MASTER TO MASTER_HOST='m1', MASTER_PASSWORD='S3cretPwN', MASTER_PORT=3306", "S3cretPwN", []string{"MASTER_HOST='m1'", "MASTER_PORT=3306"}},
	{"SQL change source", "CHANGE REPLICATION SOURCE TO SOURCE_PASSWORD = 'S3cretPwO'", "S3cretPwO", []string{"SOURCE_PASSWORD"}},
	{"redis requirepass", "requirepass S3cretPwP", "S3cretPwP", []string{"requirepass"}},
	{"redis masterauth", "masterauth S3cretPwQ", "S3cretPwQ", []string{"masterauth"}},
	{"redis ACL", "user app on >S3cretPwR ~* +@all", "S3cretPwR", []string{"user app on", "+@all"}},
	{"redis AUTH command", "AUTH S3cretPwS", "S3cretPwS", []string{"AUTH"}},
	{"mongod YAML password", "    password: S3cretPwT", "S3cretPwT", []string{"password:"}},
	{"generic secret", "secret_key = S3cretPwU", "S3cretPwU", []string{"secret_key"}},
	{"api key", "api_key: S3cretPwV", "S3cretPwV", []string{"api_key"}},
	{"access key", "AWS_ACCESS_KEY=S3cretPwW", "S3cretPwW", []string{"AWS_ACCESS_KEY"}},
	{"token", "vault_token = S3cretPwX", "S3cretPwX", []string{"vault_token"}},
	{"basic auth header", "header = Authorization: Basic S3cretPwYdXNlcjpw", "S3cretPwYdXNlcjpw", []string{"Authorization: Basic"}},
	{"env PGPASSWORD", "Environment=PGPASSWORD=S3cretPwZ", "S3cretPwZ", []string{"PGPASSWORD"}},
	{"env REDISCLI_AUTH", "REDISCLI_AUTH=S3cretPw10", "S3cretPw10", []string{"REDISCLI_AUTH"}},
	{"env MYSQL_PWD", "MYSQL_PWD=S3cretPw11", "S3cretPw11", []string{"MYSQL_PWD"}},
}

// Lines that hold no secret stay exactly as they are.
var plainLines = []string{
	"port = 5432",
	"user = postgres",
	"listen_addresses = '*'",
	"log_line_prefix = 'http://example.com/path'",
	"password_encryption = scram-sha-256",
	"validate_password.length = 12",
	"passfile = /var/lib/postgresql/.pgpass",
	"  authorization: enabled",
	"  keyFile: /etc/mongo.key",
	"key_buffer_size = 16M",
	"requirepass \"\"",
	"url = https://example.com:8443/metrics",
	"user default on nopass ~* +@all",
}

func TestRedactLineForms(t *testing.T) {
	for _, f := range lineForms {
		got := RedactLine(f.in)
		if strings.Contains(got, f.secret) {
			t.Errorf("%s: RedactLine(%q) = %q keeps the secret", f.name, f.in, got)
		}
		for _, k := range f.keep {
			if !strings.Contains(got, k) {
				t.Errorf("%s: RedactLine(%q) = %q lost %q", f.name, f.in, got, k)
			}
		}
		if r := string(Redact([]byte("# header\n" + f.in + "\n"))); strings.Contains(r, f.secret) {
			t.Errorf("%s: Redact keeps the secret: %q", f.name, r)
		}
		// As a setting's value, under its own name or a neutral one.
		name, value := "setting", f.in
		if m := assignment.FindStringSubmatch(f.in); m != nil {
			name, value = strings.TrimSpace(m[1]), m[3]
		}
		if got := RedactValue(name, value); strings.Contains(got, f.secret) {
			t.Errorf("%s: RedactValue(%q, %q) = %q keeps the secret", f.name, name, value, got)
		}
	}
	for _, p := range plainLines {
		if got := RedactLine(p); got != p {
			t.Errorf("RedactLine(%q) = %q, want it unchanged", p, got)
		}
	}
}

func TestRedactArgsForms(t *testing.T) {
	cases := []struct {
		args   []string
		secret string
		keep   []string
	}{
		{[]string{"mysql", "-uroot", "-pS3cretA1", "app"}, "S3cretA1", []string{"-uroot", "app"}},
		{[]string{"/usr/bin/mariadb-dump", "--password=S3cretA2", "db"}, "S3cretA2", []string{"db"}},
		{[]string{"mysqladmin", "--password", "S3cretA3", "status"}, "S3cretA3", []string{"status"}},
		{[]string{"env", "MYSQL_PWD=S3cretA4", "mysql", "-p"}, "S3cretA4", []string{"MYSQL_PWD=", "-p"}},
		{[]string{"env", "PGPASSWORD=S3cretA5", "psql", "-p5432", "-h", "db1"}, "S3cretA5", []string{"-p5432", "db1"}},
		{[]string{"REDISCLI_AUTH=S3cretA6", "redis-cli", "ping"}, "S3cretA6", []string{"ping"}},
		{[]string{"redis-cli", "-h", "r1", "-a", "S3cretA7", "info"}, "S3cretA7", []string{"r1", "info"}},
		{[]string{"redis-cli", "--pass", "S3cretA8"}, "S3cretA8", []string{"redis-cli"}},
		{[]string{"redis-server", "--requirepass", "S3cretA9", "--port", "6380"}, "S3cretA9", []string{"--port", "6380"}},
		{[]string{"mongosh", "mongodb://admin:S3cretB1@m1:27017/admin"}, "S3cretB1", []string{"admin", "m1:27017"}},
		{[]string{"mongod", "--config", "/etc/mongod.conf", "--tlsCertificateKeyFilePassword", "S3cretB2"}, "S3cretB2", []string{"/etc/mongod.conf"}},
		{[]string{"psql", "postgresql://u:S3cretB3@db1/app"}, "S3cretB3", []string{"db1/app"}},
		{[]string{"postgres", "-D", "/d", "-c", "primary_conninfo=host=a password=S3cretB4"}, "S3cretB4", []string{"-D", "/d"}},
		{[]string{"pg_basebackup", "-d", "host=a user=r password=S3cretB5", "-D", "/b"}, "S3cretB5", []string{"user=r", "/b"}},
		{[]string{"app", "--db-url=postgres://u:S3cretB6@h/db"}, "S3cretB6", []string{"h/db"}},
		{[]string{"app", "--api-key", "S3cretB7"}, "S3cretB7", []string{"--api-key"}},
	}
	for _, c := range cases {
		got := strings.Join(RedactArgs(c.args), " ")
		if strings.Contains(got, c.secret) {
			t.Errorf("RedactArgs(%q) = %q keeps the secret", c.args, got)
		}
		for _, k := range c.keep {
			if !strings.Contains(got, k) {
				t.Errorf("RedactArgs(%q) = %q lost %q", c.args, got, k)
			}
		}
	}
	// Options that only look like secrets are kept.
	for _, args := range [][]string{
		{"psql", "-p5432", "-U", "postgres"},
		{"redis-server", "/etc/redis/redis.conf", "--port", "6379"},
		{"mysql", "-p"},
		{"mongod", "--auth", "--keyFile", "/etc/key"},
	} {
		if got := RedactArgs(args); strings.Join(got, " ") != strings.Join(args, " ") {
			t.Errorf("RedactArgs(%q) = %q, want it unchanged", args, got)
		}
	}
}
