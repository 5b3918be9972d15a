package report

import (
	"encoding/json"
	"io"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/waiver"
)

// JSONSchema names the document layout documented in docs/json-schema.md.
const JSONSchema = "dbhost.audit/1"

type jsonDoc struct {
	Schema    string         `json:"schema"`
	Host      jsonHost       `json:"host"`
	Instances []jsonInstance `json:"instances"`
	Summary   Summary        `json:"summary"`
	Findings  []jsonFinding  `json:"findings"`
	Notes     []string       `json:"notes"`
	// Waivers is what the waiver file did; absent when none was read.
	Waivers *waiver.Outcome `json:"waivers,omitempty"`
}

// jsonFinding is a finding with the last experiment on its check.
type jsonFinding struct {
	check.Finding
	Experiment *results.FindingVerdict `json:"experiment,omitempty"`
}

type jsonHost struct {
	Hostname    string    `json:"hostname"`
	Kernel      string    `json:"kernel"`
	OS          string    `json:"os,omitempty"`
	Source      string    `json:"source"`
	CollectedAt time.Time `json:"collected_at"`
	AsRoot      bool      `json:"as_root"`
	DurationMS  float64   `json:"duration_ms,omitempty"`
}

type jsonInstance struct {
	Name           string            `json:"name"`
	Engine         engine.Engine     `json:"engine"`
	Flavor         string            `json:"flavor"`
	Version        string            `json:"version,omitempty"`
	PID            int               `json:"pid"`
	User           string            `json:"user,omitempty"`
	DataDir        string            `json:"data_dir,omitempty"`
	ConfigFiles    []string          `json:"config_files,omitempty"`
	ConfigErrors   []string          `json:"config_errors,omitempty"`
	SettingsSource string            `json:"settings_source"`
	LiveError      string            `json:"live_error,omitempty"`
	Listen         []engine.Listener `json:"listen,omitempty"`
	Trust          engine.Trust      `json:"trust"`
	// Galera is a Galera node's cluster status as read live (or recorded
	// live in the snapshot); GaleraError why it could not be read.
	Galera      *engine.GaleraStatus `json:"galera,omitempty"`
	GaleraError string               `json:"galera_error,omitempty"`
}

func renderJSON(w io.Writer, a *Audit, _ Options) error {
	f := a.Facts
	doc := jsonDoc{
		Schema: JSONSchema,
		Host: jsonHost{Hostname: f.System.Hostname, Kernel: f.System.Kernel.Value, OS: f.System.OS,
			Source: f.Source, CollectedAt: f.Manifest.CollectedAt, AsRoot: f.AsRoot,
			DurationMS: float64(a.Duration.Microseconds()) / 1000},
		Instances: []jsonInstance{},
		Summary:   Summarize(a),
		Findings:  []jsonFinding{},
		Notes:     f.Notes,
		Waivers:   a.Waivers,
	}
	for _, fd := range a.Findings {
		doc.Findings = append(doc.Findings, jsonFinding{Finding: fd, Experiment: a.experiment(fd.ID)})
	}
	if doc.Notes == nil {
		doc.Notes = []string{}
	}
	for _, in := range f.Instances {
		ji := jsonInstance{Name: in.Name(), Engine: in.Engine, Flavor: in.Flavor,
			Version: in.Version, PID: in.PID, User: in.User, DataDir: in.DataDir, ConfigFiles: in.ConfigFiles,
			ConfigErrors: in.ConfigErrors, SettingsSource: in.SettingsSource, LiveError: in.LiveErr, Listen: in.Listen, Trust: in.Trust}
		if in.MySQL != nil && in.MySQL.Galera {
			ji.Galera, ji.GaleraError = in.MySQL.GaleraStatus, in.MySQL.GaleraErr
		}
		doc.Instances = append(doc.Instances, ji)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
