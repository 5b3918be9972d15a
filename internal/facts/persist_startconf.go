package facts

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

func init() { registerInstance("startconf", gatherStartConf) }

// gatherStartConf reads the start.conf beside a packaged cluster's
// configuration (Debian's postgresql-common keeps /etc/postgresql/V/NAME/
// start.conf; its systemd generator and init script start the cluster at
// boot only when it says "auto"). The file must be root's or the server's
// own account's: anyone else could claim the cluster starts.
func gatherStartConf(_ context.Context, h *host.Host, _ *Facts, in *Instance) {
	for _, c := range in.ConfigFiles {
		dir := path.Dir(c)
		if !strings.HasPrefix(dir, "/etc/") {
			continue
		}
		file := dir + "/start.conf"
		fi, err := h.Lstat(file)
		if err != nil {
			continue
		}
		if !fi.Mode.IsRegular() || (fi.UID != 0 && fi.UID != in.UID) || fi.Mode&0o002 != 0 {
			in.StartConf = &Persisted{Key: "start.conf", File: file, Note: fmt.Sprintf("not trusted: owned by uid %d (mode %v)", fi.UID, fi.Mode)}
			return
		}
		b, err := h.ReadConfig(file)
		if err != nil {
			in.StartConf = &Persisted{Key: "start.conf", File: file, Note: host.Explain(err)}
			return
		}
		in.StartConf = ParseStartConf(file, b)
		return
	}
}

// ParseStartConf returns the first word that is not a comment: auto,
// manual or disabled; anything else is kept with a note.
func ParseStartConf(file string, b []byte) *Persisted {
	for i, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSpace(ln)
		if ln == "" || ln[0] == '#' {
			continue
		}
		p := &Persisted{Key: "start.conf", Value: ln, File: file, Line: i + 1}
		switch ln {
		case "auto", "manual", "disabled":
		default:
			p.Note = "not one of auto, manual, disabled"
		}
		return p
	}
	return &Persisted{Key: "start.conf", File: file, Note: "no setting (empty file)"}
}
