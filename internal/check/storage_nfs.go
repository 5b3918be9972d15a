package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

func init() {
	Register(Check{
		ID:        "storage.nfs.soft",
		Title:     "NFS mounts under databases are hard mounts",
		Problem:   "An NFS mount under a database is a soft mount",
		Severity:  Critical,
		AppliesTo: []string{"nfs"},
		Doc: `Reads the options of every NFS mount holding a database path (mountinfo
superblock options show hard or soft). A soft mount gives up after
retrans retries and returns EIO to the database: a write the server was
still going to accept is reported failed, or a failed one half-applied,
and data files or the WAL are corrupted. Databases need hard mounts,
which retry until the server answers.`,
		Refs: []string{"https://man7.org/linux/man-pages/man5/nfs.5.html"},
		Run:  checkNFSSoft,
	})
	Register(Check{
		ID:        "storage.nfs.options",
		Title:     "NFS mount options suit a database",
		Problem:   "NFS mount options do not suit a database",
		Severity:  Warning,
		AppliesTo: []string{"nfs"},
		Doc: `Reads the options of every NFS mount holding a database path and expects:
proto=tcp (UDP drops and reorders large writes under load), rsize and wsize
of at least 64 KiB (each NFS read()/write() is one operation and the
server's operation rate is the limit: a tuned NetApp host used 65536, EFS
mounts with 1048576), vers=3 or later (v2 has 32-bit sizes and
synchronous writes), and noatime (no access-time updates over the wire).
In the measured NetApp case, mount and sysctl tuning took dd throughput
from 3.4 to 36.2 MB/s (local RAID-10: 219 MB/s); hard is checked by
storage.nfs.soft. Changing proto, vers or sizes needs an unmount and
mount: stop the database first.`,
		Refs: []string{"https://man7.org/linux/man-pages/man5/nfs.5.html",
			"https://docs.aws.amazon.com/efs/latest/ug/mounting-fs-nfs-mount-settings.html"},
		Run: checkNFSOptions,
	})
}

func stNFSMounts(f *facts.Facts) []stMountUse {
	var out []stMountUse
	for _, u := range stUsesByMount(f) {
		if u.m.NFS() {
			out = append(out, u)
		}
	}
	return out
}

func checkNFSSoft(f *facts.Facts) []Result {
	var out []Result
	for _, u := range stNFSMounts(f) {
		m := u.m
		subj := "mount:" + m.MountPoint
		ev := append(stMountEvidence(m), stUsesEvidence(u.uses))
		_, soft := m.Option("soft")
		_, softerr := m.Option("softerr")
		if !soft && !softerr {
			out = append(out, PassR(subj, m.MountPoint+" is a hard NFS mount: I/O waits for the server instead of failing.", ev...))
			continue
		}
		mode := "soft"
		if softerr {
			mode = "softerr"
		}
		out = append(out, FailR(subj,
			fmt.Sprintf("%s is a %s NFS mount: when the server is slow past timeo×retrans the client returns an I/O error to the database, so writes can be reported failed or half-applied and data files or the write-ahead log end up corrupted. Mount it hard.", m.MountPoint, mode),
			&fix.Fix{Summary: "Mount " + m.MountPoint + " hard",
				Mount:  []fix.MountChange{{MountPoint: m.MountPoint, Source: m.Source, Add: []string{"hard"}, Remove: []string{mode}}},
				Manual: "Replace " + mode + " with hard in /etc/fstab, stop the database, then umount and mount " + m.MountPoint + "."}, ev...))
	}
	return out
}

// nfsMinXfer is the smallest rsize/wsize judged adequate (64 KiB).
const nfsMinXfer = 65536

func checkNFSOptions(f *facts.Facts) []Result {
	var out []Result
	for _, u := range stNFSMounts(f) {
		m := u.m
		subj := "mount:" + m.MountPoint
		ev := append(stMountEvidence(m), stUsesEvidence(u.uses))
		var problems, add, remove []string
		remount := false // true when only a remount is needed
		if p, ok := m.Option("proto"); ok && strings.HasPrefix(p, "udp") {
			problems = append(problems, "proto="+p+": UDP loses and reorders large writes under load")
			add, remove = append(add, "proto=tcp"), append(remove, "proto="+p)
		}
		var small []string
		for _, k := range []string{"rsize", "wsize"} {
			v, ok := m.Option(k)
			if !ok {
				continue
			}
			if n, err := strconv.Atoi(v); err == nil && n < nfsMinXfer {
				small = append(small, k+"="+v)
				add, remove = append(add, k+"=1048576"), append(remove, k+"="+v)
			}
		}
		if len(small) > 0 {
			problems = append(problems, strings.Join(small, ", ")+": below 64 KiB, database I/O is cut into more NFS operations and the server's operation rate caps throughput (EFS, for one, bills every operation as at least 4 KB and caps a file system at about 7000 operations/s)")
		}
		if v, ok := m.Option("vers"); ok {
			if major, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0]); err == nil && major < 3 {
				problems = append(problems, "vers="+v+": NFSv2 has 32-bit file sizes and synchronous writes")
				add, remove = append(add, "vers=3"), append(remove, "vers="+v)
			}
		}
		if stAtimeMode(m) != "noatime" {
			problems = append(problems, stAtimeMode(m)+": reads send access-time updates to the server")
			add = append(add, "noatime")
			remount = len(remove) == 0
		}
		if _, hard := m.Option("hard"); hard {
			ev = append(ev, Ev("hard", "yes", m.File))
		}
		if len(problems) == 0 {
			out = append(out, PassR(subj, m.MountPoint+" uses TCP, transfers of at least 64 KiB, NFS version 3 or later and noatime.", ev...))
			continue
		}
		fx := &fix.Fix{Summary: "Change the NFS options of " + m.MountPoint, Mount: []fix.MountChange{{MountPoint: m.MountPoint, Source: m.Source, Add: add, Remove: remove}}}
		if !remount {
			fx.Manual = "Edit the options in /etc/fstab, stop the database, then umount and mount " + m.MountPoint + " (NFS cannot change transport, version or transfer sizes on remount; the server may cap rsize/wsize lower than asked)."
		}
		out = append(out, FailR(subj, m.MountPoint+" NFS options: "+strings.Join(problems, "; ")+".", fx, ev...))
	}
	return out
}
