package galeraprove

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/galera"
	"github.com/dbhost/dbhost/internal/galeralab"
)

// fakeLab is a cluster in memory that behaves as Galera does for the
// proof's purposes, by its own simple bookkeeping (equal weights): a
// killed member or a cut link is noticed after detect, a clean shutdown at
// once; a component is Primary while it holds more than half of the last
// Primary component. Tests make it lie to see mismatches.
type fakeLab struct {
	mu      sync.Mutex
	layout  galera.Layout
	suspect time.Duration // what the lab says its suspect timeout is
	detect  time.Duration // when the fake's nodes notice a failure

	running  map[string]bool
	sides    [][]string
	prim     map[string]bool // the last Primary component
	views    map[string]*engine.GaleraStatus
	due      time.Time // a failure not yet noticed is noticed then
	pending  bool
	killedAt []time.Time
	shutdown [][]string // the names of each Shutdown call

	// lie changes what Status returns for a node (nil: the truth).
	lie func(name string, st *engine.GaleraStatus)
	// statusErr fails Status for a node.
	statusErr    map[string]error
	recoverErr   error
	recoverSick  string // Recover leaves this node non-Primary
	recoverCalls int
}

func newFake(spec string, detect time.Duration) *fakeLab {
	l, err := galera.ParseMembers(spec)
	if err != nil {
		panic(err)
	}
	f := &fakeLab{layout: l, suspect: detect, detect: detect, statusErr: map[string]error{}}
	f.heal()
	return f
}

func (f *fakeLab) Nodes() []galeralab.Node {
	var out []galeralab.Node
	for i, m := range f.layout.Members {
		out = append(out, galeralab.Node{Name: m.Name, Arbitrator: m.Arbitrator, Weight: m.Weight, Segment: m.Segment,
			Addr: fmt.Sprintf("10.238.0.%d", i+2), Netns: "dbhost-lab-test-" + m.Name})
	}
	return out
}

func (f *fakeLab) Layout() galera.Layout                 { return f.layout }
func (f *fakeLab) SuspectTimeout() time.Duration         { return f.suspect }
func (f *fakeLab) LogTail(name string, lines int) string { return "  (" + name + "'s log)" }

func (f *fakeLab) Times() (time.Duration, time.Duration) {
	return 12 * time.Second, 0
}

func (f *fakeLab) Running(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[name]
}

// heal brings every member back in one Primary component.
func (f *fakeLab) heal() {
	f.running, f.prim, f.views, f.sides, f.pending = map[string]bool{}, map[string]bool{}, map[string]*engine.GaleraStatus{}, nil, false
	for _, m := range f.layout.Members {
		f.running[m.Name], f.prim[m.Name] = true, true
	}
	f.reform()
}

// reform computes every running member's component and whether it is
// Primary.
func (f *fakeLab) reform() {
	f.pending = false
	groups := [][]string{}
	if f.sides != nil {
		groups = append(groups, f.sides...)
	} else {
		var all []string
		for _, m := range f.layout.Members {
			all = append(all, m.Name)
		}
		groups = append(groups, all)
	}
	last := len(f.prim)
	newPrim := map[string]bool{}
	for _, g := range groups {
		var comp []string
		inPrim := 0
		for _, m := range g {
			if f.running[m] {
				comp = append(comp, m)
				if f.prim[m] {
					inPrim++
				}
			}
		}
		primary := inPrim == len(comp) && 2*len(comp) > last
		for _, m := range comp {
			st := &engine.GaleraStatus{ClusterSize: len(comp), ClusterStatus: "non-Primary", LocalState: "Initialized"}
			if primary {
				st.ClusterStatus, st.LocalState, st.Ready = "Primary", "Synced", true
				newPrim[m] = true
			}
			f.views[m] = st
		}
	}
	f.prim = newPrim
}

func (f *fakeLab) notice() {
	if f.pending && !time.Now().Before(f.due) {
		f.reform()
	}
}

func (f *fakeLab) Kill(names ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notice()
	for _, n := range names {
		if !f.running[n] {
			return fmt.Errorf("%s is not running", n)
		}
		f.running[n] = false
		delete(f.views, n)
	}
	f.killedAt = append(f.killedAt, time.Now())
	f.pending, f.due = true, time.Now().Add(f.detect)
	return nil
}

func (f *fakeLab) Shutdown(_ context.Context, names ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notice()
	f.shutdown = append(f.shutdown, names)
	for _, n := range names {
		f.running[n] = false
		delete(f.views, n)
		delete(f.prim, n) // announced: the last component shrinks
	}
	f.reform()
	return nil
}

func (f *fakeLab) Partition(sides ...[]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sides = sides
	f.pending, f.due = true, time.Now().Add(f.detect)
	return nil
}

func (f *fakeLab) Heal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sides = nil
	return nil
}

func (f *fakeLab) Recover(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recoverCalls++
	if f.recoverErr != nil {
		return f.recoverErr
	}
	f.heal()
	if f.recoverSick != "" {
		f.views[f.recoverSick].ClusterStatus = "non-Primary"
	}
	return ctx.Err()
}

func (f *fakeLab) Status(ctx context.Context, name string) (*engine.GaleraStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.statusErr[name]; err != nil {
		return nil, err
	}
	f.notice()
	v, ok := f.views[name]
	if !ok || !f.running[name] {
		return nil, errors.New("connect: no such socket")
	}
	st := *v
	if f.lie != nil {
		f.lie(name, &st)
	}
	return &st, ctx.Err()
}
