package apply

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/host"
)

// restartLimit bounds a server's restart: a large shared_buffers or buffer
// pool takes a checkpoint and a flush to stop.
var restartLimit = 5 * time.Minute

// systemctlPaths are where systemctl is run from (by absolute path, only
// when root alone can change it) unless Options.Systemctl says otherwise.
var systemctlPaths = []string{"/usr/bin/systemctl", "/bin/systemctl"}

// restarts says, per server whose changed settings wait for a restart,
// what happened: listed only, or (allowed) restarted through the systemd
// unit it runs under and its settings read back. A server that runs under
// no unit is never restarted: dbhost does not know how it was started.
// systemctl lists where systemctl is looked for (nil: systemctlPaths).
func restarts(settings []SettingPlan, allowed bool, systemctl []string) []string {
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
			if err := restart(r, keys[r], systemctl); err != nil {
				out = append(out, what+": "+err.Error())
				continue
			}
			out = append(out, what+": restarted through "+r.Unit+"; it runs with the new values")
		}
	}
	return out
}

// findSystemctl returns the first trusted systemctl of paths (nil:
// systemctlPaths).
func findSystemctl(paths []string) (string, error) {
	if len(paths) == 0 {
		paths = systemctlPaths
	}
	h, err := host.Open("/")
	if err != nil {
		return "", err
	}
	defer h.Close()
	err = fmt.Errorf("no systemctl in %s", strings.Join(paths, ", "))
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue // run by absolute path only, never looked up in PATH
		}
		if _, e := os.Lstat(p); e != nil {
			continue
		}
		if err = h.CheckTrusted(p); err == nil {
			return p, nil
		}
	}
	return "", err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// restart runs systemctl restart UNIT (a root-owned binary, no shell) and
// waits until the server answers with the saved values in effect.
func restart(r ServerRef, keys []SettingPlan, systemctl []string) error {
	bin, err := findSystemctl(systemctl)
	if err != nil {
		return fmt.Errorf("not restarted: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), restartLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "restart", r.Unit)
	cmd.Env, cmd.Dir = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}, "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("restart failed: %v %s (dbhost fix --rollback puts the settings back; then start the server)", err, firstLine(string(out)))
	}
	co := connection()
	for {
		err := func() error {
			s, err := dialServer(ctx, r, co)
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
		}()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restarted, but: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
