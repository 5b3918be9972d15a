package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// prometheusServer is the distribution's Prometheus, on a free port with
// its own storage, stopped with the test.
type prometheusServer struct {
	url string
	log *syncBuffer
}

func startPrometheus(t *testing.T, config string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	testdb.Need(t, "prometheus (Debian package prometheus)", err == nil)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, []byte(config), 0o600)
	if out, err := exec.Command("promtool", "check", "config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s\n%s", err, out, config)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testdb.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	p := &prometheusServer{url: "http://" + addr, log: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.log.String())
		}
	})
	p.waitFor(t, "Prometheus ready", func() (bool, string) {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	return p
}

// waitFor polls until ok, for at most 60 s.
func (p *prometheusServer) waitFor(t *testing.T, what string, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		var done bool
		if done, last = ok(); done {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("waiting for %s: %s", what, last)
}

// api GETs a Prometheus HTTP API path and decodes its data.
func (p *prometheusServer) api(t *testing.T, path string, q url.Values, data any) error {
	t.Helper()
	resp, err := http.Get(p.url + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %v: %.200s", path, err, b)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

// query runs an instant query and returns each series' value by the
// given label.
func (p *prometheusServer) query(t *testing.T, expr, by string) (map[string]float64, error) {
	var res []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	var data struct {
		Result *[]struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	data.Result = &res
	if err := p.api(t, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, r := range res {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v", expr, r.Value[1])
		}
		out[r.Metric[by]] = v
	}
	return out, nil
}

// one waits for an expression to return one series with the wanted value.
func (p *prometheusServer) one(t *testing.T, expr string, want float64) {
	t.Helper()
	p.waitFor(t, fmt.Sprintf("%s == %v", expr, want), func() (bool, string) {
		got, err := p.query(t, expr, "")
		if err != nil {
			return false, err.Error()
		}
		return len(got) == 1 && got[""] == want, fmt.Sprint(got)
	})
}

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeUnderPrometheus scrapes dbhost serve (TLS and basic auth) with
// the real Prometheus and the repository's alert rules, changes a kernel
// parameter through the journal, and sees the value and the finding flip
// in Prometheus and the setting-changed alert go active. A second job
// without credentials is refused.
func TestServeUnderPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts Prometheus, changes a kernel parameter")
	}
	j := testdb.Journal(t) // root, the host lock, restored at the end
	const param, path = "net.ipv4.tcp_fin_timeout", "/proc/sys/net/ipv4/tcp_fin_timeout"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := strconv.Atoi(journal.Current(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// net.fin_timeout passes at 30 s and below: move to the other side.
	next, origStatus, nextStatus := 60, 0.0, 1.0
	if orig > 30 {
		next, origStatus, nextStatus = 15, 1, 0
	}
	webConfig, cert, user, password := tlsAuth(t)
	addr := startServe(t, "--web.config.file", webConfig, "--no-connect", "--interval", "1s")
	pwFile := filepath.Join(t.TempDir(), "password")
	writeFile(t, pwFile, []byte(password), 0o600)
	rules := repoFile(t, "deploy/prometheus/dbhost-rules.yml")
	target := fmt.Sprintf("static_configs: [{targets: ['%s']}]", addr)
	p := startPrometheus(t, fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: dbhost
    scheme: https
    tls_config: {ca_file: %q}
    basic_auth: {username: %q, password_file: %q}
    %s
  - job_name: dbhost-noauth
    scheme: https
    tls_config: {ca_file: %q}
    %s
`, rules, cert, user, pwFile, target, cert, target))

	p.one(t, `up{job="dbhost"}`, 1)
	p.one(t, `up{job="dbhost-noauth"}`, 0)
	var targets struct {
		Active []struct {
			Labels    map[string]string `json:"labels"`
			LastError string            `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := p.api(t, "/api/v1/targets", nil, &targets); err != nil {
		t.Fatal(err)
	}
	for _, a := range targets.Active {
		if a.Labels["job"] == "dbhost-noauth" && !strings.Contains(a.LastError, "401") {
			t.Errorf("the scrape without credentials failed with %q, want 401", a.LastError)
		}
	}
	sysctl := fmt.Sprintf(`dbhost_sysctl{job="dbhost",name=%q}`, param)
	status := `dbhost_check_status{job="dbhost",check="net.fin_timeout",subject="host"}`
	p.one(t, sysctl, float64(orig))
	p.one(t, status, origStatus)
	if got, err := p.query(t, `dbhost_build_info{job="dbhost"}`, "version"); err != nil || len(got) != 1 {
		t.Errorf("dbhost_build_info: %v %v", got, err)
	}

	if err := j.Set(path, strconv.Itoa(next)); err != nil {
		t.Fatal(err)
	}
	p.one(t, sysctl, float64(next))
	p.one(t, status, nextStatus)
	p.waitFor(t, "DbhostSettingChanged for "+param, func() (bool, string) {
		var data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		if err := p.api(t, "/api/v1/alerts", nil, &data); err != nil {
			return false, err.Error()
		}
		for _, a := range data.Alerts {
			if a.Labels["alertname"] == "DbhostSettingChanged" && a.Labels["name"] == param && a.Labels["job"] == "dbhost" {
				return a.State == "pending", a.State
			}
		}
		return false, fmt.Sprint(data.Alerts)
	})
}
