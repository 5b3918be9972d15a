package waiver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

const good = `# accepted findings on the db fleet
waivers:
  - check: mem.swappiness
    subject: host
    reason: >
      swap is the batch job's cushion
      (TICKET-42)
    expires: 2026-12-31
  - check: mysql.hardening.empty_passwords
    subject: mysql:3306
    host: vm
    reason: lab box
    expires: 2026-06-01T12:00:00+02:00
  - check: mem.dirty
    subject: "*"
    reason: no expiry, on purpose
`

// TestParse: a good file's entries, with the reason folded to one line, a
// date read as the end of its day UTC, an RFC 3339 time in UTC, and each
// entry's file and line.
func TestParse(t *testing.T) {
	f, err := Parse("w.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entries) != 3 {
		t.Fatalf("%d entries: %+v", len(f.Entries), f.Entries)
	}
	e := f.Entries[0]
	if e.Check != "mem.swappiness" || e.Subject != "host" || e.Reason != "swap is the batch job's cushion (TICKET-42)" || e.Where != "w.yaml:3" {
		t.Errorf("entry 1: %+v", e)
	}
	if want := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC); !e.Expires.Equal(want) {
		t.Errorf("date expiry %v, want %v", e.Expires, want)
	}
	e = f.Entries[1]
	if want := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC); !e.Expires.Equal(want) || e.Host != "vm" || e.Where != "w.yaml:9" {
		t.Errorf("entry 2: %+v", e)
	}
	if e := f.Entries[2]; !e.Expires.IsZero() || e.Subject != "*" {
		t.Errorf("entry 3: %+v", e)
	}
	for _, empty := range []string{"", "# nothing waived yet\n", "waivers:\n", "waivers: []\n", "---\n"} {
		f, err := Parse("w.yaml", []byte(empty))
		if err != nil || len(f.Entries) != 0 {
			t.Errorf("%q: %v %v", empty, f, err)
		}
	}
}

// TestParseErrors: every refusal names the file and the line, and what is
// wrong.
func TestParseErrors(t *testing.T) {
	entry := func(body string) string { return "waivers:\n  - " + strings.ReplaceAll(body, "\n", "\n    ") + "\n" }
	cases := []struct{ name, text, want string }{
		{"unknown key", entry("check: mem.swappiness\nsubject: host\nreason: r\nexpiry: 2026-01-01"), `w.yaml:5: unknown key "expiry"`},
		{"unknown check", entry("check: mem.swapiness\nsubject: host\nreason: r"), `w.yaml:2: unknown check "mem.swapiness"`},
		{"domain", entry("check: mem.thp\nsubject: host\nreason: r"), `w.yaml:2: check "mem.thp" names a domain of`},
		{"domain star", entry("check: mem.*\nsubject: host\nreason: r"), `names a domain`},
		{"no reason", entry("check: mem.swappiness\nsubject: host"), `w.yaml:2: mem.swappiness on host: reason is required`},
		{"blank reason", entry("check: mem.swappiness\nsubject: host\nreason: '  '"), `reason is required`},
		{"no subject", entry("check: mem.swappiness\nreason: r"), `w.yaml:2: mem.swappiness: subject is required`},
		{"no check", entry("subject: host\nreason: r"), `w.yaml:2: check is required`},
		{"bad date", entry("check: mem.swappiness\nsubject: host\nreason: r\nexpires: 31/12/2026"), `w.yaml:5: expires "31/12/2026": want a date`},
		{"bad day", entry("check: mem.swappiness\nsubject: host\nreason: r\nexpires: 2026-02-30"), `w.yaml:5: expires "2026-02-30"`},
		{"list value", entry("check: [mem.swappiness, mem.dirty]\nsubject: host\nreason: r"), `w.yaml:2: check: want a single value`},
		{"twice", entry("check: mem.swappiness\ncheck: mem.dirty\nsubject: host\nreason: r"), `w.yaml:3: check given twice`},
		{"duplicate", entry("check: mem.swappiness\nsubject: host\nreason: r") + "  - check: mem.swappiness\n    subject: host\n    reason: again\n", `w.yaml:5: mem.swappiness on host waived again (first at w.yaml:2)`},
		{"space in subject", entry("check: mem.swappiness\nsubject: postgres 5432\nreason: r"), `w.yaml:3: subject "postgres 5432" holds a space`},
		{"control in reason", entry("check: mem.swappiness\nsubject: host\nreason: \"a\\x1b[31mb\""), `w.yaml:4: reason holds a control character`},
		{"long reason", entry("check: mem.swappiness\nsubject: host\nreason: " + strings.Repeat("x", 501)), `reason is longer than 500`},
		{"top list", "- check: mem.swappiness\n", `w.yaml:1: want a mapping with one key, waivers`},
		{"top key", "waiver:\n  - check: mem.swappiness\n", `w.yaml:1: unknown key "waiver"`},
		{"not a list", "waivers: mem.swappiness\n", `w.yaml:1: waivers: want a list`},
		{"entry scalar", "waivers:\n  - mem.swappiness\n", `w.yaml:2: a waiver is a mapping`},
		{"two documents", "waivers: []\n---\nwaivers: []\n", `w.yaml:2: a second YAML document`},
		{"alias", "waivers:\n  - &a {check: mem.swappiness, subject: host, reason: r}\n  - *a\n", `anchors and aliases are not accepted`},
		{"syntax", "waivers:\n  - check: mem.swappiness\n   subject: host\n", `w.yaml: yaml: line `},
		{"binary", "waivers: \xff\n", `w.yaml: not UTF-8 text`},
		{"huge", "# " + strings.Repeat("x", MaxSize), `w.yaml: 262146 bytes, more than a waiver file's`},
	}
	for _, c := range cases {
		_, err := Parse("w.yaml", []byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestApply on a recorded host: a waiver marks exactly the failing finding
// it names; an expired one marks nothing and is reported; one for another
// host is ignored; one naming no finding is stale; one on a passing
// finding is not needed; a check left out of the selection is not looked
// at.
func TestApply(t *testing.T) {
	fds := fixture.Findings(t, "mem-swapfile")
	fail := func(id, subject string) {
		t.Helper()
		for _, fd := range fds {
			if fd.ID == id && fd.Subject == subject && fd.Status == check.Fail {
				return
			}
		}
		t.Fatalf("mem-swapfile: %s (%s) does not fail: the test needs it to", id, subject)
	}
	fail("mem.swappiness", "host")
	fail("mysql.hardening.empty_passwords", "mysql:3306")
	text := `waivers:
  - {check: mem.swappiness, subject: host, reason: cushion, expires: 2026-12-31}
  - {check: mysql.hardening.empty_passwords, subject: "*", reason: lab, expires: 2026-01-01}
  - {check: mem.hugepages.postgres, subject: postgres:5432, host: other, reason: not here}
  - {check: mem.dirty, subject: postgres:9999, reason: gone}
  - {check: limits.file_max, subject: host, reason: fixed since}
`
	f, err := Parse("w.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var passing bool
	for _, fd := range fds {
		passing = passing || (fd.ID == "limits.file_max" && fd.Status == check.Pass)
	}
	if !passing {
		t.Fatal("mem-swapfile: limits.file_max does not pass: the test needs it to")
	}
	o := f.Apply(fds, check.Selector{}, "VM", now)
	var waived []string
	for _, fd := range fds {
		if fd.Waiver != nil {
			waived = append(waived, fd.ID+" "+fd.Subject)
			if fd.Waiver.Reason != "cushion" || fd.Waiver.Source != "w.yaml:2" || fd.Waiver.Expires.Format(time.DateOnly) != "2026-12-31" {
				t.Errorf("waiver %+v", fd.Waiver)
			}
		}
	}
	if strings.Join(waived, ",") != "mem.swappiness host" || o.Waived != 1 {
		t.Errorf("waived %v (%d), want mem.swappiness host", waived, o.Waived)
	}
	if len(o.Expired) != 1 || o.Expired[0].Check != "mysql.hardening.empty_passwords" {
		t.Errorf("expired %+v", o.Expired)
	}
	if len(o.Stale) != 1 || o.Stale[0].Subject != "postgres:9999" {
		t.Errorf("stale %+v", o.Stale)
	}
	if len(o.Unneeded) != 1 || o.Unneeded[0].Check != "limits.file_max" {
		t.Errorf("unneeded %+v", o.Unneeded)
	}
	notes := strings.Join(o.Notes(), "\n")
	for _, want := range []string{
		"waiver of mysql.hardening.empty_passwords on * (w.yaml:3) expired 2026-01-01: its finding counts again (it was: lab)",
		"waiver of mem.dirty on postgres:9999 (w.yaml:5) matches no finding of this audit",
		"waiver of limits.file_max on host (w.yaml:6) is not needed",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "mem.hugepages.postgres") {
		t.Errorf("another host's waiver reported:\n%s", notes)
	}

	// Only mem selected: the other checks' waivers are not looked at.
	fds = fixture.Findings(t, "mem-swapfile", "mem")
	o = f.Apply(fds, check.Selector{Only: []string{"mem"}}, "vm", now)
	if len(o.Expired) != 0 || len(o.Unneeded) != 0 || len(o.Stale) != 1 || o.Waived != 1 {
		t.Errorf("--only mem: %+v", o)
	}
	var nilFile *File
	if nilFile.Apply(fds, check.Selector{}, "vm", now) != nil {
		t.Error("no file gave an outcome")
	}
}

// TestExpiry with a fixed clock: a date holds through its last second UTC;
// an RFC 3339 time to the second.
func TestExpiry(t *testing.T) {
	day, _ := ParseExpiry("2026-12-31")
	at, _ := ParseExpiry("2026-12-31T08:00:00-05:00")
	cases := []struct {
		e    time.Time
		now  time.Time
		want bool
	}{
		{day, time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), false},
		{day, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{day, time.Date(2026, 12, 31, 20, 0, 0, 0, time.FixedZone("EST", -5*3600)), true}, // 01:00 UTC next day
		{at, time.Date(2026, 12, 31, 13, 0, 0, 0, time.UTC), false},
		{at, time.Date(2026, 12, 31, 13, 0, 1, 0, time.UTC), true},
		{time.Time{}, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), false},
	}
	for i, c := range cases {
		if got := (Entry{Expires: c.e}).Expired(c.now); got != c.want {
			t.Errorf("%d: %v expired at %v: %v, want %v", i, c.e, c.now, got, c.want)
		}
	}
	if When(day) != "2026-12-31" || When(at) != "2026-12-31 13:00:00Z" {
		t.Errorf("When: %s, %s", When(day), When(at))
	}
}

// tree makes a root tree holding etc/dbhost/waivers.yaml with content.
func tree(t *testing.T, content string) (root, file string) {
	t.Helper()
	root = t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(root, "etc", "dbhost", "waivers.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, file
}

func readHost(t *testing.T, root string) (*File, error) {
	t.Helper()
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	return ReadHost(h, DefaultPath)
}

// TestReadHostTrust: the host's file is read only when root owns it and
// nobody else can write it or a directory above it; a missing file is no
// waivers, not an error.
func TestReadHostTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the trust rule wants files root owns: run as root")
	}
	root, file := tree(t, good)
	f, err := readHost(t, root)
	if err != nil || len(f.Entries) != 3 || f.Entries[0].Where != DefaultPath+":3" {
		t.Fatalf("root's file: %+v %v", f, err)
	}
	if err := os.Chmod(file, 0o664); err != nil {
		t.Fatal(err)
	}
	f, err = readHost(t, root)
	if f != nil || err == nil || !strings.Contains(err.Error(), "/etc/dbhost/waivers.yaml is not read: /etc/dbhost/waivers.yaml is writable by group or others (mode 0664)") {
		t.Errorf("group-writable file: %+v %v", f, err)
	}
	os.Chmod(file, 0o644)
	os.Chmod(filepath.Dir(file), 0o777)
	f, err = readHost(t, root)
	if f != nil || err == nil || !strings.Contains(err.Error(), "/etc/dbhost is writable by group or others") {
		t.Errorf("world-writable directory: %+v %v", f, err)
	}
	os.Chmod(filepath.Dir(file), 0o755)
	if err := os.Chown(file, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err = readHost(t, root); err == nil || !strings.Contains(err.Error(), "is owned by uid 65534, not root") {
		t.Errorf("file of nobody: %v", err)
	}
	os.Remove(file)
	if f, err := readHost(t, root); f != nil || err != nil {
		t.Errorf("no file: %+v %v", f, err)
	}
	os.WriteFile(file, []byte("# "+strings.Repeat("x", MaxSize)), 0o644)
	if _, err := readHost(t, root); err == nil || !strings.Contains(err.Error(), "more than a waiver file's") {
		t.Errorf("huge file: %v", err)
	}
	os.WriteFile(file, []byte("waivers:\n  - {check: mem.swappiness, subject: host}\n"), 0o644)
	if _, err := readHost(t, root); err == nil || !strings.Contains(err.Error(), "/etc/dbhost/waivers.yaml:2: mem.swappiness on host: reason is required") {
		t.Errorf("broken file: %v", err)
	}
}

// TestRead: a file the user names is read whoever owns it, and must be a
// regular file.
func TestRead(t *testing.T) {
	_, file := tree(t, good)
	os.Chmod(file, 0o666)
	if f, err := Read(file); err != nil || len(f.Entries) != 3 || f.Name != file {
		t.Errorf("named file: %+v %v", f, err)
	}
	if _, err := Read(filepath.Dir(file)); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	if _, err := Read(file + ".missing"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), file+".missing") {
		t.Errorf("missing: %v", err)
	}
}

// TestLoader: a changed file applies at the next Load; a broken one keeps
// the last good file, says why, and reports the change of state once.
func TestLoader(t *testing.T) {
	var l Loader
	text := good
	read := func() (*File, error) { return Parse("w.yaml", []byte(text)) }
	f, st, changed := l.Load(read)
	if f == nil || !st.Valid || changed || f.Entries[0].Reason != "swap is the batch job's cushion (TICKET-42)" {
		t.Fatalf("first load: %+v %+v %v", f, st, changed)
	}
	text = strings.Replace(good, "(TICKET-42)", "(TICKET-43)", 1)
	if f, st, _ = l.Load(read); !st.Valid || f.Entries[0].Reason != "swap is the batch job's cushion (TICKET-43)" {
		t.Errorf("changed file not applied: %+v", f.Entries[0])
	}
	text = good + "  - {check: nope, subject: host, reason: r}\n"
	f, st, changed = l.Load(read)
	if st.Valid || !changed || !strings.Contains(st.Error, "w.yaml:17: unknown check \"nope\"") || f == nil || !strings.Contains(f.Entries[0].Reason, "TICKET-43") {
		t.Errorf("broken file: %+v %+v %v", f, st, changed)
	}
	if _, st, changed = l.Load(read); st.Valid || changed {
		t.Errorf("still broken: %+v changed %v", st, changed)
	}
	text = ""
	if f, st, changed = l.Load(read); !st.Valid || !changed || len(f.Entries) != 0 {
		t.Errorf("repaired (emptied): %+v %+v %v", f, st, changed)
	}
}
