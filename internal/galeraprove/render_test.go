package galeraprove

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the text goldens in testdata")

// recorded reads a report a live proof wrote (go test -record).
func recorded(t *testing.T, name string) *Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != Schema {
		t.Fatalf("%s: schema %q", name, r.Schema)
	}
	return &r
}

// The text of the recorded live proofs, against goldens.
func TestTextGolden(t *testing.T) {
	for _, name := range []string{"prove3", "prove3g"} {
		t.Run(name, func(t *testing.T) {
			r := recorded(t, name)
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".txt")
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != string(want) {
				t.Errorf("text differs from %s (go test -run TestTextGolden -update):\n%s", golden, b.String())
			}
			// One row per scenario, each with its verdict.
			for _, res := range r.Results {
				row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(res.Scenario.Name) + `\s+.*\s(yes|NO)\s`).FindStringSubmatch(b.String())
				if row == nil || (row[1] == "yes") != res.Match {
					t.Errorf("%s: row %q, match %v", res.Scenario.Name, row, res.Match)
				}
			}
		})
	}
}

func TestHTMLRecorded(t *testing.T) {
	for _, name := range []string{"prove3", "prove3g"} {
		r := recorded(t, name)
		var b bytes.Buffer
		if err := r.WriteHTML(&b); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		if got := strings.Count(page, `<tr data-scenario=`) + strings.Count(page, `<tr class="mismatch" data-scenario=`); got != len(r.Results) {
			t.Errorf("%s: %d scenario rows, want %d", name, got, len(r.Results))
		}
		if got := strings.Count(page, `<g class="row" data-scenario=`); got != len(r.Results) {
			t.Errorf("%s: %d timeline bars, want %d", name, got, len(r.Results))
		}
		for _, res := range r.Results {
			if !strings.Contains(page, `data-scenario="`+res.Scenario.Name+`" data-match="`+map[bool]string{true: "true", false: "false"}[res.Match]+`"`) {
				t.Errorf("%s: no row for %s with its verdict", name, res.Scenario.Name)
			}
		}
		selfContained(t, page)
	}
}

// selfContained: nothing is fetched, nothing runs.
func selfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"<script", "http://", "https://", " src=", "<link", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	if !strings.Contains(page, `Content-Security-Policy" content="default-src 'none'`) {
		t.Error("no Content-Security-Policy")
	}
}

// Names come from the user and the lab: the page shows them, never runs
// them, and the terminal sees no escape sequence.
func TestRenderersEscape(t *testing.T) {
	r := recorded(t, "prove3")
	evil := "n<script>alert(1)</script>\x1b]0;owned\x07"
	r.Lab.Name = evil
	r.Results[0].Scenario.Name = evil
	r.Results[0].Nodes[0].Name = evil
	r.Results[0].Notes = append(r.Results[0].Notes, evil)
	r.Error = evil
	var h bytes.Buffer
	if err := r.WriteHTML(&h); err != nil {
		t.Fatal(err)
	}
	selfContained(t, h.String())
	if !strings.Contains(h.String(), "n&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the name is not shown escaped")
	}
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(txt.String(), "\x1b\x07") {
		t.Errorf("control characters reach the terminal:\n%q", txt.String())
	}
	if !strings.Contains(txt.String(), `\x1b]0;owned`) {
		t.Errorf("the name is not shown escaped:\n%s", txt.String())
	}
}

// JSON keeps what the renderers need and names its schema.
func TestJSONRoundTrip(t *testing.T) {
	r := recorded(t, "prove3g")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&back)
	if !bytes.Equal(b, b2) {
		t.Errorf("JSON does not round-trip:\n%s\n%s", b, b2)
	}
	for _, key := range []string{`"schema":"dbhost.galera_proof/1"`, `"suspect_timeout_ms":`, `"start_ms":`, `"stop_ms":`, `"predicted_primary":`, `"cluster_status":`, `"match":`, `"at_once":`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}

// An error that ends in a node's log keeps its lines, indented under it.
func TestTextStoppedEarly(t *testing.T) {
	r := recorded(t, "prove3")
	r.Error = "scenario \"x\": recover the lab: waited for node2; log of node2:\n  line one\n  line two\x1b[2J"
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Stopped early: scenario \"x\": recover the lab: waited for node2; log of node2:\n    line one\n    line two\\x1b[2J\n") {
		t.Errorf("text:\n%s", b.String())
	}
}
