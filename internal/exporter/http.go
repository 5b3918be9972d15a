package exporter

import (
	"fmt"
	"html/template"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics, /healthz and a small page at /.
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 8,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", e.healthz)
	mux.HandleFunc("GET /{$}", e.index)
	return mux
}

// healthz is 200 while the last good audit is recent (three intervals),
// 503 before the first one and when audits keep failing.
func (e *Exporter) healthz(w http.ResponseWriter, _ *http.Request) {
	r := e.last.Load()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case r.success.IsZero() && r.attempts == 0:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "first audit running")
	case r.success.IsZero():
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "no audit has completed yet")
	case time.Since(r.success) > 3*e.cfg.Interval:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "last good audit %s ago\n", time.Since(r.success).Round(time.Second))
	default:
		fmt.Fprintln(w, "ok")
	}
}

// page is parsed on first use: html/template's parse is start-up work
// that every command paid, and only serve's index shows it.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dbhost exporter</title>
<style>body{font:14px/1.5 system-ui,sans-serif;margin:2em auto;max-width:46em;color:#222}
h1{font-size:1.4em}table{border-collapse:collapse}td{padding:.2em 1em .2em 0}
.fail{color:#b00020}.unknown{color:#8a6d00}.pass{color:#1b5e20}code{background:#f3f3f3;padding:0 .3em}</style></head>
<body><h1>dbhost exporter</h1>
<p>Version {{.Version}}. It audits this host every {{.Interval}} and serves the last result at <a href="metrics">/metrics</a>; <a href="healthz">/healthz</a> says whether that result is fresh.</p>
<table>
<tr><td>Last good audit</td><td>{{if .Success.IsZero}}none yet{{else}}{{.Success.Format "2006-01-02 15:04:05 MST"}} ({{.Took}}){{end}}</td></tr>
{{if .Failed}}<tr><td>Last attempt</td><td class="fail">failed: {{.Failed}}</td></tr>{{end}}
<tr><td>Findings</td><td><span class="fail">{{.Fail}} failing</span>,{{if .Waived}} {{.Waived}} waived,{{end}} <span class="unknown">{{.Unknown}} unknown</span>, <span class="pass">{{.Pass}} passing</span>{{if .UntrustedFindings}}; {{.UntrustedFindings}} about untrusted instances{{end}}</td></tr>
<tr><td>Databases</td><td>{{range $i, $n := .Instances}}{{if $i}}, {{end}}<code>{{$n}}</code>{{else}}{{if .Untrusted}}none trusted{{else}}none found{{end}}{{end}}{{if .Untrusted}}; {{.Untrusted}} untrusted, not named{{end}}</td></tr>
<tr><td>Collectors</td><td>{{range $i, $n := .Collectors}}{{if $i}}, {{end}}{{$n}}{{end}}</td></tr>
</table>
<p>Run <code>dbhost audit</code> on the host for the reasons and fixes.</p>
</body></html>
`))
})

func (e *Exporter) index(w http.ResponseWriter, _ *http.Request) {
	r := e.last.Load()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page().Execute(w, map[string]any{
		"Version": e.cfg.Version, "Interval": e.cfg.Interval, "Success": r.success,
		"Took": r.took.Round(time.Millisecond), "Failed": r.failed,
		"Fail": r.summary.fail, "Waived": r.summary.waived, "Unknown": r.summary.unknown, "Pass": r.summary.pass,
		"Instances": r.summary.instances, "Untrusted": r.summary.untrusted,
		"UntrustedFindings": r.summary.untrustedFindings, "Collectors": e.cfg.Set.Names(),
	})
}
