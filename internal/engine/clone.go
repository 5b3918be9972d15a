package engine

import "github.com/dbhost/dbhost/internal/deepcopy"

// Clone returns a deep copy of the instance: its settings, paths, listeners
// and engine facts are copied, so that changing the copy (a planned
// setting) never changes the instance observed. The profile and the claim
// are shared: the one is stateless, the other is only read.
func (i *Instance) Clone() *Instance {
	if i == nil {
		return nil
	}
	return deepcopy.Of(i)
}
