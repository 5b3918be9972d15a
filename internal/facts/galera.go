package facts

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

func init() { registerInstance("galera", gatherSSTAuth) }

// SecretSource is where a server's configuration keeps a secret, and who
// can read it there: the option file's mode and owner (the secret itself
// is never recorded).
type SecretSource struct {
	// Key is the option (wsrep_sst_auth); Source is where it is set:
	// "file:PATH:LINE" or "cmdline".
	Key    string `json:"key"`
	Source string `json:"source"`
	// File is the option file; Mode, UID and GID its stat (the file the
	// path leads to: a link's target is what a reader opens).
	File string `json:"file,omitempty"`
	Mode string `json:"mode,omitempty"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	// Perm is the permission bits (0640); Err says why the file could not
	// be examined.
	Perm uint32 `json:"perm"`
	Err  string `json:"error,omitempty"`
}

// WorldReadable reports whether every local user may read the secret.
func (s *SecretSource) WorldReadable() bool {
	return s != nil && s.Err == "" && s.File != "" && s.Perm&0o004 != 0
}

// gatherSSTAuth records which option file sets wsrep_sst_auth on a Galera
// node, with its mode and owner: the SST credentials must not be readable
// by every user. The stat is a probe, so a snapshot carries it.
func gatherSSTAuth(_ context.Context, h *host.Host, _ *Facts, in *Instance) {
	if in.MySQL == nil || !in.MySQL.Galera {
		return
	}
	s, ok := in.MySQL.Configured["wsrep_sst_auth"]
	if !ok || s.Source == "default" || emptySecret(s.Value) {
		return
	}
	in.SSTAuth = SecretSourceOf(h, "wsrep_sst_auth", s.Source)
}

// emptySecret: an option set to nothing (wsrep_sst_auth="") holds none.
func emptySecret(v string) bool {
	v = strings.Trim(strings.TrimSpace(v), `"'`)
	return v == ""
}

// SecretSourceOf examines where a setting's Source says it was set.
func SecretSourceOf(h *host.Host, key, source string) *SecretSource {
	s := &SecretSource{Key: key, Source: source}
	rest, ok := strings.CutPrefix(source, "file:")
	if !ok {
		return s
	}
	// file:PATH:LINE; a path may hold colons, the line number may not.
	if i := strings.LastIndex(rest, ":"); i > 0 {
		if _, err := strconv.Atoi(rest[i+1:]); err == nil {
			rest = rest[:i]
		}
	}
	s.File = rest
	fi, err := h.Stat(rest)
	if err != nil {
		s.Err = host.Explain(err)
		return s
	}
	s.Mode = fmt.Sprintf("%04o", uint32(fi.Mode.Perm()))
	s.Perm, s.UID, s.GID = uint32(fi.Mode.Perm()), fi.UID, fi.GID
	return s
}
