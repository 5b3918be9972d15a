package fix

import (
	"github.com/dbhost/dbhost/internal/facts"
)

// ContextFrom derives the rendering context from gathered facts.
func ContextFrom(f *facts.Facts) Context {
	c := Context{
		TunedProfile:       f.Tuned.Active,
		TunedInclude:       tunedInclude(f.Tuned),
		TunedReapplySysctl: f.Tuned.ReapplySysctl,
		Container:          f.System.Container != "",
		Systemd:            f.System.Systemd,
		Fstab:              f.Storage.Fstab,
		Instances:          map[string]InstanceInfo{},
	}
	for _, in := range f.Instances {
		info := InstanceInfo{Engine: string(in.Engine), ConfDir: in.IncludeDir, ConfFile: in.Profile().MainConfig(in.Instance),
			NoConfig: len(in.ConfigFiles) == 0 && in.IncludeDir == ""}
		if in.Unit != nil {
			info.Unit = in.Unit.Name
		}
		c.Instances[in.Name()] = info
	}
	return c
}

// tunedInclude names the profile dbhost's child profile builds on: the
// active one, unless dbhost's own profile is active already (then the one it
// includes, so that re-rendering never makes the profile include itself).
func tunedInclude(t facts.Tuned) string {
	if t.Active != "dbhost" {
		return t.Active
	}
	for i := len(t.Chain) - 1; i >= 0; i-- {
		if t.Chain[i] != "dbhost" {
			return t.Chain[i]
		}
	}
	return ""
}
