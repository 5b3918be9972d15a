package apply

import (
	"path"
	"strings"
)

// dbhostHeader starts every file dbhost renders.
const dbhostHeader = "# Written by dbhost."

// keep carries over, from the file an earlier apply wrote at p, the
// settings the new rendering does not make: an apply for some findings
// must not drop what an earlier apply persisted for others (those now
// pass, so they are not rendered again). The renderer writes one
// blank-line-separated block per setting ("# findings" then the line);
// a block is kept when its key is not among the new file's. Files not
// written by dbhost, and unit drop-ins (settings grouped by section), are
// replaced whole; the plan's diff shows what goes.
func keep(p, old, rendered string) string {
	key := keyFunc(p)
	if key == nil || !strings.HasPrefix(old, dbhostHeader) || !strings.HasPrefix(rendered, dbhostHeader) {
		return rendered
	}
	have := map[string]bool{}
	for _, b := range blocks(rendered)[1:] {
		have[key(b)] = true
	}
	out := rendered
	for _, b := range blocks(old)[1:] {
		if k := key(b); k != "" && !have[k] {
			have[k] = true
			out = strings.TrimSuffix(out, "\n") + "\n\n" + b + "\n"
		}
	}
	return out
}

func blocks(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n\n")
}

// setting is a block's last line that is not a comment.
func setting(b string) string {
	lines := strings.Split(b, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// keyFunc names what a setting of the file at p sets, or nil when blocks
// of that file are not merged.
func keyFunc(p string) func(block string) string {
	switch path.Dir(p) {
	case "/etc/sysctl.d":
		return func(b string) string {
			k, _, ok := strings.Cut(setting(b), "=")
			if !ok {
				return ""
			}
			return strings.TrimSpace(k)
		}
	case "/etc/security/limits.d":
		return func(b string) string {
			f := strings.Fields(setting(b))
			if len(f) < 4 {
				return ""
			}
			return strings.Join(f[:3], " ")
		}
	case "/etc/tmpfiles.d":
		return func(b string) string {
			f := strings.Fields(setting(b))
			if len(f) < 2 {
				return ""
			}
			return f[0] + " " + f[1]
		}
	case "/etc/udev/rules.d":
		return func(b string) string {
			s := setting(b)
			if i := strings.Index(s, `KERNEL=="`); i >= 0 {
				if k, _, ok := strings.Cut(s[i:], ", "); ok {
					return k
				}
			}
			return ""
		}
	}
	return nil
}
