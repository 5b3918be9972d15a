package facts

import "github.com/dbhost/dbhost/internal/host"

// PathDevices follows one path, as PID 1's mount table shows it, to its
// mount and the block devices below (partition → disk, dm/md → members,
// loop → the device of its backing file), the way an instance's data
// directory is followed. devices holds the attributes of every device of
// ps.Stack, by kernel name. A path on tmpfs, overlay, a network filesystem
// or ZFS has an empty Stack; ps.Err says why a path could not be followed.
func PathDevices(h *host.Host, path string) (ps PathStorage, devices map[string]*BlockDevice) {
	f := &Facts{}
	ps = PathStorage{Role: "data", Path: path, MountsFrom: "/proc/1/mountinfo"}
	mounts, err := readMounts(h, 1)
	if err != nil {
		ps.Err = "cannot read /proc/1/mountinfo: " + host.Explain(err)
		return ps, nil
	}
	f.Storage.Mounts = mounts
	followPath(h, newDevWalker(h, f), mounts, &ps)
	return ps, f.Storage.Devices
}
