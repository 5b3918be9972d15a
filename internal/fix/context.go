package fix

import (
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
)

// ContextFrom derives the rendering context from gathered facts.
func ContextFrom(f *facts.Facts) Context {
	c := Context{
		TunedProfile:       f.Tuned.Active,
		TunedReapplySysctl: f.Tuned.ReapplySysctl,
		Container:          f.System.Container != "",
		Instances:          map[string]InstanceInfo{},
	}
	for _, in := range f.Instances {
		info := InstanceInfo{Engine: string(in.Engine), ConfDir: in.IncludeDir}
		if len(in.ConfigFiles) > 0 {
			info.ConfFile = in.ConfigFiles[0]
			for _, cf := range in.ConfigFiles {
				if strings.HasSuffix(cf, "postgresql.conf") || strings.HasSuffix(cf, "mongod.conf") || strings.HasSuffix(cf, "redis.conf") {
					info.ConfFile = cf
					break
				}
			}
		}
		c.Instances[in.Name()] = info
	}
	return c
}
