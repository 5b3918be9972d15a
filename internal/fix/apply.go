package fix

import (
	"path"

	"github.com/dbhost/dbhost/internal/host"
)

// Knob is a kernel setting a fix changes at runtime: a file under /proc/sys
// or /sys and the value to write.
type Knob struct {
	Path  string
	Value string
}

// Knobs lists the runtime kernel changes of a fix (sysctls, /sys knobs,
// block queue attributes). Settings that need a restart (limits, units,
// database configuration) or a reboot (kernel command line) are not knobs.
// What the files and commands refuse (Steps says so) is no knob either.
func Knobs(f *Fix) []Knob {
	var out []Knob
	for _, kv := range append(f.Sysctl[:len(f.Sysctl):len(f.Sysctl)], f.SysctlNow...) {
		if sysctlKnob(kv) == nil {
			out = append(out, Knob{Path: host.SysctlPath(kv.Key), Value: kv.Value})
		}
	}
	for _, kv := range f.Sysfs {
		if sysfsKnob(kv) == nil {
			out = append(out, Knob{Path: kv.Key, Value: kv.Value})
		}
	}
	for _, u := range f.Udev {
		if udevKnob(u) == nil {
			out = append(out, Knob{Path: udevPath(u), Value: u.Value})
		}
	}
	return out
}

// sysctlKnob, sysfsKnob and udevKnob say why a knob cannot be shown or
// set, as its file's encoder would refuse it.
func sysctlKnob(kv KV) error {
	_, err := sysctlLine(kv.Key, kv.Value)
	return err
}

func sysfsKnob(kv KV) error { return firstErr(sysfsPath(kv.Key), plainValue(kv.Value)) }

func udevKnob(u UdevAttr) error {
	_, err := udevAttr(u.Attr, u.Value)
	return firstErr(udevDevice(u.Device), err)
}

func udevPath(u UdevAttr) string { return path.Join("/sys/block", u.Device, u.Attr) }

// kvWhat and udevWhat show a refused knob, its strings escaped.
func kvWhat(kind string, kv KV) string { return kind + " " + quote(kv.Key) + " = " + quote(kv.Value) }

func udevWhat(u UdevAttr) string {
	return "udev " + quote(u.Device) + " " + quote(u.Attr) + " = " + quote(u.Value)
}
