// Package fleet compares hosts: two observations of hosts (snapshots or
// this host) with Diff, and many snapshots in one report with Build.
//
// Both work on a Snapshot: a host's configuration flattened into typed
// keys (Settings) and its findings reduced to check, subject, status and
// severity. The gathered facts are dropped once a Snapshot is made, so a
// report over hundreds of hosts holds little more than their settings.
//
// Snapshot contents come from other hosts and are hostile input: nothing in
// them is executed or followed, text output escapes them (termsafe) and the
// HTML report goes through html/template.
package fleet

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// SettingMap is a host's configuration as flat keys and values. A key is
// KIND/... where KIND is one of the Kind* constants:
//
//	sysctl/vm.swappiness                  a kernel parameter
//	thp/enabled                           transparent huge pages (the active choice)
//	hugepages/2048kB/total                an explicit huge page pool
//	device/vda/scheduler                  a block device's queue, by kernel name
//	storage/postgres:5432/data/scheduler  the queue of the device holding a database path
//	limits/postgres:5432/nofile/soft      a database process's resource limit
//	db/postgres:5432/shared_buffers       a database setting (secrets redacted)
//
// A value that could not be read is absent: absence means "not observed",
// never a value.
type SettingMap map[string]string

// Kinds of keys: the first segment of a key.
const (
	KindSysctl    = "sysctl"
	KindTHP       = "thp"
	KindHugePages = "hugepages"
	KindDevice    = "device"
	KindStorage   = "storage"
	KindLimits    = "limits"
	KindDB        = "db"
)

// Kinds lists the kinds in the order reports group them.
var Kinds = []string{KindSysctl, KindTHP, KindHugePages, KindStorage, KindDevice, KindLimits, KindDB}

// Kind returns the kind of a key ("sysctl" of "sysctl/vm.swappiness").
func Kind(key string) string {
	k, _, _ := strings.Cut(key, "/")
	return k
}

// kindRank orders keys by kind for display.
func kindRank(key string) int {
	k := Kind(key)
	for i, x := range Kinds {
		if x == k {
			return i
		}
	}
	return len(Kinds)
}

// lessKey orders keys by kind, then by name.
func lessKey(a, b string) bool {
	if ra, rb := kindRank(a), kindRank(b); ra != rb {
		return ra < rb
	}
	return a < b
}

// sortKeys sorts keys by kind, then by name.
func sortKeys(keys []string) {
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
}

// Subject returns the instance or device a key is about ("postgres:5432"
// of "db/postgres:5432/port", "vda" of "device/vda/scheduler"), or "" for
// host-wide keys.
func Subject(key string) string {
	switch Kind(key) {
	case KindDevice, KindStorage, KindLimits, KindDB:
		_, rest, _ := strings.Cut(key, "/")
		s, _, _ := strings.Cut(rest, "/")
		return s
	}
	return ""
}

// volatileSysctls are gathered parameters that are counters, not settings:
// they differ between any two observations.
var volatileSysctls = map[string]bool{"fs.file-nr": true}

// limitNames are the resource limits compared, by their short names.
var limitNames = []struct{ short, proc string }{
	{"nofile", host.LimitNofile},
	{"nproc", host.LimitNproc},
	{"memlock", host.LimitMemlock},
}

// Settings flattens the comparable configuration of a host. It is a pure
// function of the facts.
func Settings(f *facts.Facts) SettingMap {
	s := SettingMap{}
	for name, r := range f.Sysctl {
		if r.OK() && !volatileSysctls[name] {
			s[KindSysctl+"/"+name] = strings.Join(strings.Fields(r.Value), " ")
		}
	}
	thp := f.Memory.THP
	for _, t := range []struct {
		key string
		r   host.Reading
	}{
		{"enabled", thp.Enabled},
		{"defrag", thp.Defrag},
		{"shmem_enabled", thp.ShmemEnabled},
		{"khugepaged/defrag", thp.KhugepagedDefrag},
		{"khugepaged/max_ptes_none", thp.MaxPtesNone},
	} {
		if t.r.OK() {
			s[KindTHP+"/"+t.key] = facts.Active(t.r)
		}
	}
	for _, p := range f.Memory.HugePages {
		if p.Err == "" && p.SizeKB > 0 {
			s[fmt.Sprintf("%s/%dkB/total", KindHugePages, p.SizeKB)] = strconv.FormatInt(p.Total, 10)
		}
	}
	for name, d := range f.Storage.Devices {
		if d == nil || d.Partition {
			continue // a partition's queue is its disk's
		}
		addQueue(s, KindDevice+"/"+name, d, d)
	}
	for _, in := range f.Instances {
		name := in.Name()
		for _, ps := range in.Storage {
			addPathStorage(s, name, ps, f.Storage.Devices)
		}
		if in.LimitsErr == "" {
			for _, l := range limitNames {
				if r, ok := in.Limits[l.proc]; ok {
					s[KindLimits+"/"+name+"/"+l.short+"/soft"] = rlimit(r.Soft)
					s[KindLimits+"/"+name+"/"+l.short+"/hard"] = rlimit(r.Hard)
				}
			}
		}
		for k, v := range in.Settings {
			// Values are redacted when they are recorded (engine.Instance.Set
			// and the engines' live readers); redacting again costs little
			// and keeps a secret out of a diff whatever path it came by.
			val := host.RedactValue(k, v.Value)
			if v.Unit != "" {
				val += " (" + v.Unit + ")"
			}
			s[KindDB+"/"+name+"/"+k] = val
		}
	}
	return s
}

func rlimit(v uint64) string {
	if v == host.Unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

// queueKeys are the device settings compared.
var queueKeys = []string{"scheduler", "read_ahead_kb", "nr_requests", "rotational", "write_cache"}

// addQueue adds a device's queue settings under prefix: the read-ahead of
// top (the device the filesystem is mounted from, whose read-ahead page
// cache reads use) and the rest of d (the device that queues the I/O).
func addQueue(s SettingMap, prefix string, top, d *facts.BlockDevice) {
	for _, k := range queueKeys {
		if v, ok := queueValue(k, top, d); ok {
			s[prefix+"/"+k] = v
		}
	}
}

func queueValue(key string, top, d *facts.BlockDevice) (string, bool) {
	switch key {
	case "scheduler":
		return d.ActiveScheduler()
	case "read_ahead_kb":
		if top == nil {
			return "", false
		}
		return reading(top.ReadAheadKB)
	case "nr_requests":
		return reading(d.NrRequests)
	case "rotational":
		return reading(d.Rotational)
	case "write_cache":
		return reading(d.WriteCache)
	}
	return "", false
}

func reading(r host.Reading) (string, bool) {
	if !r.OK() {
		return "", false
	}
	return strings.TrimSpace(r.Value), true
}

// addPathStorage adds the queue settings of the devices under one database
// path, keyed by the instance and the path's role: on two hosts whose disks
// have different names, "the device holding postgres:5432's data" is still
// the same thing. Read-ahead is the mounted device's; the other settings
// are the physical disks'. When the disks below (an md or dm device over
// several) disagree, the value names each: "mq-deadline (sda), none (sdb)".
func addPathStorage(s SettingMap, inst string, ps facts.PathStorage, devs map[string]*facts.BlockDevice) {
	if ps.Err != "" || ps.Role == "" || len(ps.Physical) == 0 {
		return // network filesystem, ZFS, or not followed
	}
	prefix := KindStorage + "/" + inst + "/" + ps.Role
	top := devs[ps.Device]
	for _, k := range queueKeys {
		if k == "read_ahead_kb" {
			if v, ok := queueValue(k, top, top); ok {
				s[prefix+"/"+k] = v
			}
			continue
		}
		var vals, named []string
		distinct := map[string]bool{}
		complete := true
		for _, p := range ps.Physical {
			d := devs[p]
			if d == nil {
				complete = false
				break
			}
			v, ok := queueValue(k, nil, d)
			if !ok {
				complete = false
				break
			}
			vals = append(vals, v)
			named = append(named, v+" ("+p+")")
			distinct[v] = true
		}
		switch {
		case !complete:
		case len(distinct) == 1:
			s[prefix+"/"+k] = vals[0]
		default:
			sort.Strings(named)
			s[prefix+"/"+k] = strings.Join(named, ", ")
		}
	}
}
