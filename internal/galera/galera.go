// Package galera holds the quorum arithmetic of a Galera cluster: which
// failures a layout of members, weights and segments survives, and what an
// arbitrator or a changed weight would do. It reads nothing itself: the
// layout comes from a node's wsrep status and variables (FromNode), from a
// lab, or from a user's description (ParseMembers).
//
// The rule (Galera's weighted quorum): after members disappear, a component
// stays Primary only while the weight of its members is more than half of
// the weight of the last Primary component, less the members that left it
// cleanly (a clean shutdown is announced and does not count). A failure the
// cluster survives shrinks that last component, so failures one by one
// (each noticed, after evs.suspect_timeout, before the next) are judged
// against an ever smaller cluster; failures at once against the whole.
package galera

// Member is one voting member of the cluster.
type Member struct {
	// Name is wsrep_node_name (or the address when no name is known).
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
	// Weight is pc.weight (default 1; 0 votes nothing).
	Weight int `json:"weight"`
	// Segment is gmcast.segment (default 0): nodes of one data centre.
	Segment int `json:"segment"`
	// Arbitrator: garbd, which votes and holds no data.
	Arbitrator bool `json:"arbitrator,omitempty"`
	// Assumed: weight and segment were not read from the member itself
	// (another node's view, or defaults), so the verdict rests on them.
	Assumed bool `json:"assumed,omitempty"`
	// Unnamed: the member is only counted (the node's status gave the
	// cluster's size, not who is in it); Name is a placeholder, memberN.
	Unnamed bool `json:"unnamed,omitempty"`
}

// Layout is the last Primary component: the members that vote.
type Layout struct {
	Members []Member `json:"members"`
	// Notes say what was assumed while building the layout.
	Notes []string `json:"notes,omitempty"`
}

// Kind is how members go away in a scenario.
type Kind string

const (
	// KillAtOnce: the members fail together (kill -9, power loss), before
	// the others notice any of them.
	KillAtOnce Kind = "kill_at_once"
	// KillOneByOne: the members fail in order, each after the cluster
	// reformed without the previous one (more than evs.suspect_timeout apart).
	KillOneByOne Kind = "kill_one_by_one"
	// Partition: the network splits the members into Sides; nobody fails.
	Partition Kind = "partition"
	// Shutdown: the members stop cleanly and announce it, one at a time in
	// order, each after the cluster reformed without the previous one.
	// Clean shutdowns at the same moment race: on the lab, 2 of 3 nodes
	// stopped together left the third non-Primary in 5 of 6 tries (a
	// leave announced while the view is changing counts as a failure).
	Shutdown Kind = "shutdown"
)

// Scenario is one way of losing members.
type Scenario struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Members go away (in order for KillOneByOne and Shutdown); unused
	// for Partition.
	Members []string `json:"members,omitempty"`
	// Sides of a Partition: every member on exactly one side.
	Sides [][]string `json:"sides,omitempty"`
}

// Prediction is what a scenario leaves: for every member still running,
// whether it is in a Primary component.
type Prediction struct {
	Scenario Scenario        `json:"scenario"`
	Primary  map[string]bool `json:"primary"`
	// Survives: some data node (not only an arbitrator) stays Primary.
	Survives bool `json:"survives"`
	// Why is the arithmetic, e.g. "2 of 3 votes > 3/2".
	Why string `json:"why"`
}

// Tolerance is what a layout survives.
type Tolerance struct {
	Layout Layout `json:"layout"`
	// DataNodes and Arbitrators count the members by kind; Weight is the
	// sum of their weights.
	DataNodes   int `json:"data_nodes"`
	Arbitrators int `json:"arbitrators"`
	Weight      int `json:"weight"`
	// AtOnce is the largest k such that ANY k members failing at once
	// leave a Primary component with a data node; OneByOne the same for k
	// members failing one by one, in any order, each noticed before the
	// next. Both count members (an arbitrator counts as a member when it is
	// lost) and stop short of losing the last data node: 3 data nodes
	// survive 1 and 1, 3 data nodes and garbd 1 at once and 2 one by one,
	// 2 data nodes 0 and 0.
	AtOnce   int `json:"at_once"`
	OneByOne int `json:"one_by_one"`
	// CleanShutdown is how many members can be shut down cleanly, one at
	// a time, one data node still serving.
	CleanShutdown int `json:"clean_shutdown"`
	// EvenSplit: the members can be split into two sides of exactly half
	// the weight each, and a network split there stops both sides.
	EvenSplit bool `json:"even_split"`
	// Worst is the single failure that leaves the least margin (the
	// heaviest member); WorstSurvives whether the cluster survives it.
	Worst         string `json:"worst_single_failure"`
	WorstSurvives bool   `json:"worst_single_failure_survives"`
	// Segments: losing each segment whole, and each segment cut off from
	// the rest (only with more than one segment).
	Segments []SegmentTolerance `json:"segments,omitempty"`
	// WhatIf: the same numbers after one change (an arbitrator added, a
	// weight changed), the changes that help first.
	WhatIf []WhatIf `json:"what_if,omitempty"`
	// Findings are the layout's problems in words (an even number of
	// voting members, a segment split that loses both sides, ...).
	Findings []string `json:"findings,omitempty"`
}

// SegmentTolerance is one segment's loss and isolation.
type SegmentTolerance struct {
	Segment int      `json:"segment"`
	Members []string `json:"members"`
	// LoseSurvives: the rest stays Primary when this segment fails whole.
	LoseSurvives bool `json:"lose_survives"`
	// IsolatedPrimary names the side that stays Primary when this segment
	// is cut off from the rest: "segment", "rest" or "none".
	IsolatedPrimary string `json:"isolated_primary"`
}

// WhatIf is one change and what the layout survives after it.
type WhatIf struct {
	Change   string `json:"change"`
	AtOnce   int    `json:"at_once"`
	OneByOne int    `json:"one_by_one"`
	// EvenSplit as in Tolerance, after the change.
	EvenSplit bool `json:"even_split"`
	// SegmentSplitSurvives: after the change some side keeps Primary
	// whichever single segment is cut off (only with segments).
	SegmentSplitSurvives *bool `json:"segment_split_survives,omitempty"`
}
