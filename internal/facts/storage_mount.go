package facts

import (
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// readMounts reads /proc/PID/mountinfo (parsed by procfs) into Mounts, with
// the kernel's octal escapes (\040 for a space) undone.
func readMounts(h *host.Host, pid int) ([]Mount, error) {
	infos, err := h.MountInfo(pid)
	if err != nil {
		return nil, err
	}
	file := procFile(pid, "mountinfo")
	out := make([]Mount, 0, len(infos))
	for _, mi := range infos {
		out = append(out, Mount{
			ID: mi.MountID, Parent: mi.ParentID, MajorMinor: mi.MajorMinorVer,
			Root: textio.UnescapeOctal(mi.Root), MountPoint: textio.UnescapeOctal(mi.MountPoint),
			FSType: mi.FSType, Source: textio.UnescapeOctal(mi.Source),
			Options: mi.Options, SuperOptions: mi.SuperOptions, File: file,
		})
	}
	return out, nil
}

// FindMount returns the mount that holds path p (absolute, symlinks
// resolved): the one with the longest mount point that is a prefix of p
// by whole path components. Of several mounts on the same point the last
// one listed is on top (mountinfo lists mounts in the order they were
// made, and a later mount hides an earlier one).
func FindMount(mounts []Mount, p string) *Mount {
	p = cleanPath(p)
	var best *Mount
	for i := range mounts {
		m := &mounts[i]
		if !underPath(p, m.MountPoint) {
			continue
		}
		if best == nil || len(m.MountPoint) >= len(best.MountPoint) {
			best = m
		}
	}
	return best
}

// underPath reports whether p is dir or below it.
func underPath(p, dir string) bool {
	dir = cleanPath(dir)
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func cleanPath(p string) string { return path.Clean("/" + p) }

// fsPath is where p lives inside the mounted filesystem: for a bind mount
// of /srv/pg on /var/lib/postgresql, /var/lib/postgresql/15 is /srv/pg/15.
func fsPath(m *Mount, p string) string {
	rest := strings.TrimPrefix(cleanPath(p), cleanPath(m.MountPoint))
	return cleanPath(m.Root + "/" + rest)
}
