package experiment

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/workload"
)

// progress prints notes and one line per trial; on a terminal it also
// keeps a bar on the last line with the trial's live throughput and the
// time left. The ETA counts the planned trials left at the measured (or,
// before the first trial ends, estimated) time per trial; it is an upper
// bound when arms can still stop early.
type progress struct {
	mu  sync.Mutex
	w   io.Writer
	bar bool

	label      string
	left       int // trials left including the current one
	trialStart time.Time
	estimate   time.Duration
	walls      []time.Duration
	lastOps    float64
	warmup     bool
	shown      bool
	lastDraw   time.Time
	tick       *time.Ticker
	stop       chan struct{}
}

func newProgress(w io.Writer, bar bool) *progress { return &progress{w: w, bar: bar} }

// println prints a line above the bar.
func (p *progress) println(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	fmt.Fprintln(p.w, s)
	p.drawLocked()
}

func (p *progress) startTrial(label string, left int, estimate time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.left, p.estimate = label, left, estimate
	p.trialStart, p.lastOps, p.warmup = time.Now(), 0, false
	p.drawLocked()
	if p.bar && p.tick == nil {
		// Keep the clock moving while knobs are applied, the server
		// restarts or the workload is quiet.
		p.tick, p.stop = time.NewTicker(time.Second), make(chan struct{})
		go func(tick *time.Ticker, stop chan struct{}) {
			for {
				select {
				case <-tick.C:
					p.mu.Lock()
					p.drawLocked()
					p.mu.Unlock()
				case <-stop:
					return
				}
			}
		}(p.tick, p.stop)
	}
}

func (p *progress) stopTicker() {
	if p.tick != nil {
		p.tick.Stop()
		close(p.stop)
		p.tick = nil
	}
}

// second is the workload's progress callback.
func (p *progress) second(s workload.Second) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastOps, p.warmup = s.Ops, s.Warmup
	if time.Since(p.lastDraw) > 200*time.Millisecond {
		p.drawLocked()
	}
}

func (p *progress) endTrial(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.walls = append(p.walls, time.Since(p.trialStart))
	p.stopTicker()
	p.clearLocked()
	fmt.Fprintln(p.w, line)
	p.label = ""
}

func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopTicker()
	p.clearLocked()
	p.label = ""
}

func (p *progress) perTrial() time.Duration {
	if len(p.walls) == 0 {
		return p.estimate
	}
	var sum time.Duration
	for _, w := range p.walls {
		sum += w
	}
	return sum / time.Duration(len(p.walls))
}

// eta is the time left: the rest of this trial and the trials after it.
func (p *progress) eta() time.Duration {
	per := p.perTrial()
	cur := max(0, per-time.Since(p.trialStart))
	return cur + time.Duration(max(0, p.left-1))*per
}

func (p *progress) clearLocked() {
	if p.bar && p.shown {
		termsafe.Control(p.w, termsafe.EraseLine)
		p.shown = false
	}
}

func (p *progress) drawLocked() {
	if !p.bar || p.label == "" {
		return
	}
	per := p.perTrial()
	frac := 0.0
	if per > 0 {
		frac = min(1, float64(time.Since(p.trialStart))/float64(per))
	}
	const width = 20
	n := int(frac * width)
	phase := "measuring"
	if p.warmup {
		phase = "warm-up"
	}
	ops := ""
	if p.lastOps > 0 {
		ops = fmt.Sprintf("  %s %.0f/s", phase, p.lastOps)
	}
	termsafe.Control(p.w, termsafe.EraseLine)
	fmt.Fprintf(p.w, "[%s%s] %s%s  ETA ≤ %s", strings.Repeat("=", n), strings.Repeat(" ", width-n), p.label, ops, fmtETA(p.eta()))
	p.shown = true
	p.lastDraw = time.Now()
}

func fmtETA(d time.Duration) string {
	d = d.Round(time.Second)
	if d >= time.Hour {
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
