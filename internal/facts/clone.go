package facts

import "github.com/dbhost/dbhost/internal/deepcopy"

// Clone returns a deep copy of the facts: every map, slice and pointer is
// copied (instances with their engine facts too), so that a model of the
// host after a plan can change the copy while the observed facts stay as
// observed. The sysctl tracker (TrackSysctls) is not carried over.
func (f *Facts) Clone() *Facts {
	if f == nil {
		return nil
	}
	g := deepcopy.Of(f)
	g.sysctlSeen = nil
	return g
}
