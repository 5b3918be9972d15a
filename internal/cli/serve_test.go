package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/dbhost/dbhost/internal/testdb"
)

// syncBuffer is a log the server writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs dbhost serve in this process on a free port until the
// test ends, and returns its address.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testdb.FreePort(t))
	startServeAt(t, addr, addr, args...)
	return addr
}

// startServeAt runs dbhost serve with --web.listen-address listen until
// the test ends, waits until it answers on dial, and returns its log.
func startServeAt(t *testing.T, listen, dial string, args ...string) *syncBuffer {
	t.Helper()
	addr := dial
	ctx, cancel := context.WithCancel(context.Background())
	log := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, Env{Stdout: io.Discard, Stderr: log}, append([]string{"serve", "--web.listen-address", listen}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != ExitOK {
				t.Errorf("serve exited %d:\n%s", code, log.String())
			}
		case <-time.After(10 * time.Second):
			t.Errorf("serve did not stop:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return log
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s", code, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve does not listen on %s:\n%s", addr, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tlsAuth writes a self-signed certificate for 127.0.0.1 and a web
// configuration (exporter-toolkit format) with TLS and one basic auth
// user; it returns the configuration, the certificate and the password.
func tlsAuth(t *testing.T) (webConfig, cert, user, password string) {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dbhost test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	user, password = "prometheus", "s3cret-scrape"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig = filepath.Join(dir, "web.yml")
	writeFile(t, webConfig, fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n", cert, keyFile, user, hash), 0o600)
	return webConfig, cert, user, password
}

func writeFile(t *testing.T, name string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, b, mode); err != nil {
		t.Fatal(err)
	}
}

func tlsClient(t *testing.T, cert string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(cert)
	if err != nil || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("certificate %s: %v", cert, err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// TLS and basic auth from the exporter-toolkit web configuration: a
// scrape without credentials, with wrong ones or over plain HTTP is
// refused; the right credentials get the metrics.
func TestServeTLSBasicAuth(t *testing.T) {
	webConfig, cert, user, password := tlsAuth(t)
	addr := startServe(t, "--web.config.file", webConfig, "--no-connect", "--only", "mem.swappiness", "--interval", "1h")
	client := tlsClient(t, cert)
	get := func(u, p string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://"+addr+"/metrics", nil)
		if u != "" {
			req.SetBasicAuth(u, p)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("", ""); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	if code, _ := get(user, password+"x"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", code)
	}
	code, body := get(user, password)
	if code != http.StatusOK || !strings.Contains(body, "dbhost_build_info{") {
		t.Errorf("right credentials: %d\n%.300s", code, body)
	}
	if strings.Contains(body, password) {
		t.Error("the password appears in the metrics")
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP was served: %.200s", b)
		}
	}
}

func TestServeRefusesBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "web.yml")
	writeFile(t, bad, []byte("tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent.key\n"), 0o600)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--web.config.file", bad}, "--web.config.file"},
		{[]string{"--collector.thp", "--no-collector.thp"}, "contradict"},
		{[]string{"--interval", "10ms"}, "too short"},
		{[]string{"--only", "no.such.check"}, "no check matches"},
	} {
		code, _, stderr := runCLI(t, append([]string{"serve"}, c.args...)...)
		if code != ExitError || !strings.Contains(stderr, c.says) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, stderr, c.says)
		}
	}
}
