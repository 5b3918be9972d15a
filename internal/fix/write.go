package fix

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/safefile"
)

// stateFile lists what the last WriteTree wrote, so a rerun can remove files
// whose findings are gone and the tree always equals the current fixes.
const stateFile = ".dbhost-fix-files"

// Notes collects the manual steps and host-only remarks of fixes, for the
// README written next to the files.
func Notes(items []Item) []string {
	var out []string
	seen := map[string]bool{}
	for _, it := range items {
		var n string
		switch {
		case it.Fix.Manual != "":
			n = fmt.Sprintf("%s: %s", it.tag(), it.Fix.Manual)
		case len(it.Fix.Config) > 0 && len(it.Fix.Sysctl) == 0 && len(it.Fix.Udev) == 0:
			continue
		}
		if it.Fix.HostOnly {
			n = strings.TrimSpace(n + " (apply on the container's host)")
			if n == "(apply on the container's host)" {
				n = it.tag() + ": apply on the container's host"
			}
		}
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// WriteTree writes files under dir, mirroring their absolute paths
// (dir/etc/sysctl.d/60-dbhost.conf), plus README.txt. Each file is written
// atomically with its mode; files of an earlier run that are no longer
// produced are removed. It returns the paths written, relative to dir.
func WriteTree(dir string, files []File, notes []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range files {
		rel := strings.TrimPrefix(filepath.Clean("/"+f.Path), "/")
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return written, err
		}
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		if err := safefile.WriteBytes(dst, mode, []byte(f.Content)); err != nil {
			return written, err
		}
		written = append(written, rel)
	}
	readme := readmeText(files, notes)
	if err := safefile.WriteBytes(filepath.Join(dir, "README.txt"), 0o644, []byte(readme)); err != nil {
		return written, err
	}
	written = append(written, "README.txt")
	// Remove what an earlier run wrote and this one did not.
	now := map[string]bool{}
	for _, w := range written {
		now[w] = true
	}
	if old, err := os.ReadFile(filepath.Join(dir, stateFile)); err == nil {
		for _, p := range strings.Split(strings.TrimSpace(string(old)), "\n") {
			if p == "" || now[p] || strings.Contains(p, "..") {
				continue
			}
			os.Remove(filepath.Join(dir, p))
		}
	}
	sort.Strings(written)
	err := safefile.WriteBytes(filepath.Join(dir, stateFile), 0o644, []byte(strings.Join(written, "\n")+"\n"))
	return written, err
}

func readmeText(files []File, notes []string) string {
	var b strings.Builder
	b.WriteString("Files rendered by `dbhost fix`. Nothing on the host was changed.\n")
	b.WriteString("Each path below mirrors where the file belongs on the host; every\n")
	b.WriteString("setting inside names the finding it fixes. Review, then install.\n\n")
	if len(files) == 0 {
		b.WriteString("No finding needs a persistent file.\n")
	}
	for _, f := range files {
		fmt.Fprintf(&b, "  %s\n", f.Path)
	}
	if len(notes) > 0 {
		b.WriteString("\nSteps no file can do:\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	return b.String()
}
