package check_test

import (
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// mountAt edits the mount at mp wherever the facts hold a copy of it: the
// host's table and each database path's.
func mountAt(mp string, edit func(m *facts.Mount)) func(*facts.Facts) {
	return func(f *facts.Facts) {
		for i := range f.Storage.Mounts {
			if f.Storage.Mounts[i].MountPoint == mp {
				edit(&f.Storage.Mounts[i])
			}
		}
		for _, in := range f.Instances {
			for i := range in.Storage {
				if m := in.Storage[i].Mount; m != nil && m.MountPoint == mp {
					edit(m)
				}
			}
		}
	}
}

// atime sets the access-time mode of a mount.
func atime(mp, mode string) func(*facts.Facts) {
	return mountAt(mp, func(m *facts.Mount) {
		for _, o := range []string{"noatime", "relatime", "strictatime"} {
			delete(m.Options, o)
		}
		if mode != "" {
			m.Options[mode] = ""
		}
	})
}

// device edits a block device.
func device(name string, edit func(d *facts.BlockDevice)) func(*facts.Facts) {
	return func(f *facts.Facts) { edit(f.Storage.Devices[name]) }
}

func queue(name, attr, value string) func(*facts.Facts) {
	return device(name, func(d *facts.BlockDevice) {
		r := host.Reading{Value: value, Source: "/sys/block/" + name + "/queue/" + attr}
		switch attr {
		case "scheduler":
			d.Scheduler = r
		case "rotational":
			d.Rotational = r
		case "read_ahead_kb":
			d.ReadAheadKB = r
		case "write_cache":
			d.WriteCache = r
		default:
			panic(attr)
		}
	})
}

// The baseline's data is on vda, a virtio disk that reports rotational 1;
// PostgreSQL on it limits read-ahead to 128 KB.
func init() {
	const b, pg, vda = "baseline", "postgres:5432", "device:vda"
	addCases(
		// storage.read_ahead: at most the smallest limit of the databases
		// on the device.
		tcase{name: "128 KB", base: b, mutate: queue("vda", "read_ahead_kb", "128"), id: "storage.read_ahead", subject: vda, want: check.Pass},
		tcase{name: "129 KB", base: b, mutate: queue("vda", "read_ahead_kb", "129"), id: "storage.read_ahead", subject: vda, want: check.Fail},

		// storage.scheduler by device: a virtual disk takes none or
		// mq-deadline, never bfq; NVMe only none; a spinning disk
		// mq-deadline.
		tcase{name: "virtual, mq-deadline", base: b, mutate: queue("vda", "scheduler", "[mq-deadline] none"), id: "storage.scheduler", subject: vda, want: check.Pass},
		tcase{name: "virtual, none", base: b, mutate: queue("vda", "scheduler", "mq-deadline [none]"), id: "storage.scheduler", subject: vda, want: check.Pass},
		tcase{name: "virtual, bfq", base: b, mutate: queue("vda", "scheduler", "mq-deadline [bfq] none"), id: "storage.scheduler", subject: vda, want: check.Fail},
		tcase{name: "NVMe, none", base: b, mutate: all(device("vda", func(d *facts.BlockDevice) { d.Kind, d.Virtual = "nvme", false }), queue("vda", "scheduler", "[none] mq-deadline")), id: "storage.scheduler", subject: vda, want: check.Pass},
		tcase{name: "NVMe, mq-deadline", base: b, mutate: all(device("vda", func(d *facts.BlockDevice) { d.Kind, d.Virtual = "nvme", false }), queue("vda", "scheduler", "none [mq-deadline]")), id: "storage.scheduler", subject: vda, want: check.Fail},
		tcase{name: "spinning disk, mq-deadline", base: b, mutate: all(device("vda", func(d *facts.BlockDevice) { d.Kind, d.Virtual = "scsi", false }), queue("vda", "rotational", "1"), queue("vda", "scheduler", "none [mq-deadline] bfq")), id: "storage.scheduler", subject: vda, want: check.Pass},
		tcase{name: "spinning disk, none", base: b, mutate: all(device("vda", func(d *facts.BlockDevice) { d.Kind, d.Virtual = "scsi", false }), queue("vda", "rotational", "1"), queue("vda", "scheduler", "[none] mq-deadline bfq")), id: "storage.scheduler", subject: vda, want: check.Fail},

		// storage.rotational_cost on flash: random_page_cost at most 2,
		// innodb_io_capacity above 200.
		tcase{name: "flash, random_page_cost 2", base: b, mutate: all(queue("vda", "rotational", "0"), setting(pg, "random_page_cost", "2")), id: "storage.rotational_cost", subject: pg, want: check.Pass},
		tcase{name: "flash, random_page_cost 2.1", base: b, mutate: all(queue("vda", "rotational", "0"), setting(pg, "random_page_cost", "2.1")), id: "storage.rotational_cost", subject: pg, want: check.Fail},
		tcase{name: "flash, io_capacity 201", base: b, mutate: all(queue("vda", "rotational", "0"), setting("mysql:3306", "innodb_io_capacity", "201")), id: "storage.rotational_cost", subject: "mysql:3306", want: check.Pass},
		tcase{name: "flash, io_capacity 200", base: b, mutate: all(queue("vda", "rotational", "0"), setting("mysql:3306", "innodb_io_capacity", "200")), id: "storage.rotational_cost", subject: "mysql:3306", want: check.Fail},
		tcase{name: "virtual disk", base: b, mutate: setting(pg, "random_page_cost", "4"), id: "storage.rotational_cost", subject: pg, want: check.Unknown},

		// storage.noatime: noatime; relatime only on XFS.
		tcase{name: "noatime", base: b, mutate: atime("/", "noatime"), id: "storage.noatime", subject: "mount:/", want: check.Pass},
		tcase{name: "relatime", base: b, mutate: atime("/", "relatime"), id: "storage.noatime", subject: "mount:/", want: check.Fail},
		tcase{name: "XFS relatime", base: b, mutate: all(atime("/", "relatime"), mountAt("/", func(m *facts.Mount) { m.FSType = "xfs" })), id: "storage.noatime", subject: "mount:/", want: check.Pass},
		tcase{name: "strictatime", base: b, mutate: atime("/", "strictatime"), id: "storage.noatime", subject: "mount:/", want: check.Fail},

		// storage.barrier: no nobarrier or barrier=0, no data=writeback.
		tcase{name: "nobarrier", base: b, mutate: mountAt("/", func(m *facts.Mount) { m.SuperOptions["nobarrier"] = "" }), id: "storage.barrier", subject: "mount:/", want: check.Fail},
		tcase{name: "barrier=0", base: b, mutate: mountAt("/", func(m *facts.Mount) { m.SuperOptions["barrier"] = "0" }), id: "storage.barrier", subject: "mount:/", want: check.Fail},
		tcase{name: "data=writeback", base: b, mutate: mountAt("/", func(m *facts.Mount) { m.SuperOptions["data"] = "writeback" }), id: "storage.barrier", subject: "mount:/", want: check.Fail},
		tcase{name: "barrier=1", base: b, mutate: mountAt("/", func(m *facts.Mount) { m.SuperOptions["barrier"] = "1" }), id: "storage.barrier", subject: "mount:/", want: check.Pass},

		// storage.filesystem: XFS or ext4; not ext3.
		tcase{name: "xfs", base: b, mutate: mountAt("/", func(m *facts.Mount) { m.FSType = "xfs" }), id: "storage.filesystem", subject: pg, want: check.Pass},
		tcase{name: "ext3", base: b, mutate: mountAt("/", func(m *facts.Mount) { m.FSType = "ext3" }), id: "storage.filesystem", subject: pg, want: check.Fail},
	)
}
