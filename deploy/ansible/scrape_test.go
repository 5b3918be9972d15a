package ansible

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type scrapeFile struct {
	ScrapeConfigs []struct {
		JobName        string `yaml:"job_name"`
		ScrapeInterval string `yaml:"scrape_interval"`
		Scheme         string `yaml:"scheme"`
		TLSConfig      *struct {
			CAFile string `yaml:"ca_file"`
		} `yaml:"tls_config"`
		BasicAuth *struct {
			Username     string `yaml:"username"`
			Password     string `yaml:"password"`
			PasswordFile string `yaml:"password_file"`
		} `yaml:"basic_auth"`
		StaticConfigs []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// TestScrapeConfig runs playbooks/scrape_config.yml on an inventory of
// three hosts (a wildcard listener, one on a given address, one reached
// over IPv6) and checks the job it writes, then that Prometheus accepts it
// (promtool check config) inside a minimal prometheus.yml: plain, and with
// TLS and basic auth. A label value that is YAML syntax comes back as it was.
func TestScrapeConfig(t *testing.T) {
	playbook := lintTool(t, "ansible-playbook", "ansible-core")
	promtool := lintTool(t, "promtool", "prometheus")
	book, err := filepath.Abs(filepath.Join(lintCollection, "playbooks", "scrape_config.yml"))
	if err != nil {
		t.Fatal(err)
	}
	hostile := `a: "b" # c, {d}` + "\n- e"
	inventory := map[string]any{"dbhost": map[string]any{"hosts": map[string]any{
		"db1": map[string]any{"ansible_host": "192.0.2.1"},
		"db2": map[string]any{"ansible_host": "192.0.2.2", "dbhost_listen_address": "198.51.100.2:9500"},
		"db3": map[string]any{"ansible_host": "2001:db8::3", "dbhost_scrape_labels": map[string]string{"team": hostile}},
	}}}
	wantTargets := map[string]string{"db1": "192.0.2.1:9437", "db2": "198.51.100.2:9500", "db3": "[2001:db8::3]:9437"}

	for _, tc := range []struct {
		name string
		vars map[string]any
		tls  bool
		user string
	}{
		{name: "plain", vars: map[string]any{}},
		{name: "tls-auth", tls: true, user: "prometheus", vars: map[string]any{
			"dbhost_tls_cert_path": "/etc/ssl/dbhost.crt",
			"dbhost_tls_key_path":  "/etc/ssl/private/dbhost.key",
			"dbhost_basic_auth_users": map[string]string{
				"prometheus": "$2b$10$abcdefghijklmnopqrstuuYGWZ0dCUe0Iy3M1FJZR8lqP6HWhyLlm",
			},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out", "dbhost-scrape.yml")
			vars := map[string]any{"dbhost_scrape_config": out}
			for k, v := range tc.vars {
				vars[k] = v
			}
			if tc.tls {
				vars["dbhost_scrape_ca_file"] = filepath.Join(dir, "ca.pem")
				vars["dbhost_scrape_password_file"] = filepath.Join(dir, "dbhost.password")
			}
			inv := scrapeWriteJSON(t, filepath.Join(dir, "inventory.json"), inventory)
			varsFile := scrapeWriteJSON(t, filepath.Join(dir, "vars.json"), vars)
			o, err := lintRun(dir, lintEnv(t, dir), playbook, "-i", inv, "-e", "@"+varsFile, book)
			if err != nil {
				t.Fatalf("ansible-playbook scrape_config.yml: %v\n%s", err, o)
			}
			if !strings.Contains(o, out) {
				t.Errorf("the play does not say where the file is:\n%s", o)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var f scrapeFile
			if err := yaml.Unmarshal(b, &f); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if len(f.ScrapeConfigs) != 1 {
				t.Fatalf("%d jobs, want 1:\n%s", len(f.ScrapeConfigs), b)
			}
			job := f.ScrapeConfigs[0]
			if job.JobName != "dbhost" || job.ScrapeInterval != "60s" {
				t.Errorf("job %q every %q, want dbhost every 60s", job.JobName, job.ScrapeInterval)
			}
			got := map[string]string{}
			for _, sc := range job.StaticConfigs {
				if len(sc.Targets) != 1 {
					t.Errorf("static config with targets %v, want one", sc.Targets)
					continue
				}
				got[sc.Labels["host"]] = sc.Targets[0]
				if sc.Labels["host"] == "db3" && sc.Labels["team"] != hostile {
					t.Errorf("label team = %q, want %q", sc.Labels["team"], hostile)
				}
			}
			if !reflect.DeepEqual(got, wantTargets) {
				t.Errorf("targets by host %v, want %v", got, wantTargets)
			}
			if tc.tls {
				if job.Scheme != "https" || job.TLSConfig == nil || job.TLSConfig.CAFile != vars["dbhost_scrape_ca_file"] {
					t.Errorf("scheme %q, tls_config %+v: want https with the CA file", job.Scheme, job.TLSConfig)
				}
				if job.BasicAuth == nil || job.BasicAuth.Username != tc.user || job.BasicAuth.Password != "" ||
					job.BasicAuth.PasswordFile != vars["dbhost_scrape_password_file"] {
					t.Errorf("basic_auth %+v: want user %s with a password file and no password", job.BasicAuth, tc.user)
				}
				for _, f := range []string{"ca.pem", "dbhost.password"} {
					if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			} else if job.Scheme == "https" || job.TLSConfig != nil || job.BasicAuth != nil {
				t.Errorf("plain exporters, but scheme %q, tls_config %+v, basic_auth %+v", job.Scheme, job.TLSConfig, job.BasicAuth)
			}

			// The snippet inside a minimal prometheus.yml, as its comment says.
			prom := filepath.Join(dir, "prometheus.yml")
			if err := os.WriteFile(prom, append([]byte("global:\n  scrape_interval: 60s\n"), b...), 0o644); err != nil {
				t.Fatal(err)
			}
			o, err = lintRun(dir, lintEnv(t, dir), promtool, "check", "config", prom)
			if err != nil || !strings.Contains(o, "SUCCESS") {
				t.Fatalf("promtool check config: %v\n%s\n%s", err, o, b)
			}
		})
	}
}

func scrapeWriteJSON(t testing.TB, file string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
