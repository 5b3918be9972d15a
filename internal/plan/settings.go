package plan

import (
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// settings puts each planned database setting in its server's effective
// settings, as the server reports it once it has read dbhost's snippet
// (reloaded, or restarted where the setting needs it). A setting the
// server's command line gives cannot be changed by a file: the model keeps
// it and says so.
func (m *model) settings() {
	type key struct{ inst, key string }
	first := map[key]fix.Item{}
	for _, it := range m.items {
		if it.Fix.Restart != nil {
			m.restartFor(it)
		}
		for _, c := range it.Fix.Config {
			in := m.instance(c.Instance)
			if in == nil {
				m.note("%s: %s = %s on %s not modelled: no such server", tag(it), c.Key, c.Value, c.Instance)
				continue
			}
			k := key{c.Instance, engine.NormalizeName(c.Key)}
			if prev, ok := first[k]; ok {
				if v := configValue(prev, c); v != c.Value {
					m.note("%s on %s: two values, %s (%s) and %s (%s): modelled %s, the first, as the snippet keeps it", c.Key, c.Instance, v, tag(prev), c.Value, tag(it), v)
				}
				continue
			}
			first[k] = it
			if by, ok := cmdlineSetting(in, c.Key); ok {
				m.note("%s: %s = %s on %s not modelled: %s sets it, which no configuration file overrides", tag(it), c.Key, c.Value, c.Instance, by)
				continue
			}
			snippet := snippetPath(in)
			if by, ok := laterSetting(in, c.Key, snippet); ok {
				m.note("%s: %s on %s is also set by %s, read after %s: modelled as removed there, as the fix says", tag(it), c.Key, c.Instance, by, snippet)
			}
			setSetting(in, c.Key, c.Value, settingSource(in, snippet))
			if c.Restart {
				m.markRestart(in, c.Key)
			}
		}
	}
}

// configValue is the value an earlier item gave the same setting.
func configValue(it fix.Item, c fix.ConfigChange) string {
	for _, p := range it.Fix.Config {
		if p.Instance == c.Instance && engine.NormalizeName(p.Key) == engine.NormalizeName(c.Key) {
			return p.Value
		}
	}
	return c.Value
}

// restartFor takes the server a fix's restart is about as restarted: the
// finding's subject, or the servers of the unit it names.
func (m *model) restartFor(it fix.Item) {
	if in := m.instance(it.Subject); in != nil {
		m.markRestart(in, "the fix of "+it.ID+" restarts it")
		return
	}
	ins := m.unitServers(it.Fix.Restart.Unit)
	for _, in := range ins {
		m.markRestart(in, "the fix of "+it.ID+" restarts it")
	}
	if len(ins) == 0 {
		m.note("%s: restart not modelled: no server is named %s or runs under unit %q", tag(it), it.Subject, it.Fix.Restart.Unit)
	}
}

// snippetPath is the file dbhost's settings for the server go to.
func snippetPath(in *facts.Instance) string {
	p := in.Profile()
	path, _ := p.ConfigSnippet(engine.Snippet{Instance: in.Name(), Dir: in.IncludeDir, File: p.MainConfig(in.Instance), Name: fix.ConfigName})
	return path
}

// settingSource is where the server would say the planned value came from:
// the snippet, read live or from the files as the observation was.
func settingSource(in *facts.Instance, snippet string) string {
	if in.SettingsSource == "live" {
		return "live:" + snippet
	}
	return "file:" + snippet
}

// cmdlineSetting says whether the server's command line sets the setting
// (a file cannot change it then).
func cmdlineSetting(in *facts.Instance, key string) (string, bool) {
	k := engine.NormalizeName(key)
	if s, ok := in.Settings[k]; ok && (s.Source == "cmdline" || s.Source == "live:cmdline") {
		return "the server's command line", true
	}
	if in.MySQL != nil {
		if s, ok := in.MySQL.Configured[k]; ok && s.Source == "cmdline" {
			return "the server's command line", true
		}
	}
	return "", false
}

// laterSetting says which file read after the snippet sets the setting
// (PostgreSQL: a later file of the include directory, postgresql.auto.conf,
// a file read after the directory).
func laterSetting(in *facts.Instance, key, snippet string) (string, bool) {
	if in.Engine != engine.Postgres || snippet == "" {
		return "", false
	}
	return postgres.SnippetOverridden(in.Instance, key, snippet)
}

// setSetting records a planned value as the server's effective one. The
// file value kept for a setting the server reported differently is stale
// once the server has read the planned one.
func setSetting(in *facts.Instance, key, value, source string) {
	k := engine.NormalizeName(key)
	if in.Settings == nil {
		in.Settings = map[string]engine.Setting{}
	}
	in.Settings[k] = engine.Setting{Value: value, Source: source}
	delete(in.Configured, k)
	if in.MySQL != nil && in.MySQL.Configured != nil {
		// Option files as read: the snippet now gives it.
		in.MySQL.Configured[k] = engine.Setting{Value: value, Source: "file:" + strings.TrimPrefix(strings.TrimPrefix(source, "live:"), "file:")}
	}
}
