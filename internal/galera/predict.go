package galera

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Predict says which running members stay Primary after the scenario, and
// why. A scenario naming unknown members, or a partition whose sides do
// not cover the members once each, predicts nothing Primary and says so in
// Why.
func (l Layout) Predict(s Scenario) Prediction {
	p := Prediction{Scenario: s, Primary: map[string]bool{}}
	if len(l.Members) > MaxMembers {
		p.Why = fmt.Sprintf("%d members: more than %d, not judged", len(l.Members), MaxMembers)
		return p
	}
	c := newCalc(l)
	var err error
	switch s.Kind {
	case KillAtOnce:
		err = c.predictAtOnce(s, &p)
	case KillOneByOne:
		err = c.predictOneByOne(s, &p)
	case Partition:
		err = c.predictPartition(s, &p)
	case Shutdown:
		err = c.predictShutdown(s, &p)
	default:
		err = fmt.Errorf("unknown scenario kind %q", s.Kind)
	}
	if err != nil {
		p.Primary = map[string]bool{}
		p.Survives = false
		p.Why = "not judged: " + err.Error()
	}
	return p
}

// votes formats "2 of 3 votes > 1.5: Primary".
func votes(comp, last, left int) string {
	base := last - left
	half := strconv.FormatFloat(float64(base)/2, 'f', -1, 64)
	verdict := "non-Primary"
	op := "<="
	if primary(comp, last, left) {
		verdict, op = "Primary", ">"
	}
	if left > 0 {
		return fmt.Sprintf("%d of %d votes (%d left cleanly) %s %s: %s", comp, last, left, op, half, verdict)
	}
	return fmt.Sprintf("%d of %d votes %s %s: %s", comp, last, op, half, verdict)
}

func (c *calc) mark(p *Prediction, comp set, prim bool) {
	for _, name := range c.names(comp) {
		p.Primary[name] = prim
	}
	if prim && comp&c.data != 0 {
		p.Survives = true
	}
}

func (c *calc) noData(comp set, prim bool) string {
	if prim && comp&c.data == 0 {
		return " (no data node left: the cluster keeps no database)"
	}
	return ""
}

func (c *calc) predictAtOnce(s Scenario, p *Prediction) error {
	lost, err := c.index(s.Members)
	if err != nil {
		return err
	}
	rest := c.all &^ lost
	w := c.weight(rest)
	prim := primary(w, c.total, 0)
	c.mark(p, rest, prim)
	p.Why = votes(w, c.total, 0) + c.noData(rest, prim)
	return nil
}

func (c *calc) predictOneByOne(s Scenario, p *Prediction) error {
	if _, err := c.index(s.Members); err != nil {
		return err
	}
	comp, last := c.all, c.total
	var steps []string
	prim := true
	for _, name := range s.Members {
		i := c.find(name)
		if comp&(1<<i) == 0 {
			return fmt.Errorf("member %q lost twice", name)
		}
		comp &^= 1 << i
		if !prim {
			continue // nothing reforms without a bootstrap
		}
		w := c.weight(comp)
		steps = append(steps, name+" lost: "+votes(w, last, 0))
		if primary(w, last, 0) {
			last = w
		} else {
			prim = false
		}
	}
	c.mark(p, comp, prim)
	p.Why = strings.Join(steps, "; ") + c.noData(comp, prim)
	return nil
}

func (c *calc) predictPartition(s Scenario, p *Prediction) error {
	var seen set
	sides := make([]set, len(s.Sides))
	for i, names := range s.Sides {
		side, err := c.index(names)
		if err != nil {
			return err
		}
		if side&seen != 0 || len(names) != bits.OnesCount32(uint32(side)) {
			return fmt.Errorf("a member is on more than one side")
		}
		seen |= side
		sides[i] = side
	}
	if seen != c.all {
		return fmt.Errorf("members on no side: %s", strings.Join(c.names(c.all&^seen), ", "))
	}
	var why []string
	for _, side := range sides {
		w := c.weight(side)
		prim := primary(w, c.total, 0)
		c.mark(p, side, prim)
		why = append(why, "{"+strings.Join(c.names(side), ",")+"} "+votes(w, c.total, 0)+c.noData(side, prim))
	}
	p.Why = strings.Join(why, "; ")
	return nil
}

func (c *calc) predictShutdown(s Scenario, p *Prediction) error {
	left, err := c.index(s.Members)
	if err != nil {
		return err
	}
	// One at a time: each leave is announced, so the component that stays
	// keeps Primary while it weighs anything; the arithmetic is that of
	// all the leaves together.
	rest := c.all &^ left
	w, lw := c.weight(rest), c.weight(left)
	prim := primary(w, c.total, lw)
	c.mark(p, rest, prim)
	p.Why = "one at a time: " + votes(w, c.total, lw) + c.noData(rest, prim)
	return nil
}

// Scenarios are what a proof runs on a live cluster of this layout: few,
// each decisive, the tolerance's boundary tested on both sides.
//
//   - kill_at_once_K: the worst K = AtOnce members at once (survives);
//   - kill_at_once_K+1: K+1 members at once, a data node left (does not);
//   - kill_one_by_one_N: the first N = OneByOne steps of a shortest failing
//     order (survives; left out when N < 2, a kill at once of one is the
//     same), and kill_one_by_one_N+1: that whole order (does not);
//   - partition_NAME: the worst single member cut off, or with segments
//     partition_segment_S for each segment;
//   - shutdown_K: every data node but one shut down cleanly, one at a
//     time in the order given (arbitrators kept).
//
// No scenario kills every data node.
func Scenarios(l Layout) []Scenario {
	if len(l.Members) == 0 || len(l.Members) > MaxMembers {
		return nil
	}
	c := newCalc(l)
	var out []Scenario
	k, fail := c.atOnce()
	if k > 0 {
		out = append(out, Scenario{Name: fmt.Sprintf("kill_at_once_%d", k), Kind: KillAtOnce, Members: c.names(c.worstSurviving(k))})
	}
	if fail != 0 {
		out = append(out, Scenario{Name: fmt.Sprintf("kill_at_once_%d", k+1), Kind: KillAtOnce, Members: c.names(fail)})
	}
	n, order := c.oneByOne()
	if order != nil {
		names := make([]string, len(order))
		for i, idx := range order {
			names[i] = l.Members[idx].Name
		}
		if n >= 2 {
			out = append(out, Scenario{Name: fmt.Sprintf("kill_one_by_one_%d", n), Kind: KillOneByOne, Members: names[:n]})
		}
		if len(names) >= 2 {
			out = append(out, Scenario{Name: fmt.Sprintf("kill_one_by_one_%d", len(names)), Kind: KillOneByOne, Members: names})
		}
	}
	if segs := l.segments(); len(segs) > 1 {
		done := map[set]bool{}
		for _, seg := range segs {
			side := c.segment(seg)
			if done[side] {
				continue // two segments: cutting off either is one split
			}
			done[side], done[c.all&^side] = true, true
			out = append(out, Scenario{Name: fmt.Sprintf("partition_segment_%d", seg), Kind: Partition,
				Sides: [][]string{c.names(side), c.names(c.all &^ side)}})
		}
	} else if len(l.Members) > 1 {
		w := c.worst()
		side := set(1) << w
		out = append(out, Scenario{Name: "partition_" + l.Members[w].Name, Kind: Partition,
			Sides: [][]string{c.names(side), c.names(c.all &^ side)}})
	}
	// Keep the heaviest data node (the first of them on a tie).
	keep := -1
	for i, m := range l.Members {
		if !m.Arbitrator && (keep < 0 || c.w[i] > c.w[keep]) {
			keep = i
		}
	}
	if keep >= 0 {
		left := c.data &^ (1 << keep)
		if left != 0 {
			out = append(out, Scenario{Name: fmt.Sprintf("shutdown_%d", bits.OnesCount32(uint32(left))), Kind: Shutdown, Members: c.names(left)})
		}
	}
	return out
}
