package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// certPair writes a self-signed certificate valid until notAfter and its
// key under dir, named after name; it returns their paths and the key's
// PEM.
func certPair(t *testing.T, dir, name string, notAfter time.Time) (cert, key, keyPEM string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dbhost check-config"},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	writeFile(t, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	writeFile(t, key, []byte(keyPEM), 0o600)
	return cert, key, keyPEM
}

// serve --check-config on real files: a good TLS and basic auth
// configuration is described and passes; each broken one is named and
// exits 2; no output shows a hash, a password or a key.
func TestServeCheckConfig(t *testing.T) {
	dir := t.TempDir()
	// --root: the waiver file and /etc/default/dbhost are this tree's, not
	// the machine's.
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "etc/default"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/dbhost"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DBHOST_BUDGET", "")
	cert, key, keyPEM := certPair(t, dir, "good", time.Now().Add(30*24*time.Hour))
	oldCert, oldKey, oldKeyPEM := certPair(t, dir, "old", time.Now().Add(-24*time.Hour))
	otherCert, _, otherKeyPEM := certPair(t, dir, "other", time.Now().Add(30*24*time.Hour))
	password := "hunter2-scrape"
	hashB, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hash := string(hashB)
	secrets := []string{password[:7], hash, hash[7:], keyPEM, oldKeyPEM, otherKeyPEM}

	good := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prometheus: %s\n", cert, key, hash)
	cases := []struct {
		name, web string
		args      []string
		code      int
		want      []string // in the output (stdout and stderr)
	}{
		{name: "good", web: good, code: ExitOK, want: []string{
			"listen 127.0.0.1:9437: loopback\n",
			"web config WEB: TLS (cert " + cert + ", key " + key + ", valid until " + time.Now().Add(30*24*time.Hour).UTC().Format(time.DateOnly) + "), basic auth for 1 user\n",
			"interval 1m0s, audit timeout 1m0s, database timeout 3s\n",
			"checks: only net.keepalive\n",
			"waivers: none (no /etc/dbhost/waivers.yaml)\n",
			"budget: none (dbhost's own rule)\n",
		}},
		{name: "relative paths", web: "tls_server_config:\n  cert_file: good.crt\n  key_file: good.key\n", code: ExitOK,
			want: []string{"web config WEB: TLS (cert " + cert + ", key " + key + ", valid until"}},
		{name: "broken YAML", web: "tls_server_config:\n  cert_file: [" + cert + "\n", code: ExitError,
			want: []string{"dbhost serve: web config WEB: yaml: line"}},
		{name: "unknown key", web: strings.Replace(good, "  key_file:", "  keyfile:", 1), code: ExitError,
			want: []string{"dbhost serve: web config WEB: yaml: unmarshal errors: line 3: field keyfile not found in type web.TLSConfig"}},
		{name: "missing key file", web: strings.Replace(good, key, filepath.Join(dir, "gone.key"), 1), code: ExitError,
			want: []string{"dbhost serve: web config WEB: failed to read key_file (" + filepath.Join(dir, "gone.key") + ")"}},
		{name: "key of another certificate", web: strings.Replace(good, cert, otherCert, 1), code: ExitError,
			want: []string{"dbhost serve: web config WEB: failed to load X509KeyPair: tls: private key does not match public key"}},
		{name: "expired certificate", web: strings.NewReplacer(cert, oldCert, key, oldKey).Replace(good), code: ExitError,
			want: []string{"dbhost serve: web config WEB: TLS certificate " + oldCert + " expired on "}},
		// A password where the hash belongs: bcrypt's own error would
		// quote its first letter.
		{name: "password for a hash", web: strings.Replace(good, hash, password, 1), code: ExitError,
			want: []string{"dbhost serve: web config WEB: basic_auth_users: not a bcrypt hash for prometheus"}},
		// A password where the map belongs: the YAML parser would quote
		// its first letters.
		{name: "password for the users", web: "basic_auth_users: " + password + "\n", code: ExitError,
			want: []string{"dbhost serve: web config WEB: yaml: unmarshal errors: line 1: cannot unmarshal !!str into map"}},
		{name: "bad listen address", web: good, args: []string{"--web.listen-address=127.0.0.1:99999", "--web.listen-address=db_1:9437"}, code: ExitError,
			want: []string{
				`dbhost serve: listen 127.0.0.1:99999: port "99999": not a number`,
				`dbhost serve: listen db_1:9437: "db_1" is neither an IP address nor a host name`,
				"web config WEB: TLS (cert ",
				"dbhost serve: --check-config: 2 items wrong\n"}},
		{name: "no web config, wildcard", args: []string{"--web.listen-address=:9437", "--interval=5m", "--audit-timeout=1m"}, code: ExitOK,
			want: []string{
				"listen :9437: every interface\n",
				"web config: none (plain HTTP, no basic auth)\n",
				"security checks' findings withheld from /metrics: listening on :9437, beyond loopback",
				"interval 5m0s, audit timeout 1m0s,"}},
		{name: "flags", web: good, args: []string{"--interval=500ms", "--only=no.such", "--log.level=loud", "--collector.thp", "--no-collector.thp"}, code: ExitError,
			want: []string{
				"dbhost serve: interval 500ms: too short",
				`dbhost serve: checks: no check matches "no.such"`,
				"dbhost serve: log level loud:",
				"dbhost serve: collectors: --collector.thp and --no-collector.thp contradict",
				"dbhost serve: --check-config: 4 items wrong\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"serve", "--check-config", "--root=" + root, "--only=net.keepalive"}
			web := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yml")
			if tc.web != "" {
				writeFile(t, web, []byte(tc.web), 0o600)
				args = append(args, "--web.config.file="+web)
			}
			if tc.args == nil {
				args = append(args, "--web.listen-address=127.0.0.1:9437")
			}
			args = append(args, tc.args...)
			out := checkConfigRun(t, tc.code, args...)
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "WEB", web); !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("output shows a secret %.12q...", s)
				}
			}
		})
	}

	// The waiver file and the budget serve would read: the host's default
	// file, /etc/default/dbhost, and the environment over it.
	writeFile(t, filepath.Join(root, "etc/dbhost/waivers.yaml"), []byte("waivers:\n  - check: net.keepalive\n    subject: host\n    reason: test\n"), 0o644)
	out := checkConfigRun(t, ExitOK, "serve", "--check-config", "--root="+root, "--budget=postgres:5432=40%")
	for _, w := range []string{"waivers /etc/dbhost/waivers.yaml: 1 waiver\n", "budget --budget: postgres:5432=40%\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	writeFile(t, filepath.Join(root, "etc/dbhost/waivers.yaml"), []byte("waivers:\n  - check: net.keepalive\n    reason: no subject\n"), 0o644)
	t.Setenv("DBHOST_BUDGET", "postgres:5432=140%")
	out = checkConfigRun(t, ExitError, "serve", "--check-config", "--root="+root)
	for _, w := range []string{"dbhost serve: waivers: ", "dbhost serve: budget DBHOST_BUDGET (environment): "} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	os.Unsetenv("DBHOST_BUDGET")
	writeFile(t, filepath.Join(root, "etc/default/dbhost"), []byte("ARGS=\"\"\nDBHOST_BUDGET=\"mysql:3306=2GiB\"\n"), 0o644)
	out = checkConfigRun(t, ExitOK, "serve", "--check-config", "--root="+root, "--no-waivers")
	for _, w := range []string{"waivers: none (--no-waivers)\n", "budget /etc/default/dbhost: mysql:3306=2GiB\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
}

// checkConfigRun runs dbhost with args, which must not take long (no
// audit, no listener), wants exit code, and returns stdout and stderr.
func checkConfigRun(t *testing.T, code int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	got := run(ctx, Env{Stdout: &stdout, Stderr: &stderr}, args)
	out := stdout.String() + stderr.String()
	if got != code {
		t.Errorf("dbhost %s: exit %d, want %d:\n%s", strings.Join(args, " "), got, code, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("dbhost %s took %v: more than a check", strings.Join(args, " "), d)
	}
	return out
}
