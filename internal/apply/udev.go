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
	"github.com/dbhost/dbhost/internal/textio"
)

// After writing a udev rules file, apply asks a running udevd to reload
// its rules and replays a "change" event for each block device the rules
// name, so that udev itself applies them, as at boot. The queue values
// have already been written directly under /sys and read back (they are
// values of the plan), so the trigger changes nothing when all is well;
// without udevd (a container, a VM without systemd) it is skipped and said
// so. udevadm is run by absolute path, without a shell, and only when root
// alone can change it and the directories above it.
var (
	udevControl  = "/run/udev/control" // udevd's control socket: it runs
	udevadmPaths = []string{"/usr/bin/udevadm", "/bin/udevadm", "/usr/sbin/udevadm", "/sbin/udevadm"}
	udevTimeout  = 30 * time.Second
)

const udevRulesDir = "/etc/udev/rules.d/"

var udevKernelRe = textio.LazyRegexp(`KERNEL=="([A-Za-z0-9][A-Za-z0-9_.:-]*)"`)

// udevadm returns a trusted udevadm when udevd runs, or why not.
func udevadm() (string, string) {
	st, err := os.Stat(udevControl)
	if err != nil || st.Mode().Type() != os.ModeSocket {
		return "", fmt.Sprintf("udevd is not running here (no %s)", udevControl)
	}
	h, err := host.Open("/")
	if err != nil {
		return "", err.Error()
	}
	defer h.Close()
	why := "no udevadm in " + strings.Join(udevadmPaths, ", ")
	for _, p := range udevadmPaths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := h.CheckTrusted(p); err != nil {
			why = err.Error()
			continue
		}
		return p, ""
	}
	return "", why
}

func isUdevRule(p string) bool { return strings.HasPrefix(p, udevRulesDir) }

// udevPlanNotes says, in the plan, that the written rules will not be
// triggered when udevd is not running.
func udevPlanNotes(p *Plan) []string {
	if p.Root != "/" {
		return nil
	}
	var out []string
	for _, f := range p.Files {
		if !isUdevRule(f.Path) || f.Unchanged || f.Refused != "" {
			continue
		}
		if _, why := udevadm(); why != "" {
			out = append(out, fmt.Sprintf("%s: %s: the rule is not reloaded nor triggered; apply writes its values directly under /sys, and udev applies the rule from the next boot", f.Path, why))
		}
	}
	return out
}

// udevTrigger reloads udevd's rules and triggers the devices named by the
// rules files the change set wrote, and says what it did.
func udevTrigger(cs *ChangeSet) []string {
	if cs.Root != "/" {
		return nil
	}
	devs := map[string]bool{}
	wrote := false
	for _, f := range cs.Files {
		if !isUdevRule(f.Path) {
			continue
		}
		wrote = true
		for _, m := range udevKernelRe.FindAllStringSubmatch(f.Content, -1) {
			devs[m[1]] = true
		}
	}
	if !wrote {
		return nil
	}
	bin, why := udevadm()
	if bin == "" {
		return []string{"udev: " + why + ": rules not reloaded nor triggered; the values were written directly under /sys"}
	}
	if err := runUdevadm(bin, "control", "--reload"); err != nil {
		return []string{"udev: " + err.Error() + "; the values were written directly under /sys"}
	}
	names := make([]string, 0, len(devs))
	for d := range devs {
		names = append(names, d)
	}
	sort.Strings(names)
	notes := []string{"udev: rules reloaded (udevadm control --reload)"}
	for _, d := range names {
		if _, err := os.Lstat(filepath.Join("/sys/class/block", d)); err != nil {
			continue // a device of an earlier apply that is gone
		}
		args := []string{"trigger", "--action=change", "--subsystem-match=block", "--sysname-match=" + d, "--settle"}
		if err := runUdevadm(bin, args...); err != nil {
			notes = append(notes, "udev: "+err.Error()+"; the values were written directly under /sys")
			continue
		}
		notes = append(notes, "udev: triggered "+d+" (udevadm "+strings.Join(args, " ")+")")
	}
	return notes
}

// udevReload makes a running udevd forget the rules a rollback removed or
// put back; the values themselves were put back from the journal.
func udevReload(cs *ChangeSet) {
	if cs.Root != "/" {
		return
	}
	for _, f := range cs.Files {
		if isUdevRule(f.Path) {
			if bin, _ := udevadm(); bin != "" {
				runUdevadm(bin, "control", "--reload")
			}
			return
		}
	}
}

func runUdevadm(bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), udevTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return fmt.Errorf("udevadm %s failed: %v %s", strings.Join(args, " "), err, msg)
	}
	return nil
}
