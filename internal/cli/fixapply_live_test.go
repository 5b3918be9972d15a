package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// The live fix tests make this host fail a set of checks on purpose
// (through the test journal), run the real dbhost binary's
// `fix --plan/--apply/--rollback/--recover` on / and compare full listings
// of /etc, /proc/sys, the /sys knobs and the server's limits before and
// after, byte for byte.

// liveChecks are the checks the live tests make fail: sysctls (mem.dirty,
// net.*), THP (/sys, tmpfiles.d), a block device's read-ahead and scheduler
// (/sys, udev rules.d), a running server's process limit (prlimit,
// security/limits.d) and one of its settings (ALTER SYSTEM, reload).
var liveChecks = []string{"mem.dirty", "net.fin_timeout", "net.keepalive", "mem.thp.enabled", "mem.thp.defrag",
	"storage.read_ahead", "storage.scheduler", "limits.nproc", "pg.hardening.md5"}

// liveProcSkip are the /proc/sys entries that change by themselves
// (counters, random values); everything else must be equal byte for byte.
// Other tests that change kernel values hold the host lock, as this one
// does while it takes listings.
var liveProcSkip = []string{
	"/proc/sys/fs/dentry-state", "/proc/sys/fs/file-nr", "/proc/sys/fs/inode-nr", "/proc/sys/fs/inode-state",
	"/proc/sys/fs/aio-nr", "/proc/sys/fs/quota/", "/proc/sys/kernel/ns_last_pid", "/proc/sys/kernel/pty/nr",
	"/proc/sys/kernel/random/entropy_avail", "/proc/sys/kernel/random/uuid",
	"/proc/sys/net/netfilter/nf_conntrack_count",
}

// liveEtcDirs are the directories apply may write into (or create); the
// test puts them back as they were whatever happens.
var liveEtcDirs = []string{"/etc/sysctl.d", "/etc/udev", "/etc/security/limits.d", "/etc/tmpfiles.d", "/etc/systemd/system"}

const liveState = "/var/lib/dbhost/changes"

type liveHost struct {
	t    testing.TB
	h    *testdb.HostJournal
	bin  string
	dev  string
	pg   *testdb.Server
	only string
}

// setupLive makes the checks of liveChecks fail and returns the host. Every
// change is undone when the test ends.
func setupLive(t testing.TB) *liveHost {
	t.Helper()
	bin := buildDbhost(t) // before the host lock: others need not wait for it
	h := testdb.JournalLending(t)
	for _, d := range liveEtcDirs {
		guardTree(t, d)
	}
	guardState(t)
	l := &liveHost{t: t, h: h, bin: bin, only: strings.Join(liveChecks, ",")}
	// A server whose process limit is below what it needs (limits.nproc):
	// soft 30 for a PostgreSQL allowed 20 connections; the hard limit is
	// inherited.
	l.pg = testdb.Postgres(t, testdb.Options{Nproc: "30:"})
	// password_encryption md5, as an ALTER SYSTEM entry (pg.hardening.md5).
	l.pg.PGSet(t, "password_encryption", "md5")
	l.dev = dataDevice(t, l.pg.DataDir)
	sched := ""
	for _, s := range []string{"bfq", "kyber"} { // never right under a database
		if b, _ := os.ReadFile(l.queue("scheduler")); strings.Contains(string(b), s) {
			sched = s
			break
		}
	}
	testdb.Need(t, "an I/O scheduler dbhost rejects (bfq or kyber) on "+l.dev, sched != "")
	for _, kv := range [][2]string{
		{"/proc/sys/vm/dirty_ratio", "40"},
		{"/proc/sys/net/ipv4/tcp_fin_timeout", "60"},
		{"/proc/sys/net/ipv4/tcp_keepalive_time", "7200"},
		{"/proc/sys/net/ipv4/tcp_keepalive_intvl", "75"},
		{"/sys/kernel/mm/transparent_hugepage/enabled", "always"},
		{"/sys/kernel/mm/transparent_hugepage/defrag", "always"},
		{l.queue("read_ahead_kb"), "4096"},
		{l.queue("scheduler"), sched},
	} {
		if err := h.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l *liveHost) queue(attr string) string {
	return filepath.Join("/sys/block", l.dev, "queue", attr)
}

// run runs the binary, lending it the test's host lock.
func (l *liveHost) run(args ...string) (int, string, string) {
	l.t.Helper()
	var code int
	var out, errb bytes.Buffer
	cmd := exec.Command(l.bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	l.h.Pass(cmd)
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		l.t.Fatalf("dbhost %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errb.String()
}

// listing is the state an apply changes and a rollback must put back: every
// entry of /etc (mode, owner, SHA-256 of regular files, link targets),
// every readable /proc/sys value but liveProcSkip, the THP and block queue
// knobs, and the server's limits.
func (l *liveHost) listing() string {
	l.t.Helper()
	var out []string
	filepath.WalkDir("/etc", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out = append(out, fmt.Sprintf("%s error %v", p, err))
			return nil
		}
		out = append(out, entryLine(p))
		return nil
	})
	filepath.WalkDir("/proc/sys", func(p string, d fs.DirEntry, err error) error {
		for _, s := range liveProcSkip {
			if p == s || strings.HasPrefix(p, s) || p+"/" == s {
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Mode().Perm()&0o444 == 0 {
			return nil // write-only (vm/drop_caches, vm/compact_memory)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			out = append(out, fmt.Sprintf("%s unreadable %v", p, errors.Unwrap(err)))
			return nil
		}
		out = append(out, p+" = "+strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`))
		return nil
	})
	for _, p := range []string{"/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/defrag",
		"/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none", l.queue("read_ahead_kb"), l.queue("scheduler"),
		fmt.Sprintf("/proc/%d/limits", l.pg.PID)} {
		b, err := os.ReadFile(p)
		if err != nil {
			l.t.Fatal(err)
		}
		out = append(out, p+" = "+strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`))
	}
	// The server's ALTER SYSTEM file, byte for byte, and the value it runs with.
	auto := filepath.Join(l.pg.DataDir, "postgresql.auto.conf")
	b, err := os.ReadFile(auto)
	if err != nil {
		l.t.Fatal(err)
	}
	out = append(out, auto+" = "+strings.ReplaceAll(string(b), "\n", `\n`),
		"password_encryption = "+l.pg.SQL(l.t, "SHOW password_encryption"))
	sort.Strings(out)
	return strings.Join(out, "\n") + "\n"
}

func entryLine(p string) string {
	info, err := os.Lstat(p)
	if err != nil {
		return fmt.Sprintf("%s error %v", p, err)
	}
	st := info.Sys().(*syscall.Stat_t)
	line := fmt.Sprintf("%s %v %d:%d", p, info.Mode(), st.Uid, st.Gid)
	switch {
	case info.Mode().IsRegular():
		b, err := os.ReadFile(p)
		if err != nil {
			return line + " unreadable"
		}
		s := sha256.Sum256(b)
		line += " " + hex.EncodeToString(s[:])
	case info.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(p)
		line += " -> " + target
	}
	return line
}

// sameListing fails the test with the lines that differ.
func sameListing(t testing.TB, what, before, after string) {
	t.Helper()
	if before == after {
		return
	}
	b, a := map[string]bool{}, map[string]bool{}
	for _, s := range strings.Split(before, "\n") {
		b[s] = true
	}
	for _, s := range strings.Split(after, "\n") {
		a[s] = true
	}
	var d []string
	for s := range b {
		if !a[s] {
			d = append(d, "- "+s)
		}
	}
	for s := range a {
		if !b[s] {
			d = append(d, "+ "+s)
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i][2:] < d[j][2:] })
	t.Fatalf("%s: the host is not as before (- before, + now):\n%s", what, strings.Join(d, "\n"))
}

// buildDbhost builds the real binary once per test.
func buildDbhost(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dbhost")
	if testing.Short() {
		t.Skip("integration test: builds dbhost and changes the host")
	}
	cmd := exec.Command("go", "build", "-o", bin, "github.com/dbhost/dbhost/cmd/dbhost")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// dataDevice is the whole block device under dir.
func dataDevice(t testing.TB, dir string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	sys, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", unixMajor(st.Dev), unixMinor(st.Dev)))
	testdb.Need(t, "a block device under "+dir, err == nil)
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		sys = filepath.Dir(sys)
	}
	_, err = os.Stat(filepath.Join(sys, "queue", "read_ahead_kb"))
	testdb.Need(t, "a block queue for "+dir, err == nil)
	return filepath.Base(sys)
}

func unixMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^0xfff }
func unixMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^0xff }

// guardTree puts a directory tree of /etc back as it was when the test
// ends: files byte for byte with mode and owner, entries that were not
// there removed (a tree that did not exist removed whole).
func guardTree(t testing.TB, root string) {
	t.Helper()
	type entry struct {
		info fs.FileInfo
		data []byte
		link string
	}
	saved := map[string]entry{}
	_, err := os.Lstat(root)
	existed := err == nil
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		e := entry{info: info}
		if info.Mode().IsRegular() {
			e.data, _ = os.ReadFile(p)
		} else if info.Mode()&fs.ModeSymlink != 0 {
			e.link, _ = os.Readlink(p)
		}
		saved[p] = e
		return nil
	})
	t.Cleanup(func() {
		if !existed {
			os.RemoveAll(root)
			return
		}
		var now []string
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				now = append(now, p)
			}
			return nil
		})
		for i := len(now) - 1; i >= 0; i-- { // deepest first
			if _, ok := saved[now[i]]; !ok {
				t.Logf("removing %s, left by the test", now[i])
				os.RemoveAll(now[i])
			}
		}
		for p, e := range saved {
			if !e.info.Mode().IsRegular() {
				continue
			}
			if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, e.data) {
				t.Logf("putting back %s", p)
				os.Remove(p)
				os.WriteFile(p, e.data, e.info.Mode().Perm())
			}
			st := e.info.Sys().(*syscall.Stat_t)
			os.Lchown(p, int(st.Uid), int(st.Gid))
			os.Chmod(p, e.info.Mode().Perm())
		}
	})
}

// guardState removes the change sets the test made in /var/lib/dbhost
// (and the directories, when it made them).
func guardState(t testing.TB) {
	t.Helper()
	made := ""
	for _, d := range []string{"/var/lib/dbhost", liveState} {
		if _, err := os.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			made = d
			break
		}
	}
	had := map[string]bool{}
	ents, _ := os.ReadDir(liveState)
	for _, e := range ents {
		had[e.Name()] = true
	}
	t.Cleanup(func() {
		if made != "" {
			os.RemoveAll(made)
			return
		}
		ents, _ := os.ReadDir(liveState)
		for _, e := range ents {
			if !had[e.Name()] {
				os.RemoveAll(filepath.Join(liveState, e.Name()))
			}
		}
	})
}

// changeSets returns the status of each change set in the state directory.
func changeSets(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, _ := os.ReadDir(liveState)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(liveState, e.Name(), "meta.json"))
		if err != nil {
			out[e.Name()] = "no meta.json"
			continue
		}
		var m struct {
			Status string `json:"status"`
		}
		json.Unmarshal(b, &m)
		out[e.Name()] = m.Status
	}
	return out
}

func changeSetNotes(t testing.TB, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(liveState, id, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Notes []string `json:"notes"`
	}
	json.Unmarshal(b, &m)
	return strings.Join(m.Notes, "; ")
}

// TestLiveFixApply runs the real binary on this host: --plan changes
// nothing; --apply --only the failing checks writes the files and values;
// they pass when audited again; --history lists the change set;
// --rollback puts /etc, /proc/sys, the /sys knobs and the server's limits
// back byte for byte. Then a file edited between --plan-out and
// --apply --plan-file is refused by name, and an apply killed with SIGKILL
// at every step of its journal is put back by --recover.
func TestLiveFixApply(t *testing.T) {
	l := setupLive(t)
	before := l.listing()
	start := time.Now()
	code, out, errs := l.run("audit", "--only", l.only)
	t.Logf("audit: %v", time.Since(start))
	if code != ExitFindings {
		t.Fatalf("audit before: exit %d\n%s\n%s", code, out, errs)
	}
	for _, id := range liveChecks {
		if !strings.Contains(out, "✗ "+id+" ") {
			t.Errorf("%s does not fail before the apply:\n%s", id, out)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	code, plan, errs := l.run("fix", "--plan", "--only", l.only)
	if code != ExitFindings {
		t.Fatalf("--plan: exit %d\n%s\n%s", code, plan, errs)
	}
	for _, want := range []string{"file /etc/sysctl.d/60-dbhost.conf", "file /etc/udev/rules.d/60-dbhost.rules", "file /etc/security/limits.d/60-dbhost.conf",
		"file /etc/tmpfiles.d/60-dbhost.conf", "value /proc/sys/vm/", "value /sys/kernel/mm/transparent_hugepage/enabled: always -> never",
		"value " + l.queue("read_ahead_kb") + ": 4096 -> 128", "value " + l.queue("scheduler") + ": ",
		fmt.Sprintf("value /proc/%d/limits:nproc: 30:", l.pg.PID),
		fmt.Sprintf("setting postgres:%d password_encryption: md5 -> scram-sha-256 by ALTER SYSTEM + pg_reload_conf()", l.pg.Port)} {
		if !strings.Contains(plan, want) {
			t.Errorf("--plan lacks %q:\n%s", want, plan)
		}
	}
	if testing.Verbose() {
		t.Logf("fix --plan:\n%s", plan)
	}
	if strings.Contains(plan, "command not run: prlimit") {
		t.Errorf("--plan leaves the prlimit it does to a person:\n%s", plan)
	}
	sameListing(t, "after --plan", before, l.listing())

	start = time.Now()
	code, out, errs = l.run("fix", "--apply", "--only", l.only)
	t.Logf("apply: %v", time.Since(start))
	if code != ExitOK {
		t.Fatalf("--apply: exit %d\n%s\n%s", code, out, errs)
	}
	id := changeSetID(t, out)
	for _, c := range liveChecks {
		if !strings.Contains(out, "  pass  "+c) {
			t.Errorf("%s does not pass in the re-audit of --apply:\n%s", c, out)
		}
	}
	if notes := changeSetNotes(t, id); !strings.Contains(notes, "udev: ") {
		t.Errorf("change set %s says nothing of udev: %s", id, notes)
	} else {
		t.Logf("change set notes: %s", notes)
	}
	if code, aud, _ := l.run("audit", "--only", l.only); code != ExitOK {
		t.Errorf("audit after --apply: exit %d\n%s", code, aud)
	}
	if b, _ := os.ReadFile(l.queue("read_ahead_kb")); strings.TrimSpace(string(b)) != "128" {
		t.Errorf("read_ahead_kb after --apply: %s", b)
	}
	if v := l.pg.SQL(t, "SHOW password_encryption"); v != "scram-sha-256" {
		t.Errorf("password_encryption after --apply: %s", v)
	}
	if _, hist, _ := l.run("fix", "--history"); !strings.Contains(hist, id+"  applied ") {
		t.Errorf("--history lacks %s applied:\n%s", id, hist)
	}
	start = time.Now()
	if code, out, errs := l.run("fix", "--rollback", id); code != ExitOK || !strings.Contains(out, "rolled back "+id) {
		t.Fatalf("--rollback: exit %d\n%s\n%s", code, out, errs)
	}
	t.Logf("rollback: %v", time.Since(start))
	sameListing(t, "after --rollback", before, l.listing())
	if _, hist, _ := l.run("fix", "--history"); !strings.Contains(hist, id+"  rolled-back ") {
		t.Errorf("--history lacks %s rolled back:\n%s", id, hist)
	}

	t.Run("edited-after-plan", func(t *testing.T) { liveEditedAfterPlan(t, l, before) })
	t.Run("kill-9", func(t *testing.T) { liveKilled(t, l, before) })
}

func changeSetID(t testing.TB, out string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "applied change set ")
	if !ok {
		t.Fatalf("no change set in the output of --apply:\n%s", out)
	}
	id, _, _ := strings.Cut(rest, " ")
	return id
}

// liveEditedAfterPlan: a destination written by someone after
// --plan --plan-out is named and the apply refused; nothing changes.
func liveEditedAfterPlan(t *testing.T, l *liveHost, before string) {
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if code, out, errs := l.run("fix", "--plan", "--only", l.only, "--plan-out", planFile); code != ExitFindings {
		t.Fatalf("--plan --plan-out: exit %d\n%s\n%s", code, out, errs)
	}
	const edited = "/etc/security/limits.d/60-dbhost.conf"
	if err := os.WriteFile(edited, []byte("postgres soft nproc 2048\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withEdit := l.listing()
	code, out, errs := l.run("fix", "--apply", "--only", l.only, "--plan-file", planFile)
	if code != ExitError || !strings.Contains(errs, edited+" changed since the plan") {
		t.Errorf("--apply --plan-file over an edited %s: exit %d\n%s\n%s", edited, code, out, errs)
	}
	sameListing(t, "after a refused apply", withEdit, l.listing())
	if err := os.Remove(edited); err != nil {
		t.Fatal(err)
	}
	sameListing(t, "after removing the edit", before, l.listing())
}

// liveKilled kills `fix --apply` with SIGKILL once after each step its
// journal records: the test watches the change set's journal grow from
// outside (no hook in the binary) and kills the process as soon as it
// holds k entries, k = 1..all. Each time `fix --recover` (a new process)
// must leave the host exactly as before, and at least one kill must have
// left a change set "applying".
func liveKilled(t *testing.T, l *liveHost, before string) {
	hits := 0
	for k := 1; k <= 60; k++ {
		had := changeSets(t)
		seen, status := 0, ""
		cmd := exec.Command(l.bin, "fix", "--apply", "--only", l.only)
		l.h.Pass(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		seen = waitJournal(t, had, k)
		cmd.Process.Kill()
		cmd.Wait()
		for id, s := range changeSets(t) {
			if _, ok := had[id]; ok {
				continue
			}
			status = s
			if s == "applied" { // it finished before the kill
				if code, out, errs := l.run("fix", "--rollback", id); code != ExitOK {
					t.Fatalf("--rollback: exit %d\n%s\n%s", code, out, errs)
				}
			}
		}
		if status == "applying" {
			hits++
		}
		code, out, errs := l.run("fix", "--recover")
		if code != ExitOK {
			t.Fatalf("--recover after kill %d: exit %d\n%s\n%s", k, code, out, errs)
		}
		t.Logf("killed at %d journal entries (saw %d): change set %s; %s", k, seen, status, strings.TrimSpace(out+errs))
		sameListing(t, fmt.Sprintf("killed at %d journal entries, then --recover", k), before, l.listing())
		if status != "applying" {
			break // the kills have passed the end of the apply
		}
	}
	if hits == 0 {
		t.Fatal("no kill landed in the middle of an apply (no change set left applying)")
	}
	t.Logf("%d kills left a change set applying, each put back by --recover", hits)
}

// waitJournal waits until a new change set's journal holds at least k
// entries (or the set is no longer applying) and returns how many it saw.
func waitJournal(t testing.TB, had map[string]string, k int) int {
	deadline := time.Now().Add(60 * time.Second)
	var id string
	for time.Now().Before(deadline) {
		if id == "" {
			ents, _ := os.ReadDir(liveState)
			for _, e := range ents {
				if _, ok := had[e.Name()]; !ok {
					id = e.Name()
				}
			}
			continue
		}
		if n := journalLen(t, id, false); n >= k {
			return n
		}
		b, _ := os.ReadFile(filepath.Join(liveState, id, "meta.json"))
		if !bytes.Contains(b, []byte(`"status": "applying"`)) && len(b) > 0 {
			return -1
		}
	}
	t.Fatalf("the apply did not journal %d entries in 60 s", k)
	return 0
}

// journalLen counts a change set's journal entries; a finished apply has
// removed nothing (its journal stays for the rollback).
func journalLen(t testing.TB, id string, must bool) int {
	file := filepath.Join(liveState, id, "journal.json")
	if _, err := os.Stat(file); err != nil {
		if must {
			t.Fatal(err)
		}
		return 0
	}
	entries, err := journal.Pending(file)
	if err != nil {
		return 0 // being written
	}
	return len(entries)
}

// BenchmarkLiveFixApply times `dbhost fix --apply --only liveChecks` and
// `fix --rollback` of the same change set on this host (the real binary,
// wall time of each command: start-up, facts, plan, journaled changes and,
// for --apply, the re-audit), and the changes alone (the change set's
// created-to-finished time). Root; changes the host and puts it back
// (bench/apply.sh runs it).
func BenchmarkLiveFixApply(b *testing.B) {
	l := setupLive(b)
	before := l.listing()
	var apply, rollback, core []time.Duration
	files, values, settings := 0, 0, 0
	for b.Loop() {
		start := time.Now()
		code, out, errs := l.run("fix", "--apply", "--only", l.only)
		apply = append(apply, time.Since(start))
		if code != ExitOK {
			b.Fatalf("--apply: exit %d\n%s\n%s", code, out, errs)
		}
		id := changeSetID(b, out)
		var m struct {
			Created, Finished time.Time
			Files             []json.RawMessage
			Values            []json.RawMessage
			Settings          []json.RawMessage
		}
		meta, _ := os.ReadFile(filepath.Join(liveState, id, "meta.json"))
		json.Unmarshal(meta, &m)
		core = append(core, m.Finished.Sub(m.Created))
		files, values, settings = len(m.Files), len(m.Values), len(m.Settings)
		start = time.Now()
		if code, out, errs := l.run("fix", "--rollback", id); code != ExitOK {
			b.Fatalf("--rollback: exit %d\n%s\n%s", code, out, errs)
		}
		rollback = append(rollback, time.Since(start))
	}
	b.StopTimer()
	sameListing(b, "after the benchmark", before, l.listing())
	ms := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2]) / 1e6
	}
	b.ReportMetric(ms(apply), "apply-ms")
	b.ReportMetric(ms(core), "apply-changes-ms")
	b.ReportMetric(ms(rollback), "rollback-ms")
	b.ReportMetric(float64(files), "files")
	b.ReportMetric(float64(values), "values")
	b.ReportMetric(float64(settings), "settings")
	b.ReportMetric(0, "ns/op")
}
