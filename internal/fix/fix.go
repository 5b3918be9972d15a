// Package fix describes the remedies findings propose and renders them as the
// persistent files an administrator installs: one sysctl.d file, one udev
// rule file, one limits.d file, systemd drop-ins per unit, the kernel command
// line change, and database configuration snippets.
package fix

// Fix is the remedy of one finding. The structured parts say what to change;
// Runtime says how to apply it now, the files make it survive a reboot.
type Fix struct {
	// Summary says in one line what to change.
	Summary string `json:"summary"`
	// Sysctl parameters to set.
	Sysctl []KV `json:"sysctl,omitempty"`
	// SysctlNow are parameters to set in the running kernel only, with
	// nothing persisted (sysctl.drift with --keep-file puts a running value
	// back to what the next boot sets anyway).
	SysctlNow []KV `json:"sysctl_now,omitempty"`
	// Udev queue attributes to set for block devices.
	Udev []UdevAttr `json:"udev,omitempty"`
	// Limits are pam_limits lines (for logins and non-systemd services).
	Limits []LimitLine `json:"limits,omitempty"`
	// Dropins are systemd unit settings.
	Dropins []Dropin `json:"dropins,omitempty"`
	// Cmdline lists kernel parameters to add (key=value).
	Cmdline []string `json:"cmdline,omitempty"`
	// Sysfs lists kernel knobs under /sys that no sysctl covers (THP); they
	// persist through the kernel command line or a boot unit.
	Sysfs []KV `json:"sysfs,omitempty"`
	// TunedDisk lists [disk] settings (elevator, readahead) for the TuneD
	// child profile, when an active TuneD profile sets them.
	TunedDisk []KV `json:"tuned_disk,omitempty"`
	// Config lists database settings to change.
	Config []ConfigChange `json:"config,omitempty"`
	// Mount lists mount option changes (for /etc/fstab).
	Mount []MountChange `json:"mount,omitempty"`
	// Runtime lists commands that apply the change now, for a person to
	// read and run; they are never executed from these strings. A check
	// adds its own; RuntimeCommands orders them after the ones derived
	// from the structured parts, in the order pasting them is correct.
	Runtime []string `json:"runtime,omitempty"`
	// Rlimits are the resource limits of running processes that a
	// "prlimit --pid" command among Runtime changes, structured so that
	// `dbhost fix --apply` can set them (prlimit(2)) and put them back.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// Restart, if set, says that only a restart of the server makes the
	// change take full effect. It is never among the Runtime commands.
	Restart *Restart `json:"restart,omitempty"`
	// Manual describes a change no file can make (move data to XFS).
	Manual string `json:"manual,omitempty"`
	// HostOnly: dbhost runs in a container and this must be changed on the
	// container's host (kernel settings are not namespaced).
	HostOnly bool `json:"host_only,omitempty"`
	// Files are the persistent files for this fix alone, rendered by
	// Render; `dbhost fix` merges all findings' files.
	Files []File `json:"files,omitempty"`
}

// KV is a key and value (sysctl name, sysfs path).
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// UdevAttr sets a queue attribute for a block device by kernel name.
type UdevAttr struct {
	Device string `json:"device"` // kernel name: vda, nvme0n1, sdb
	Attr   string `json:"attr"`   // queue/scheduler, queue/read_ahead_kb
	Value  string `json:"value"`
}

// LimitLine is a pam_limits line.
type LimitLine struct {
	Domain string `json:"domain"`
	Type   string `json:"type"`
	Item   string `json:"item"`
	Value  string `json:"value"`
}

// Dropin sets Key=Value in a section of a systemd unit.
type Dropin struct {
	Unit    string `json:"unit"`
	Section string `json:"section"`
	Key     string `json:"key"`
	Value   string `json:"value"`
}

// ConfigChange sets a database setting.
type ConfigChange struct {
	// Instance names the instance ("postgres:5432"), Engine its engine.
	Instance string `json:"instance"`
	Engine   string `json:"engine"`
	Key      string `json:"key"`
	Value    string `json:"value"`
	// Restart: the setting only takes effect after a server restart.
	Restart bool `json:"restart,omitempty"`
}

// Restart is a server restart a change needs, and why nothing else works.
type Restart struct {
	// Unit is the systemd unit that runs the server ("" none).
	Unit string `json:"unit,omitempty"`
	Why  string `json:"why"`
}

// MountChange adds or removes options of a mount.
type MountChange struct {
	MountPoint string `json:"mount_point"`
	// Source is the mounted device as mountinfo shows it, to find the
	// fstab line that mounts it.
	Source string   `json:"source,omitempty"`
	Add    []string `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// File is a persistent file and its full content.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Mode is the permission the file should have (0644 for most).
	Mode uint32 `json:"mode"`
}

// Empty reports whether the fix proposes nothing.
func (f *Fix) Empty() bool {
	return f == nil || (len(f.Sysctl) == 0 && len(f.SysctlNow) == 0 && len(f.Udev) == 0 && len(f.Limits) == 0 &&
		len(f.Dropins) == 0 && len(f.Cmdline) == 0 && len(f.Sysfs) == 0 && len(f.TunedDisk) == 0 && len(f.Config) == 0 &&
		len(f.Mount) == 0 && len(f.Runtime) == 0 && len(f.Rlimits) == 0 && f.Manual == "" && f.Restart == nil)
}
