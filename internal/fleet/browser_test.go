package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestPageInBrowser renders the report of 500 snapshots (outlierMix:
// symbolic links to recorded hosts, as bench/fleet.sh makes them), loads it
// in a headless Chromium at 1366x768, a laptop's screen, saves a screenshot
// (to $DBHOST_ARTIFACTS when set, else the test's temporary directory; the
// path is logged), and asserts from the rendered page: the planted outlier
// host and its rare setting are within the first viewport, in the host
// ranking and in the settings ranking; the page needs no sideways
// scrolling; the matrix header stays in view when scrolled; fleet-wide
// checks are hidden until asked; the filter and a sort work; and nothing
// reached the console (a CSP refusal of the script, a script error).
//
// Chromium runs as the experiment report's test runs it (make test installs
// Debian's chromium; without it the test skips, and fails under
// DBHOST_INTEGRATION=require), driven over the DevTools protocol on a pipe:
// nothing listens on a port.
func TestPageInBrowser(t *testing.T) {
	bin := testdb.Chromium(t)
	start := time.Now()

	dir := t.TempDir()
	snaps := filepath.Join(dir, "snaps")
	if err := os.Mkdir(snaps, 0o700); err != nil {
		t.Fatal(err)
	}
	names, recorded := mixFiles()
	files := make([]string, len(names))
	for i, n := range names {
		files[i] = filepath.Join(snaps, n)
		if err := os.Symlink(fixture.Path(recorded[i]), files[i]); err != nil {
			t.Fatal(err)
		}
	}
	loaded, errs := LoadAll(t.Context(), files, 0, nil)
	if len(errs) > 0 || len(loaded) != 500 {
		t.Fatalf("%d snapshots loaded, errors %v", len(loaded), errs)
	}
	r := Build(loaded, nil)
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "fleet.html")
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	judged := time.Since(start)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	br := startBrowser(ctx, t, bin, dir)
	br.call("Runtime.enable", nil)
	br.call("Log.enable", nil)
	br.call("Page.enable", nil)
	br.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1366, "height": 768, "deviceScaleFactor": 1, "mobile": false})
	br.call("Page.navigate", map[string]any{"url": "file://" + page})
	br.waitEvent("Page.loadEventFired")

	var first struct {
		W, H, ClientW, ScrollW int
		Rank, Distance         string
		HostInView, KeyInView  bool
		SettingRank            int
		SettingInView          bool
		LinkInView             bool
		HiddenFW, ShownCols    int
		FleetWideInView        bool
	}
	br.eval(fmt.Sprintf(`(() => {
  const de = document.documentElement, vw = de.clientWidth, vh = de.clientHeight;
  const inView = e => { if (!e) return false; const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= vh && r.right <= vw; };
  const shown = e => e.getClientRects().length > 0;
  const file = %q, key = %q;
  const host = Array.from(document.querySelectorAll("#t-outliers tbody tr")).find(tr => shown(tr) && tr.cells[1].textContent.includes(file));
  const code = host && Array.from(host.cells[3].querySelectorAll("code")).find(c => c.textContent === key && shown(c));
  const rows = Array.from(document.querySelectorAll("#t-rare tbody tr")).filter(shown);
  const si = rows.findIndex(tr => tr.cells[0].textContent === key);
  const link = si >= 0 && Array.from(rows[si].cells[2].querySelectorAll("a")).find(a => a.textContent.includes(file));
  const cols = Array.from(document.querySelectorAll("#t-matrix th.col"));
  return {W: innerWidth, H: innerHeight, ClientW: vw, ScrollW: de.scrollWidth,
    Rank: host ? host.cells[0].textContent : "", Distance: host ? host.cells[2].textContent : "",
    HostInView: inView(host), KeyInView: inView(code),
    SettingRank: si + 1, SettingInView: si >= 0 && inView(rows[si].cells[0]), LinkInView: inView(link),
    HiddenFW: cols.filter(c => c.classList.contains("fw") && !shown(c)).length,
    ShownCols: cols.filter(shown).length,
    FleetWideInView: inView(document.getElementById("fleetwide"))};
})()`, plantedFile, plantedKey), &first)
	shot := br.screenshot()

	out := os.Getenv("DBHOST_ARTIFACTS")
	if out == "" {
		out = dir
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(out, "fleet-report-500.png")
	if err := os.WriteFile(png, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes); page %d KiB; 500 snapshots judged and rendered in %v", png, len(shot), b.Len()/1024, judged.Round(time.Millisecond))
	t.Logf("first viewport %+v", first)

	if first.W != 1366 || first.H != 768 {
		t.Errorf("viewport %dx%d, want 1366x768", first.W, first.H)
	}
	if first.ScrollW > first.ClientW {
		t.Errorf("the page is %d pixels wide in a %d-pixel window: it scrolls sideways", first.ScrollW, first.ClientW)
	}
	if !first.HostInView || !first.KeyInView {
		t.Errorf("the planted outlier %s (rank %q) or its %s is not in the first viewport", plantedFile, first.Rank, plantedKey)
	}
	if !first.SettingInView || !first.LinkInView {
		t.Errorf("the rare setting %s (rank %d) or its link to %s is not in the first viewport", plantedKey, first.SettingRank, plantedFile)
	}
	if !first.FleetWideInView {
		t.Errorf("the fleet-wide line is not in the first viewport")
	}
	if first.HiddenFW != r.Summary.FleetWide || first.HiddenFW == 0 || first.ShownCols == 0 {
		t.Errorf("%d fleet-wide columns hidden of %d; %d columns shown", first.HiddenFW, r.Summary.FleetWide, first.ShownCols)
	}

	// Scrolled into the matrix, its header row sticks under the bar.
	var sticky struct{ Bar, Head, HostLeft float64 }
	br.eval(`(() => {
  const m = document.getElementById("t-matrix");
  window.scrollTo(0, m.getBoundingClientRect().top + scrollY + 3000);
  return {Bar: document.querySelector(".bar").getBoundingClientRect().bottom,
    Head: m.tHead.rows[0].cells[0].getBoundingClientRect().top,
    HostLeft: m.tBodies[0].rows[200].cells[0].getBoundingClientRect().left};
})()`, &sticky)
	if sticky.Head < sticky.Bar-2 || sticky.Head > sticky.Bar+2 || sticky.HostLeft < 0 {
		t.Errorf("scrolled 3000 pixels into the matrix: header at %v, bar ends at %v", sticky.Head, sticky.Bar)
	}

	// The filter narrows both rankings, and the matrix to the checks it
	// names; the fleet-wide toggle shows their columns; a click on "fail"
	// sorts the hosts by it.
	var after struct {
		Hosts, Settings, FW int
		AllHaveKey, Sorted  bool
		Planted             bool
		Columns             string
		MatrixRows          int
	}
	br.eval(fmt.Sprintf(`(async () => {
  const shown = e => e.getClientRects().length > 0;
  const q = document.getElementById("q"), key = %q;
  q.value = key; q.dispatchEvent(new Event("input"));
  await new Promise(res => setTimeout(res, 400));
  const hosts = Array.from(document.querySelectorAll("#t-outliers tbody tr")).filter(shown);
  const settings = Array.from(document.querySelectorAll("#t-rare tbody tr")).filter(shown);
  const res = {Hosts: hosts.length, Settings: settings.length,
    AllHaveKey: hosts.every(tr => tr.textContent.includes(key)) && settings.every(tr => tr.textContent.includes(key)),
    Planted: hosts.some(tr => tr.textContent.includes(%q))};
  q.value = "mem.thp.defrag"; q.dispatchEvent(new Event("input"));
  await new Promise(res => setTimeout(res, 400));
  const cols = Array.from(document.querySelectorAll("#t-matrix th.col")).filter(shown);
  res.Columns = cols.map(c => c.textContent).join(",");
  res.MatrixRows = Array.from(document.querySelectorAll("#t-matrix tbody tr")).filter(shown).length;
  q.value = ""; q.dispatchEvent(new Event("input"));
  await new Promise(res => setTimeout(res, 400));
  document.getElementById("fw").click();
  res.FW = Array.from(document.querySelectorAll("#t-matrix th.col.fw")).filter(shown).length;
  const th = Array.from(document.querySelectorAll("#t-outliers thead th")).find(th => th.textContent === "fail");
  th.click();
  const fails = Array.from(document.querySelectorAll("#t-outliers tbody tr")).map(tr => +tr.cells[4].textContent);
  res.Sorted = fails.length === 500 && fails.every((f, i) => i === 0 || fails[i-1] >= f);
  return res;
})()`, plantedKey, plantedFile), &after)
	t.Logf("after filter, toggle and sort %+v", after)
	if after.Hosts == 0 || after.Settings == 0 || !after.AllHaveKey || !after.Planted {
		t.Errorf("filter %q: %+v", plantedKey, after)
	}
	if after.Columns != "mem.thp.defrag" || after.MatrixRows != 500 {
		t.Errorf("filter mem.thp.defrag: matrix columns %q, %d rows; want that column for every host", after.Columns, after.MatrixRows)
	}
	if after.FW != r.Summary.FleetWide {
		t.Errorf("fleet-wide toggle shows %d columns, want %d", after.FW, r.Summary.FleetWide)
	}
	if !after.Sorted {
		t.Errorf("a click on fail does not sort the hosts by failures")
	}

	br.close()
	for _, m := range br.console {
		t.Errorf("browser console: %s", m)
	}
	t.Logf("%v in all", time.Since(start).Round(time.Millisecond))
}

// browser is a headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: commands on its fd 3, replies on its fd
// 4, each a JSON message ended by a NUL byte), attached to one page.
type browser struct {
	t       *testing.T
	ctx     context.Context
	cmd     *exec.Cmd
	w       io.WriteCloser
	msgs    chan cdpMessage
	id      int
	session string
	seen    map[string]bool
	console []string // console messages, script errors, log warnings
	stderr  bytes.Buffer
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct{ Message string }
	SessionID string `json:"sessionId,omitempty"`
}

func startBrowser(ctx context.Context, t *testing.T, bin, dir string) *browser {
	t.Helper()
	cmdR, cmdW, err := os.Pipe() // our commands → the browser's fd 3
	if err != nil {
		t.Fatal(err)
	}
	repR, repW, err := os.Pipe() // the browser's fd 4 → its replies
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--remote-debugging-pipe", "--window-size=1366,768", "about:blank"}
	if os.Geteuid() == 0 {
		args = append([]string{"--no-sandbox"}, args...)
	}
	b := &browser{t: t, ctx: ctx, w: cmdW, msgs: make(chan cdpMessage, 64), seen: map[string]bool{}}
	b.cmd = exec.CommandContext(ctx, bin, args...)
	b.cmd.ExtraFiles = []*os.File{cmdR, repW}
	b.cmd.Stderr = &b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	cmdR.Close()
	repW.Close()
	t.Cleanup(func() {
		if b.cmd.ProcessState == nil {
			b.cmd.Process.Kill()
			b.cmd.Wait()
		}
	})
	go func() {
		defer close(b.msgs)
		rd := bufio.NewReader(repR)
		for {
			raw, err := rd.ReadBytes(0)
			if err != nil {
				return
			}
			var m cdpMessage
			if json.Unmarshal(raw[:len(raw)-1], &m) == nil {
				b.msgs <- m
			}
		}
	}()
	var target struct{ TargetID string }
	b.callSession("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct{ SessionID string }
	b.callSession("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	return b
}

// next returns the browser's next message, noting the page's events.
func (b *browser) next() cdpMessage {
	b.t.Helper()
	select {
	case m, ok := <-b.msgs:
		if !ok {
			b.t.Fatalf("the browser went away\n%s", b.stderr.String())
		}
		if m.SessionID == b.session && m.Method != "" {
			b.seen[m.Method] = true
			b.note(m)
		}
		return m
	case <-b.ctx.Done():
		b.t.Fatalf("the browser did not answer in time\n%s", b.stderr.String())
	}
	return cdpMessage{}
}

// note keeps what the page says on its console, throws, or what the
// browser logs as a warning or an error (a CSP refusal among them).
func (b *browser) note(m cdpMessage) {
	switch m.Method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string
			Args []struct {
				Value       any
				Description string
			}
		}
		json.Unmarshal(m.Params, &p)
		var parts []string
		for _, a := range p.Args {
			parts = append(parts, fmt.Sprint(a.Value, a.Description))
		}
		b.console = append(b.console, p.Type+": "+strings.Join(parts, " "))
	case "Runtime.exceptionThrown":
		b.console = append(b.console, "exception: "+string(m.Params))
	case "Log.entryAdded":
		var p struct {
			Entry struct{ Level, Source, Text, URL string }
		}
		json.Unmarshal(m.Params, &p)
		if p.Entry.Level == "error" || p.Entry.Level == "warning" {
			b.console = append(b.console, p.Entry.Level+" ("+p.Entry.Source+"): "+p.Entry.Text)
		}
	}
}

func (b *browser) callSession(session, method string, params, result any) {
	b.t.Helper()
	b.id++
	if params == nil {
		params = map[string]any{}
	}
	m := map[string]any{"id": b.id, "method": method, "params": params}
	if session != "" {
		m["sessionId"] = session
	}
	msg, err := json.Marshal(m)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.w.Write(append(msg, 0)); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	for {
		m := b.next()
		if m.ID != b.id {
			continue
		}
		if m.Error != nil {
			b.t.Fatalf("%s: %s", method, m.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				b.t.Fatalf("%s: %v", method, err)
			}
		}
		return
	}
}

func (b *browser) call(method string, params any) {
	b.t.Helper()
	b.callSession(b.session, method, params, nil)
}

func (b *browser) waitEvent(method string) {
	b.t.Helper()
	for !b.seen[method] {
		b.next()
	}
}

// eval runs a script in the page, awaiting a promise, and decodes its value.
func (b *browser) eval(expr string, v any) {
	b.t.Helper()
	var res struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	b.callSession(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if res.ExceptionDetails != nil {
		b.t.Fatalf("script: %s %s", res.ExceptionDetails.Text, res.ExceptionDetails.Exception.Description)
	}
	if err := json.Unmarshal(res.Result.Value, v); err != nil {
		b.t.Fatalf("script value %s: %v", res.Result.Value, err)
	}
}

func (b *browser) screenshot() []byte {
	b.t.Helper()
	var res struct{ Data string }
	b.callSession(b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &res)
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil || len(png) == 0 {
		b.t.Fatalf("screenshot: %v", err)
	}
	return png
}

// close asks the browser to quit and waits for it, draining what it still
// says (a late console message counts too).
func (b *browser) close() {
	b.t.Helper()
	b.id++
	msg, _ := json.Marshal(map[string]any{"id": b.id, "method": "Browser.close", "params": map[string]any{}})
	b.w.Write(append(msg, 0))
	b.w.Close()
	for m := range b.msgs {
		if m.SessionID == b.session {
			b.note(m)
		}
	}
	b.cmd.Wait()
}
