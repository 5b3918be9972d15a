package galera

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// MaxMembers bounds the exhaustive search: every subset of the members is
// visited (2^n), which stays in milliseconds up to 16 members. Galera
// clusters are far smaller; a bigger layout gets a note instead of numbers.
const MaxMembers = 16

// set is a subset of a layout's members, bit i for Members[i].
type set uint32

// calc holds a layout's members as bit sets for the searches.
type calc struct {
	l     Layout
	n     int
	all   set
	data  set // data nodes (not arbitrators)
	w     []int
	total int
	sums  []int // weight of every subset, by its bits
}

func newCalc(l Layout) *calc {
	c := &calc{l: l, n: len(l.Members), w: make([]int, len(l.Members))}
	for i, m := range l.Members {
		c.all |= 1 << i
		if !m.Arbitrator {
			c.data |= 1 << i
		}
		w := m.Weight
		if w < 0 {
			w = 0
		}
		c.w[i] = w
		c.total += w
	}
	if c.n <= MaxMembers {
		c.sums = make([]int, 1<<c.n)
		for s := 1; s < len(c.sums); s++ {
			low := s & -s
			c.sums[s] = c.sums[s&^low] + c.w[bits.TrailingZeros32(uint32(low))]
		}
	}
	return c
}

func (c *calc) weight(s set) int {
	return c.sums[s]
}

// primary is Galera's weighted quorum: a component keeps Primary iff its
// weight counts more than half of the last Primary component's, less the
// members that left it cleanly. Exactly half is not Primary.
func primary(comp, last, left int) bool {
	return comp > 0 && comp*2 > last-left
}

// index maps member names to bit positions.
func (c *calc) index(names []string) (set, error) {
	var s set
	for _, name := range names {
		i := c.find(name)
		if i < 0 {
			return 0, fmt.Errorf("no member %q in the layout", name)
		}
		s |= 1 << i
	}
	return s, nil
}

func (c *calc) find(name string) int {
	for i, m := range c.l.Members {
		if m.Name == name {
			return i
		}
	}
	return -1
}

func (c *calc) names(s set) []string {
	var out []string
	for i := 0; i < c.n; i++ {
		if s&(1<<i) != 0 {
			out = append(out, c.l.Members[i].Name)
		}
	}
	return out
}

// survivesAtOnce: the members of lost fail together; the rest keeps a
// Primary component with a data node.
func (c *calc) survivesAtOnce(lost set) bool {
	rest := c.all &^ lost
	return rest&c.data != 0 && primary(c.weight(rest), c.total, 0)
}

// atOnce is the largest k such that every k members failing at once leave
// a Primary component with a data node, and a failing set of k+1 members
// that leaves a data node running (0 when none does).
func (c *calc) atOnce() (int, set) {
	minFail, minFailData := c.n+1, c.n+1
	var failData set
	for s := set(0); s <= c.all; s++ {
		if c.survivesAtOnce(s) {
			continue
		}
		k := bits.OnesCount32(uint32(s))
		if k < minFail {
			minFail = k
		}
		if c.all&^s&c.data != 0 && (k < minFailData || k == minFailData && c.worse(s, failData)) {
			minFailData, failData = k, s
		}
	}
	if minFail > c.n || minFail == 0 {
		// No members, or no weight at all (not even the whole cluster
		// keeps Primary after a change).
		return 0, 0
	}
	if minFailData != minFail {
		failData = 0
	}
	return minFail - 1, failData
}

// worse orders candidate sets of the same size: the heavier loss first,
// then the earlier members (deterministic scenarios).
func (c *calc) worse(a, b set) bool {
	wa, wb := c.weight(a), c.weight(b)
	if wa != wb {
		return wa > wb
	}
	return lexLess(a, b)
}

// lexLess: the set whose lowest differing member comes first.
func lexLess(a, b set) bool {
	d := a ^ b
	if d == 0 {
		return false
	}
	low := d & -d
	return a&low != 0
}

// worstSurviving is the set of k members whose loss at once leaves the
// least weight (still surviving, by the definition of k).
func (c *calc) worstSurviving(k int) set {
	var best set
	found := false
	for s := set(0); s <= c.all; s++ {
		if bits.OnesCount32(uint32(s)) != k || !c.survivesAtOnce(s) {
			continue
		}
		if !found || c.worse(s, best) {
			best, found = s, true
		}
	}
	return best
}

// oneByOne is the largest k such that any k members failing one by one, in
// any order, leave a Primary component with a data node. Each step the
// cluster survives makes the survivors the last Primary component; the
// first step that fails ends the cluster (nothing reforms by itself). It
// also returns a shortest failing sequence that leaves a data node running
// (nil when every shortest one kills the last data node).
func (c *calc) oneByOne() (int, []int) {
	// Breadth-first over the Primary components reachable by tolerated
	// failures; the first failing step found is a shortest failing sequence.
	// parent[s] is the member whose loss led to s first (-1: not reached).
	parent := make([]int8, 1<<c.n)
	for i := range parent {
		parent[i] = -1
	}
	path := func(s set, last int) []int {
		out := []int{last}
		for s != c.all {
			i := int(parent[s])
			out = append(out, i)
			s |= 1 << i
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	level := []set{c.all}
	for depth := 0; len(level) > 0; depth++ {
		var next []set
		anyFail := false
		var failPath []int
		for _, comp := range level {
			w := c.weight(comp)
			for i := 0; i < c.n; i++ {
				if comp&(1<<i) == 0 {
					continue
				}
				rest := comp &^ (1 << i)
				if rest&c.data != 0 && primary(c.weight(rest), w, 0) {
					if parent[rest] < 0 {
						parent[rest] = int8(i)
						next = append(next, rest)
					}
					continue
				}
				anyFail = true
				if failPath == nil && rest&c.data != 0 {
					failPath = path(comp, i)
				}
			}
		}
		if anyFail {
			return depth, failPath
		}
		level = next
	}
	return 0, nil
}

// leaveCleanly: the members of left shut down cleanly together; the rest
// keeps Primary with a data node.
func (c *calc) leaveCleanly(left set) bool {
	rest := c.all &^ left
	return rest&c.data != 0 && primary(c.weight(rest), c.total, c.weight(left))
}

// cleanShutdown is how many members can leave cleanly with a data node
// still serving (the best choice of the one kept).
func (c *calc) cleanShutdown() int {
	best := 0
	for s := set(0); s <= c.all; s++ {
		if k := bits.OnesCount32(uint32(s)); k > best && c.leaveCleanly(s) {
			best = k
		}
	}
	return best
}

// evenSplit: some split of the members into two sides gives each exactly
// half of the weight, so neither side stays Primary.
func (c *calc) evenSplit() bool {
	if c.total == 0 || c.total%2 != 0 || c.n < 2 {
		return false
	}
	for s := set(1); s < c.all; s++ {
		if c.weight(s)*2 == c.total {
			return true
		}
	}
	return false
}

// worst is the heaviest member (ties: a data node before an arbitrator,
// then the name).
func (c *calc) worst() int {
	best := -1
	for i, m := range c.l.Members {
		if best < 0 {
			best = i
			continue
		}
		b := c.l.Members[best]
		switch {
		case c.w[i] != c.w[best]:
			if c.w[i] > c.w[best] {
				best = i
			}
		case m.Arbitrator != b.Arbitrator:
			if !m.Arbitrator {
				best = i
			}
		case m.Name < b.Name:
			best = i
		}
	}
	return best
}

// segments lists the segment numbers in use, in order.
func (l Layout) segments() []int {
	seen := map[int]bool{}
	var out []int
	for _, m := range l.Members {
		if !seen[m.Segment] {
			seen[m.Segment] = true
			out = append(out, m.Segment)
		}
	}
	sort.Ints(out)
	return out
}

func (c *calc) segment(seg int) set {
	var s set
	for i, m := range c.l.Members {
		if m.Segment == seg {
			s |= 1 << i
		}
	}
	return s
}

// isolated says which side keeps Primary when side is cut off from the
// rest: "segment" (side), "rest" or "none".
func (c *calc) isolated(side set) string {
	switch {
	case primary(c.weight(side), c.total, 0):
		return "segment"
	case primary(c.weight(c.all&^side), c.total, 0):
		return "rest"
	}
	return "none"
}

// Analyze computes what the layout survives: failures at once and one by
// one, clean shutdowns, the worst single failure, each segment's loss and
// isolation, the changes that would help, and the layout's problems.
func Analyze(l Layout) Tolerance {
	t := analyze(l)
	if len(l.Members) > 0 && len(l.Members) <= MaxMembers {
		t.WhatIf = whatIf(l, t)
	}
	return t
}

func analyze(l Layout) Tolerance {
	t := Tolerance{Layout: l}
	for _, m := range l.Members {
		if m.Arbitrator {
			t.Arbitrators++
		} else {
			t.DataNodes++
		}
		if m.Weight > 0 {
			t.Weight += m.Weight
		}
	}
	switch {
	case len(l.Members) == 0:
		t.Findings = append(t.Findings, "no members: nothing to judge")
		return t
	case len(l.Members) > MaxMembers:
		t.Findings = append(t.Findings, fmt.Sprintf("%d members: more than the %d this model searches exhaustively; not judged", len(l.Members), MaxMembers))
		return t
	case t.DataNodes == 0:
		t.Findings = append(t.Findings, "no data node: an arbitrator alone keeps no database")
	}
	c := newCalc(l)
	t.AtOnce, _ = c.atOnce()
	t.OneByOne, _ = c.oneByOne()
	t.CleanShutdown = c.cleanShutdown()
	t.EvenSplit = c.evenSplit()
	w := c.worst()
	t.Worst = l.Members[w].Name
	t.WorstSurvives = c.survivesAtOnce(1 << w)
	segs := l.segments()
	if len(segs) > 1 {
		for _, seg := range segs {
			s := c.segment(seg)
			t.Segments = append(t.Segments, SegmentTolerance{
				Segment:         seg,
				Members:         c.names(s),
				LoseSurvives:    c.survivesAtOnce(s),
				IsolatedPrimary: c.isolated(s),
			})
		}
	}
	t.Findings = append(t.Findings, findings(c, t)...)
	return t
}

// SegmentSplitSurvives: whichever single segment is cut off from the rest,
// a side with a data node keeps Primary (true with one segment).
func (t Tolerance) SegmentSplitSurvives() bool {
	for _, s := range t.Segments {
		if s.IsolatedPrimary == "none" {
			return false
		}
	}
	return true
}

// Serious says the layout stops on a single failure or on one segment's
// isolation: what an operator must hear about (dbhost galera tolerance
// exits 1).
func (t Tolerance) Serious() bool {
	return len(t.Layout.Members) == 0 || len(t.Layout.Members) > MaxMembers ||
		t.AtOnce < 1 || !t.SegmentSplitSurvives()
}

func findings(c *calc, t Tolerance) []string {
	var out []string
	voting := 0
	var zero []string
	for _, m := range c.l.Members {
		if m.Weight > 0 {
			voting++
		} else {
			zero = append(zero, m.Name)
		}
	}
	if t.Arbitrators == 0 && voting%2 == 0 && t.EvenSplit {
		out = append(out, fmt.Sprintf("%d voting members and no arbitrator: a network split into two halves stops both sides", voting))
	} else if t.EvenSplit {
		out = append(out, "the weights can split into two equal halves: such a network split stops both sides")
	}
	if len(zero) > 0 {
		out = append(out, fmt.Sprintf("pc.weight=0: %s never count toward quorum", strings.Join(zero, ", ")))
	}
	for _, s := range t.Segments {
		if s.IsolatedPrimary == "none" {
			out = append(out, fmt.Sprintf("segment %d cut off from the rest: no side keeps Primary", s.Segment))
		}
		if !s.LoseSurvives {
			out = append(out, fmt.Sprintf("losing segment %d whole stops the cluster", s.Segment))
		}
	}
	var single []string
	for i, m := range c.l.Members {
		if !c.survivesAtOnce(1 << i) {
			single = append(single, m.Name)
		}
	}
	if len(single) > 0 {
		out = append(out, fmt.Sprintf("losing %s alone stops the cluster", strings.Join(single, " or ")))
	}
	var assumed []string
	for _, m := range c.l.Members {
		if m.Assumed {
			assumed = append(assumed, m.Name)
		}
	}
	if len(assumed) > 0 {
		out = append(out, fmt.Sprintf("weight and segment of %s assumed, not read from them: the verdict rests on them", strings.Join(assumed, ", ")))
	}
	return out
}

// score orders layouts by what they survive, most useful first: a segment
// split some side survives, failures at once, no even split, failures one
// by one.
type score struct {
	seg      bool
	atOnce   int
	noEven   bool
	oneByOne int
}

func scoreOf(t Tolerance) score {
	return score{t.SegmentSplitSurvives(), t.AtOnce, !t.EvenSplit, t.OneByOne}
}

// better: a improves on b in at least one respect.
func (a score) improves(b score) bool {
	return a.seg && !b.seg || a.atOnce > b.atOnce || a.noEven && !b.noEven || a.oneByOne > b.oneByOne
}

func (a score) less(b score) bool {
	if a.seg != b.seg {
		return !a.seg
	}
	if a.atOnce != b.atOnce {
		return a.atOnce < b.atOnce
	}
	if a.noEven != b.noEven {
		return !a.noEven
	}
	return a.oneByOne < b.oneByOne
}

// whatIf tries single changes and keeps those that improve something:
// an arbitrator added (in a segment of its own when there are two), a
// member removed when the count is even, one data node's pc.weight raised
// to 2. Best first.
func whatIf(l Layout, now Tolerance) []WhatIf {
	type cand struct {
		w WhatIf
		s score
	}
	base := scoreOf(now)
	var out []cand
	try := func(change string, nl Layout) {
		t := analyze(nl)
		s := scoreOf(t)
		if !s.improves(base) {
			return
		}
		w := WhatIf{Change: change, AtOnce: t.AtOnce, OneByOne: t.OneByOne, EvenSplit: t.EvenSplit}
		if len(t.Segments) > 0 {
			v := t.SegmentSplitSurvives()
			w.SegmentSplitSurvives = &v
		}
		out = append(out, cand{w, s})
	}

	if len(l.Members) < MaxMembers {
		segs := l.segments()
		seg := segs[0]
		where := ""
		if len(segs) == 2 {
			seg = segs[1] + 1
			where = fmt.Sprintf(" in a third segment (gmcast.segment=%d)", seg)
		} else if len(segs) > 2 {
			where = fmt.Sprintf(" in segment %d", seg)
		}
		name := "garbd"
		for i := 2; hasMember(l, name); i++ {
			name = "garbd" + strconv.Itoa(i)
		}
		nl := cloneLayout(l)
		nl.Members = append(nl.Members, Member{Name: name, Weight: 1, Segment: seg, Arbitrator: true})
		what := "add an arbitrator (garbd)"
		if hasArbitrator(l) {
			what = "add another arbitrator (" + name + ")"
		}
		try(what+where, nl)
	}

	// Removing one of two leaves no cluster at all: not offered.
	if len(l.Members)%2 == 0 && len(l.Members) >= 4 {
		// On a tie, an arbitrator goes first (it holds no data), then the
		// last member.
		var best *cand
		order := make([]int, 0, len(l.Members))
		for i := len(l.Members) - 1; i >= 0; i-- {
			if l.Members[i].Arbitrator {
				order = append(order, i)
			}
		}
		for i := len(l.Members) - 1; i >= 0; i-- {
			if !l.Members[i].Arbitrator {
				order = append(order, i)
			}
		}
		for _, i := range order {
			nl := cloneLayout(l)
			nl.Members = append(nl.Members[:i:i], nl.Members[i+1:]...)
			t := analyze(nl)
			if t.DataNodes == 0 {
				continue
			}
			s := scoreOf(t)
			if best == nil || best.s.less(s) {
				v := WhatIf{Change: "remove " + l.Members[i].Name, AtOnce: t.AtOnce, OneByOne: t.OneByOne, EvenSplit: t.EvenSplit}
				if len(t.Segments) > 0 {
					ok := t.SegmentSplitSurvives()
					v.SegmentSplitSurvives = &ok
				}
				best = &cand{v, s}
			}
		}
		if best != nil && best.s.improves(base) {
			out = append(out, *best)
		}
	}

	var bestW *cand
	for i, m := range l.Members {
		if m.Arbitrator || m.Weight != 1 {
			continue
		}
		nl := cloneLayout(l)
		nl.Members[i].Weight = 2
		t := analyze(nl)
		s := scoreOf(t)
		if bestW == nil || bestW.s.less(s) {
			v := WhatIf{Change: fmt.Sprintf("raise %s's pc.weight to 2", m.Name), AtOnce: t.AtOnce, OneByOne: t.OneByOne, EvenSplit: t.EvenSplit}
			if len(t.Segments) > 0 {
				ok := t.SegmentSplitSurvives()
				v.SegmentSplitSurvives = &ok
			}
			bestW = &cand{v, s}
		}
	}
	if bestW != nil && bestW.s.improves(base) {
		out = append(out, *bestW)
	}

	sort.SliceStable(out, func(i, j int) bool { return out[j].s.less(out[i].s) })
	res := make([]WhatIf, len(out))
	for i, c := range out {
		res[i] = c.w
	}
	return res
}

func hasArbitrator(l Layout) bool {
	for _, m := range l.Members {
		if m.Arbitrator {
			return true
		}
	}
	return false
}

func hasMember(l Layout, name string) bool {
	for _, m := range l.Members {
		if m.Name == name {
			return true
		}
	}
	return false
}

func cloneLayout(l Layout) Layout {
	return Layout{Members: append([]Member(nil), l.Members...), Notes: append([]string(nil), l.Notes...)}
}
