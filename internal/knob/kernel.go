package knob

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
)

// accessW is access(2)'s W_OK: may the caller write the file.
const accessW = 2

const (
	thpDir  = "/sys/kernel/mm/transparent_hugepage"
	hugeDir = host.HugePagesRoot
)

// maxHugeShare bounds the memory all explicit huge page pools may take
// together: pages in a pool are lost to everything else, and a pool sized
// near the whole memory leaves the host to the OOM killer.
const maxHugeShare = 0.75

// notSettings are kernel files that trigger an action when written: an
// experiment arm sets state, it does not fire events.
var notSettings = map[string]string{
	"/proc/sys/vm/drop_caches":    "drops the page cache once; it is an action, not a setting",
	"/proc/sys/vm/compact_memory": "compacts memory once; it is an action, not a setting",
}

// hugeSizeDir is the sysfs directory of a huge page size given by its
// knob name ("hugepages.1G").
func hugeSizeDir(name string) string {
	kb, _ := parseHugeSize(strings.TrimPrefix(name, "hugepages."))
	return host.HugePagesDir(kb)
}

// kernelFiles locates the files of a kernel knob, checked to stay under
// /proc/sys and /sys. devs names the device of each file for disk.*.
func (a *Applier) kernelFiles(name string, cl class) (files, devs []string, err error) {
	switch cl {
	case sysctl:
		files = []string{host.SysctlPath(name)}
	case thp:
		files = []string{thpDir + "/" + strings.TrimPrefix(name, "thp.")}
	case hugepages:
		dir := hugeSizeDir(name)
		if !a.h.Exists(dir) {
			return nil, nil, fmt.Errorf("%s: this kernel offers no %s huge pages (%s)", name, strings.TrimPrefix(name, "hugepages."), a.hugeSizes())
		}
		files = []string{dir + "/nr_hugepages"}
	case disk:
		devs, err = a.dataDevices()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		attr := strings.TrimPrefix(name, "disk.")
		for _, d := range devs {
			files = append(files, "/sys/block/"+d+"/queue/"+attr)
		}
	default:
		return nil, nil, fmt.Errorf("%s: not a kernel knob", name)
	}
	for _, f := range files {
		clean := path.Clean(f)
		if clean != f || !strings.HasPrefix(clean, "/proc/sys/") && !strings.HasPrefix(clean, "/sys/") {
			return nil, nil, fmt.Errorf("%s: refusing %s: not a kernel knob file", name, f)
		}
	}
	return files, devs, nil
}

// hugeSizes lists the huge page sizes the kernel offers, for messages.
func (a *Applier) hugeSizes() string {
	names, err := a.h.ReadDir(hugeDir)
	if err != nil {
		return "no huge page sizes: " + host.Explain(err)
	}
	var out []string
	for _, n := range names {
		if kb, ok := host.HugePageSizeKB(n); ok {
			out = append(out, "hugepages."+hugeSizeName(kb))
		}
	}
	if len(out) == 0 {
		return "it offers none"
	}
	return "it offers " + strings.Join(out, ", ")
}

// planKernel checks a kernel knob and its value. A disk.* value may name
// each device ("vda=mq-deadline loop0=none", as Current reads devices that
// differ).
func (a *Applier) planKernel(it *item) error {
	files, devs, err := a.kernelFiles(it.Name, it.class)
	if err != nil {
		return err
	}
	for _, f := range files {
		if why, bad := notSettings[f]; bad {
			return fmt.Errorf("%s: %s", it.Name, why)
		}
		fi, err := a.h.Stat(f)
		switch {
		case host.IsNotExist(err) && it.class == sysctl:
			return fmt.Errorf("%s: no such sysctl on this kernel (%s)", it.Name, f)
		case err != nil:
			return fmt.Errorf("%s: %s", it.Name, host.Explain(err))
		case fi.IsDir:
			return fmt.Errorf("%s: %s is a directory, not a setting", it.Name, f)
		case fi.Mode.Perm()&0o222 == 0:
			return fmt.Errorf("%s: %s is read-only", it.Name, f)
		case fi.Mode.Perm()&0o444 == 0:
			return fmt.Errorf("%s: %s cannot be read back (write-only trigger, not a setting)", it.Name, f)
		}
		if err := syscall.Access(f, accessW); err != nil {
			return fmt.Errorf("%s: cannot write %s: %s", it.Name, f, host.Explain(err))
		}
	}
	values, err := perDevice(it, devs)
	if err != nil {
		return err
	}
	for i, f := range files {
		v := values[i]
		switch {
		case it.class == hugepages:
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not a page count", it.Name, v)
			}
			v = strconv.FormatUint(n, 10)
		case it.class == thp || it.Name == "disk.scheduler":
			content, err := a.h.ReadString(f)
			if err != nil {
				return fmt.Errorf("%s: %s", it.Name, host.Explain(err))
			}
			choices := selectorChoices(content)
			if it.class == disk && len(choices) < 2 && len(files) > 1 {
				continue // a bio-based dm device: no scheduler to choose
			}
			if !contains(choices, v) {
				where := f
				if devs != nil {
					where = devs[i]
				}
				return fmt.Errorf("%s: %s offers %s, not %q", it.Name, where, strings.Join(choices, ", "), v)
			}
		default:
			v = strings.Join(strings.Fields(v), " ")
		}
		it.files = append(it.files, f)
		it.wants = append(it.wants, v)
		if devs != nil {
			it.devs = append(it.devs, devs[i])
		}
	}
	if len(it.files) == 0 {
		return fmt.Errorf("%s: no device under %s has a choice of scheduler", it.Name, a.t.DataDir)
	}
	return nil
}

// perDevice returns the value for each file of an item: the same value
// for all, or, for a disk.* value of "dev=value" pairs, each device's own
// (every device under the data directory must be named).
func perDevice(it *item, devs []string) ([]string, error) {
	out := make([]string, max(len(devs), 1))
	if it.class != disk || !strings.Contains(it.Value, "=") {
		for i := range out {
			out[i] = it.Value
		}
		return out, nil
	}
	given := map[string]string{}
	for _, f := range strings.Fields(it.Value) {
		d, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return nil, fmt.Errorf("%s: %q: not device=value", it.Name, f)
		}
		if !contains(devs, d) {
			return nil, fmt.Errorf("%s: %s is not a device under the data directory (%s)", it.Name, d, strings.Join(devs, ", "))
		}
		given[d] = v
	}
	for i, d := range devs {
		v, ok := given[d]
		if !ok {
			return nil, fmt.Errorf("%s: no value for device %s", it.Name, d)
		}
		out[i] = v
	}
	return out, nil
}

// selectorChoices lists the words of a sysfs selector ("always [madvise]
// never" → always, madvise, never).
func selectorChoices(s string) []string {
	f := strings.Fields(s)
	for i := range f {
		f[i] = strings.Trim(f[i], "[]")
	}
	return f
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkHugeTotal refuses huge page pools that would take more than
// maxHugeShare of the memory together (sizes not in the set count at their
// present size).
func (a *Applier) checkHugeTotal(items []*item) error {
	want := map[string]uint64{}
	for _, it := range items {
		if it.class == hugepages && len(it.wants) == 1 {
			want[hugeSizeDir(it.Name)], _ = strconv.ParseUint(it.wants[0], 10, 64)
		}
	}
	if len(want) == 0 {
		return nil
	}
	mi, err := a.h.Meminfo()
	if err != nil || mi.MemTotal == nil {
		return fmt.Errorf("huge pages: cannot read the memory size to bound the pools: %s", host.Explain(err))
	}
	names, _ := a.h.ReadDir(hugeDir)
	var totalKB float64
	for _, n := range names {
		kb, ok := host.HugePageSizeKB(n)
		if !ok {
			continue
		}
		dir := hugeDir + "/" + n
		count, set := want[dir]
		if !set {
			r := a.h.Read(dir + "/nr_hugepages")
			c, _ := r.Int()
			count = uint64(max(c, 0))
		}
		totalKB += float64(count) * float64(kb)
	}
	if limit := maxHugeShare * float64(*mi.MemTotal); totalKB > limit {
		return fmt.Errorf("huge pages: the pools would take %.1f GiB of %.1f GiB memory (more than %.0f%%): refused to keep the host alive",
			totalKB/(1<<20), float64(*mi.MemTotal)/(1<<20), maxHugeShare*100)
	}
	return nil
}

// kernelOrder returns the kernel items in the order they are written: huge
// page pools that shrink first, so that the memory they free can back the
// pools that grow.
func (a *Applier) kernelOrder(items []*item) []*item {
	var shrink, rest []*item
	for _, it := range items {
		switch it.class {
		case pg, mysql:
			continue
		case hugepages:
			cur, _ := a.h.Read(it.files[0]).Int()
			if n, _ := strconv.ParseInt(it.wants[0], 10, 64); n < cur {
				shrink = append(shrink, it)
				continue
			}
		}
		rest = append(rest, it)
	}
	return append(shrink, rest...)
}

// reread reads the kernel values of items again through the host.
func (a *Applier) reread(items []*item) error {
	for _, it := range items {
		for i, f := range it.files {
			content, err := a.h.ReadString(f)
			if err != nil {
				return fmt.Errorf("%s: reading back %s: %s", it.Name, f, host.Explain(err))
			}
			it.got[i] = journal.Current(content)
		}
	}
	return nil
}

// kernelResult compares what every file of an item read back after the
// write (change.Changer.Kernel reads it through the host) with the value
// wanted; the value returned is written as Current writes it.
func kernelResult(it *item) (string, error) {
	var got []string
	for i, f := range it.files {
		v, want := it.got[i], it.wants[i]
		if !sameKernelValue(want, v) {
			wn, _ := strconv.Atoi(want)
			if gn, _ := strconv.Atoi(v); it.class == hugepages && gn > wn {
				return "", fmt.Errorf("%s: wanted %s pages, the pool still holds %s: pages in use (mapped by a process, a database's shared memory) leave only when it lets go of them",
					it.Name, want, v)
			}
			if it.class == hugepages {
				return "", fmt.Errorf("%s: wanted %s pages, the kernel allocated %s (not enough free contiguous memory; "+
					"pages of this size are best reserved at boot: hugepagesz=%s hugepages=%s)",
					it.Name, want, v, strings.TrimPrefix(it.Name, "hugepages."), want)
			}
			return "", fmt.Errorf("%s: wanted %q, %s reads %q", it.Name, want, f, v)
		}
		got = append(got, v)
	}
	return joinDevices(got, it.devs), nil
}

// joinDevices writes the values of a knob's files: one value when all
// agree, else "dev=value" for each device.
func joinDevices(vals, devs []string) string {
	same := true
	for _, v := range vals {
		same = same && v == vals[0]
	}
	if same || len(devs) != len(vals) {
		return vals[0]
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = devs[i] + "=" + v
	}
	return strings.Join(parts, " ")
}

// sameKernelValue compares a wanted value with one read back: numbers as
// numbers, the rest field by field.
func sameKernelValue(want, got string) bool {
	w, g := strings.Fields(want), strings.Fields(got)
	if len(w) != len(g) {
		return false
	}
	for i := range w {
		if w[i] == g[i] {
			continue
		}
		wn, err1 := strconv.ParseInt(w[i], 10, 64)
		gn, err2 := strconv.ParseInt(g[i], 10, 64)
		if err1 != nil || err2 != nil || wn != gn {
			return false
		}
	}
	return true
}

// currentKernel reads a kernel knob's present value; for disk.* knobs
// whose devices differ, "dev=value" for each.
func (a *Applier) currentKernel(name string, cl class) (string, error) {
	files, devs, err := a.kernelFiles(name, cl)
	if err != nil {
		return "", err
	}
	var vals, names []string
	for i, f := range files {
		content, err := a.h.ReadString(f)
		if err != nil {
			return "", fmt.Errorf("%s: %s", name, host.Explain(err))
		}
		if name == "disk.scheduler" && len(selectorChoices(content)) < 2 && len(files) > 1 {
			continue // no choice there: not part of the knob
		}
		vals = append(vals, journal.Current(content))
		if devs != nil {
			names = append(names, devs[i])
		}
	}
	if len(vals) == 0 {
		return "", fmt.Errorf("%s: nothing to read", name)
	}
	return joinDevices(vals, names), nil
}

// explainWrite says why the kernel refused a write.
func explainWrite(err error) error {
	switch {
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("the kernel refused the value (invalid argument)")
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("the kernel refused the value now (busy)")
	}
	return errors.New(host.Explain(err))
}

// dataDevices lists the whole block devices under the data directory
// (partitions resolved to their disks, dm/md to their members, loop to the
// device of its backing file), found once per Applier.
func (a *Applier) dataDevices() ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.devs != nil {
		return a.devs.names, a.devs.err
	}
	a.devs = &dataDevices{}
	a.devs.names, a.devs.err = findDataDevices(a.h, a.t.DataDir)
	return a.devs.names, a.devs.err
}

type dataDevices struct {
	names []string
	err   error
}

func findDataDevices(h *host.Host, dir string) ([]string, error) {
	if dir == "" {
		return nil, errors.New("no data directory to find the devices of")
	}
	ps, devices := facts.PathDevices(h, dir)
	if ps.Err != "" {
		return nil, fmt.Errorf("data directory %s: %s", dir, ps.Err)
	}
	if len(ps.Stack) == 0 {
		what := "no block device"
		if m := ps.Mount; m != nil {
			switch {
			case m.FSType == "zfs":
				what = "ZFS dataset " + m.Source + ", whose queues belong to the pool's devices"
			case m.Network():
				what = m.FSType + " (a network filesystem)"
			default:
				what = m.FSType + " mounted on " + m.MountPoint + ", which has no block device"
			}
		}
		msg := fmt.Sprintf("data directory %s is on %s: disk knobs do not apply", dir, what)
		if len(ps.Notes) > 0 {
			msg += " (" + strings.Join(ps.Notes, "; ") + ")"
		}
		return nil, errors.New(msg)
	}
	var out []string
	for _, name := range ps.Stack {
		if d := devices[name]; d != nil && d.Partition {
			continue // a partition's queue is its disk's
		}
		if !contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("data directory %s: no whole device found under %s", dir, strings.Join(ps.Stack, " → "))
	}
	return out, nil
}
