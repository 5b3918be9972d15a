package cli

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
)

// A database that accepts connections and never answers (here a private
// PostgreSQL stopped with SIGSTOP) bounds the audit by --db-timeout, its
// findings that need the server say unknown, and scrapes during that audit
// stay fast: a scrape never waits for the host or a database.
func TestServeHungDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts a private PostgreSQL")
	}
	pg := testdb.Postgres(t, testdb.Options{})
	if err := syscall.Kill(pg.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pg.PID, syscall.SIGCONT) }) // before the server is stopped
	start := time.Now()
	addr := startServe(t, "--interval", "1h", "--db-timeout", "1s")
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string, time.Duration) {
		t0 := time.Now()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(t0)
	}
	var slowest time.Duration
	scrapes := 0
	var body string
	for {
		code, _, _ := get("/healthz")
		_, b, d := get("/metrics")
		scrapes++
		slowest = max(slowest, d)
		if code == 200 {
			body = b
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatal("no audit completed within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("audit with a hung PostgreSQL: %v; %d scrapes meanwhile, the slowest %v", took, scrapes, slowest)
	if took > 30*time.Second {
		t.Errorf("the audit took %v with --db-timeout 1s", took)
	}
	if slowest > time.Second {
		t.Errorf("a scrape during the audit took %v", slowest)
	}
	subject := fmt.Sprintf("postgres:%d", pg.Port)
	if !regexp.MustCompile(`(?m)^dbhost_instance_info\{[^}]*subject="` + regexp.QuoteMeta(subject) + `"`).MatchString(body) {
		t.Fatalf("the stopped server was not found:\n%s", body)
	}
	unknown := 0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "dbhost_check_status{") && strings.Contains(l, fmt.Sprintf("subject=%q", subject)) && strings.HasSuffix(l, " 2") {
			unknown++
		}
	}
	if unknown == 0 {
		t.Errorf("no finding of %s is unknown although it never answered", subject)
	}
}
