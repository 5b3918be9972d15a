package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

func TestFleetReportCommand(t *testing.T) {
	dir := t.TempDir()
	snaps := filepath.Join(dir, "snaps")
	os.Mkdir(snaps, 0o700)
	for _, n := range []string{"baseline", "mem-thp-always", "storage-vda-tuned"} {
		if err := os.Symlink(fixture.Path(n), filepath.Join(snaps, n+".tar.gz")); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(snaps, "notes.txt"), []byte("not a snapshot, not named like one"), 0o600)
	html := filepath.Join(dir, "fleet.html")

	code, stdout, stderr := runCLI(t, "fleet", "report", "-o", html, snaps)
	page, _ := os.ReadFile(html)
	if code != ExitOK || stdout != "" || !strings.Contains(stderr, "wrote "+html+" (3 hosts") ||
		!strings.Contains(string(page), "storage-vda-tuned.tar.gz") || !strings.Contains(string(page), "<code>thp/enabled</code>") {
		t.Errorf("exit %d, stderr %q, %d bytes of HTML", code, stderr, len(page))
	}

	// An unreadable snapshot: listed, the report still written, exit 1.
	junk := filepath.Join(dir, "junk.tar.gz")
	os.WriteFile(junk, []byte("junk"), 0o600)
	code, stdout, stderr = runCLI(t, "fleet", "report", "--format", "json", "-o", "-", fixture.Path("baseline"), junk, fixture.Path("baseline"))
	var r struct {
		Summary struct{ Hosts, Unreadable int }
		Errors  []struct{ File, Error string }
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != ExitFindings || r.Summary.Hosts != 1 ||
		r.Summary.Unreadable != 1 || len(r.Errors) != 1 || r.Errors[0].File != junk || !strings.Contains(stderr, junk+": ") {
		t.Errorf("exit %d, %+v, %v, stderr %q", code, r, err, stderr)
	}

	// Nothing readable: the report lists why, and the exit status is 2.
	out := filepath.Join(dir, "none.html")
	code, _, _ = runCLI(t, "fleet", "report", "-o", out, junk)
	if page, err := os.ReadFile(out); code != ExitError || err != nil || !strings.Contains(string(page), "junk.tar.gz") {
		t.Errorf("nothing readable: exit %d, %v", code, err)
	}

	for _, c := range []struct {
		args   []string
		want   int
		stderr string
	}{
		{[]string{"fleet", "report", fixture.Path("baseline")}, ExitError, "-o FILE is required"},
		{[]string{"fleet", "report", "-o", out}, ExitError, "no snapshot given"},
		{[]string{"fleet", "report", "-o", out, "--format", "pdf", junk}, ExitError, `unknown format "pdf"`},
		{[]string{"fleet", "report", "-o", out, "-j", "-1", junk}, ExitError, "-j must be"},
		{[]string{"fleet", "report", "-o", filepath.Join(dir, "no", "such", "dir.html"), fixture.Path("baseline")}, ExitError, "dir.html: directory " + filepath.Join(dir, "no", "such") + " does not exist"},
		{[]string{"fleet", "frobnicate"}, ExitError, `unknown subcommand "frobnicate"`},
		{[]string{"fleet"}, ExitError, "Usage: dbhost fleet"},
		{[]string{"fleet", "-h"}, ExitOK, ""},
	} {
		if code, _, stderr := runCLI(t, c.args...); code != c.want || !strings.Contains(stderr, c.stderr) {
			t.Errorf("dbhost %s: exit %d, stderr %q; want %d, %q", strings.Join(c.args, " "), code, stderr, c.want, c.stderr)
		}
	}
}

// The HTML written to standard output is safe for a terminal too: text
// from a snapshot holds no control character.
func TestFleetReportEscapes(t *testing.T) {
	snap := hostileSnapshot(t)
	for _, format := range []string{"html", "json"} {
		code, stdout, stderr := runCLI(t, "fleet", "report", "--format", format, "-o", "-", snap, fixture.Path("mysql-private"))
		if code != ExitOK {
			t.Errorf("%s: exit %d: %s", format, code, stderr)
		}
		if format == "html" {
			if bad := rawControls(stdout); len(bad) > 0 {
				t.Errorf("HTML holds raw control characters %v", bad)
			}
			if !strings.Contains(stdout, `db1\x1b]0;pwned\a\x1b[2J\u009b1m\u202e\rX`) {
				t.Errorf("the hostile host name is not shown escaped")
			}
		}
	}
}

// --format json carries the page's ranking: the host holding what the
// others do not first, its rare setting first among settings, the checks
// failing on every host marked fleet-wide.
func TestFleetReportRanking(t *testing.T) {
	snaps := t.TempDir()
	for i, n := range []string{"baseline", "baseline", "baseline", "baseline", "mem-thp-never"} {
		if err := os.Symlink(fixture.Path(n), filepath.Join(snaps, fmt.Sprintf("db%d.tar.gz", i))); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runCLI(t, "fleet", "report", "--format", "json", "-o", "-", snaps)
	var r struct {
		Schema string
		Hosts  []struct {
			ID          string
			Distance    float64
			OffMajority []struct{ Key, Value string } `json:"off_majority"`
		}
		Settings []struct {
			Key    string
			Rarity float64
		}
		Checks []struct {
			ID        string
			Fail      int
			FleetWide bool `json:"fleet_wide"`
		}
		Summary struct {
			FleetWide int `json:"fleet_wide"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != ExitOK {
		t.Fatalf("exit %d, %v, stderr %q", code, err, stderr)
	}
	if r.Schema != "dbhost.fleet/2" || len(r.Hosts) != 5 {
		t.Fatalf("schema %q, %d hosts", r.Schema, len(r.Hosts))
	}
	if h := r.Hosts[0]; filepath.Base(h.ID) != "db4.tar.gz" || h.Distance <= 0 || len(h.OffMajority) == 0 || r.Hosts[1].Distance != 0 {
		t.Errorf("first host %+v, then distance %v: want mem-thp-never (db4) alone off the majority", h, r.Hosts[1].Distance)
	}
	if len(r.Settings) == 0 || r.Settings[0].Rarity <= 0 || !strings.HasPrefix(r.Settings[0].Key, "thp/") {
		t.Errorf("settings %+v: want a THP setting first", r.Settings)
	}
	wide := 0
	for _, c := range r.Checks {
		if c.FleetWide {
			wide++
			if c.Fail != 5 {
				t.Errorf("%s fleet-wide failing on %d of 5", c.ID, c.Fail)
			}
		}
	}
	if wide == 0 || wide != r.Summary.FleetWide {
		t.Errorf("%d checks fleet-wide, summary %d", wide, r.Summary.FleetWide)
	}
}
