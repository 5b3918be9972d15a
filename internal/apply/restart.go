package apply

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/change"
)

// restarts says, per server whose changed settings wait for a restart,
// what happened: listed only, or (allowed) restarted through the systemd
// unit it runs under and its settings read back. A server that runs under
// no unit is never restarted: dbhost does not know how it was started.
func restarts(settings []SettingPlan, allowed bool, c *change.Changer) []string {
	keys := map[ServerRef][]SettingPlan{}
	for _, s := range settings {
		if s.Restart && (!s.Unchanged || !s.SavedByServer) {
			keys[s.Server] = append(keys[s.Server], s)
		}
	}
	refs := make([]ServerRef, 0, len(keys))
	for r := range keys {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(a, b int) bool { return refs[a].Name < refs[b].Name })
	var out []string
	for _, r := range refs {
		var names []string
		for _, s := range keys[r] {
			names = append(names, s.Key)
		}
		what := fmt.Sprintf("%s needs a restart for %s", r.Name, strings.Join(names, ", "))
		switch {
		case !allowed:
			how := "restart it yourself"
			if r.Unit != "" {
				how = "systemctl restart " + r.Unit
			}
			out = append(out, what+": not restarted (give --allow-restart, or "+how+")")
		case r.Unit == "":
			out = append(out, what+": not restarted: it runs under no systemd unit, so dbhost does not know how it was started; restart it yourself")
		default:
			unit := change.Unit{Name: r.Unit, Allowed: true, Ready: inEffect(c.Config(), r, keys[r])}
			if err := c.Restart(context.Background(), unit); err != nil {
				out = append(out, what+": "+restartFailure(err))
				continue
			}
			out = append(out, what+": restarted through "+r.Unit+"; it runs with the new values")
		}
	}
	return out
}

// restartFailure says how to go on after a failed restart.
func restartFailure(err error) string {
	s := err.Error()
	if strings.HasPrefix(s, "restart failed") {
		s += " (dbhost fix --rollback puts the settings back; then start the server)"
	}
	return s
}

// inEffect reports whether the restarted server r runs with the saved
// values of keys.
func inEffect(cfg change.Config, r ServerRef, keys []SettingPlan) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		s, err := cfg.Dial(ctx, r)
		if err != nil {
			return err
		}
		defer s.Close()
		for _, k := range keys {
			if k.OptionOnly {
				continue
			}
			in, pending, err := s.Applied(ctx, k.Key, k.New, k.Restart)
			if err != nil {
				return err
			}
			if !in || pending {
				return fmt.Errorf("%s is not in effect after the restart", k.Key)
			}
		}
		return nil
	}
}
