package cli

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/metrics"
	"github.com/dbhost/dbhost/internal/testdb"
)

// firstAudit scrapes /metrics through get until the first audit's result is
// served and returns it.
func firstAudit(t *testing.T, get func() (int, string)) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := get()
		if code == http.StatusOK && strings.Contains(body, "dbhost_audit_last_success_timestamp_seconds ") {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit served within 60 s (last answer %d)", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func plainGet(t *testing.T, url string) func() (int, string) {
	return func() (int, string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// TestServeWithholdsSecurityFindings: serve with the unit's default
// listener (every interface, no TLS, no auth) serves no finding of a
// security check, says so in dbhost_security_findings_withheld and logs it
// once; loopback only, TLS with basic auth, or the opt-in flag serve them.
// The host's own security.mac and mem.swappiness checks are judged, nothing
// else (no database connection).
func TestServeWithholdsSecurityFindings(t *testing.T) {
	if !metrics.SecurityCheck("security.mac") || metrics.SecurityCheck("mem.swappiness") {
		t.Fatal("security.mac must be a security check, mem.swappiness not")
	}
	args := []string{"--no-connect", "--only", "security.mac,mem.swappiness", "--interval", "1h"}
	const secSeries, otherSeries = `dbhost_check_status{check="security.mac"`, `dbhost_check_status{check="mem.swappiness"`
	check := func(name, body string, shown bool) {
		t.Helper()
		if !strings.Contains(body, otherSeries) {
			t.Errorf("%s: no mem.swappiness series", name)
		}
		withheld := "dbhost_security_findings_withheld 1\n"
		if shown {
			withheld = "dbhost_security_findings_withheld 0\n"
		}
		if strings.Contains(body, secSeries) != shown || !strings.Contains(body, withheld) {
			t.Errorf("%s: security.mac served %v, want %v; want %q:\n%s", name, strings.Contains(body, secSeries), shown, withheld, grepLines(body, "security"))
		}
	}

	t.Run("all interfaces", func(t *testing.T) {
		port := testdb.FreePort(t)
		log := startServeAt(t, fmt.Sprintf(":%d", port), fmt.Sprintf("127.0.0.1:%d", port), args...)
		body := firstAudit(t, plainGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port)))
		check("--web.listen-address :PORT", body, false)
		firstAudit(t, plainGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port)))
		if n := strings.Count(log.String(), "withholding the findings of security checks"); n != 1 {
			t.Errorf("logged %d times, want once:\n%s", n, log.String())
		}
		if !strings.Contains(log.String(), "mysql.hardening.empty_passwords") {
			t.Errorf("the log does not name the checks withheld:\n%s", log.String())
		}
	})
	t.Run("opt-in", func(t *testing.T) {
		port := testdb.FreePort(t)
		startServeAt(t, fmt.Sprintf(":%d", port), fmt.Sprintf("127.0.0.1:%d", port), append(args, "--web.expose-security-findings")...)
		check("--web.expose-security-findings", firstAudit(t, plainGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))), true)
	})
	t.Run("loopback", func(t *testing.T) {
		addr := startServe(t, args...)
		check("--web.listen-address 127.0.0.1:PORT", firstAudit(t, plainGet(t, "http://"+addr+"/metrics")), true)
	})
	t.Run("TLS and basic auth", func(t *testing.T) {
		webConfig, cert, user, password := tlsAuth(t)
		port := testdb.FreePort(t)
		startServeAt(t, fmt.Sprintf(":%d", port), fmt.Sprintf("127.0.0.1:%d", port), append(args, "--web.config.file", webConfig)...)
		client := tlsClient(t, cert)
		body := firstAudit(t, func() (int, string) {
			req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
			req.SetBasicAuth(user, password)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		})
		check("--web.config.file with TLS and basic auth", body, true)
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestExposure: which listeners and web configurations serve the security
// findings.
func TestExposure(t *testing.T) {
	dir := t.TempDir()
	httpOnly := filepath.Join(dir, "http.yml")
	writeFile(t, httpOnly, []byte("http_server_config:\n  http2: false\n"), 0o600)
	users := filepath.Join(dir, "users.yml")
	writeFile(t, users, []byte("basic_auth_users:\n  prometheus: $2y$10$abcdefghijklmnopqrstuv\n"), 0o600)
	for _, c := range []struct {
		sf    *serveFlags
		serve bool
	}{
		{&serveFlags{addrs: listFlag{":9437"}}, false},
		{&serveFlags{addrs: listFlag{"0.0.0.0:9437"}}, false},
		{&serveFlags{addrs: listFlag{"127.0.0.1:9437", "10.0.0.5:9437"}}, false},
		{&serveFlags{addrs: listFlag{"db1.example.net:9437"}}, false},
		{&serveFlags{systemdSocket: true}, false},
		{&serveFlags{addrs: listFlag{":9437"}, webConfig: httpOnly}, false},
		{&serveFlags{addrs: listFlag{"127.0.0.1:9437", "[::1]:9437", "localhost:9437", "127.0.0.2:9437"}}, true},
		{&serveFlags{addrs: listFlag{":9437"}, webConfig: users}, true},
		{&serveFlags{systemdSocket: true, exposeSecurity: true}, true},
	} {
		why := c.sf.exposure()
		if (why == "") != c.serve {
			t.Errorf("%v %v: withheld because %q, want served %v", c.sf.addrs, c.sf.webConfig, why, c.serve)
		}
	}
}
