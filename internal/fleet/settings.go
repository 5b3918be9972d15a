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
	"slices"
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
//	storage/postgres:5432/data/scheduler  the queue of the devices under database paths, once
//	                                      per stack of devices, by the first path they hold
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
// function of the facts. Values are in their compared form: a kernel
// default derived from the host's RAM or CPUs is DerivedFromRAM or
// DerivedFromCPUs, a database setting that is a path is cleaned
// ("/var/lib/mysql/" is "/var/lib/mysql").
func Settings(f *facts.Facts) SettingMap {
	s, _, _ := flatten(f)
	return s
}

// flatten returns the settings (compared forms), the values read for the
// keys whose compared form differs from them, and the host's devices
// grouped as Stacks.
func flatten(f *facts.Facts) (SettingMap, map[string]string, []Stack) {
	s := SettingMap{}
	raw := map[string]string{}
	var memKB uint64
	if b, ok := f.Memory.MemTotal(); ok {
		memKB = b >> 10
	}
	for name, r := range f.Sysctl {
		if r.OK() && !volatileSysctls[name] {
			v := strings.Join(strings.Fields(r.Value), " ")
			key := KindSysctl + "/" + name
			if d := derived(name, v, memKB, f.System.CPUs); d != "" {
				raw[key] = v
				v = d
			}
			s[key] = v
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
	stacks := addStorage(s, f)
	for _, in := range f.Instances {
		name := in.Name()
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
			key := KindDB + "/" + name + "/" + k
			if c := cleanPath(val); c != val {
				raw[key] = val
				val = c
			}
			if v.Unit != "" {
				val += " (" + v.Unit + ")"
				if r, ok := raw[key]; ok {
					raw[key] = r + " (" + v.Unit + ")"
				}
			}
			s[key] = val
		}
	}
	return s, raw, stacks
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

// A Stack is one unit of block storage compared between hosts: the
// devices under one or more database paths (the mounted device and the
// physical disks below it), or a whole device that holds no database path.
// Its queue settings are flattened once, under Key, however many database
// paths it holds.
type Stack struct {
	// Key prefixes its settings: "storage/ROLE" (its first role, as
	// "storage/postgres:5432/data") for the devices under database paths,
	// "device/NAME" for any other whole device.
	Key string `json:"key"`
	// Devices are the mounted device first, then the physical disks below
	// it that are not the mounted device.
	Devices []string `json:"devices"`
	// Roles are the database paths it holds ("postgres:5432/wal"): by
	// database, data first.
	Roles []string `json:"roles,omitempty"`
}

// Name is the devices of the stack: "vda", "dm-0+vdb".
func (s Stack) Name() string { return strings.Join(s.Devices, "+") }

// roleRank orders the roles of a database's paths: data first.
var roleRank = map[string]int{"data": 0, "wal": 1, "redo": 2, "binlog": 3, "tmp": 4, "log": 5}

// lessRole orders "INSTANCE/ROLE" by instance, then data, wal, redo,
// binlog, tmp, log.
func lessRole(a, b string) bool {
	ia, ra := splitRole(a)
	ib, rb := splitRole(b)
	if ia != ib {
		return ia < ib
	}
	xa, oka := roleRank[ra]
	xb, okb := roleRank[rb]
	if oka != okb || xa != xb {
		if !oka {
			xa = len(roleRank)
		}
		if !okb {
			xb = len(roleRank)
		}
		if xa != xb {
			return xa < xb
		}
	}
	return ra < rb
}

// splitRole splits "postgres:5432/wal" at its last slash (an instance name
// may hold one).
func splitRole(r string) (inst, role string) {
	i := strings.LastIndexByte(r, '/')
	if i < 0 {
		return r, ""
	}
	return r[:i], r[i+1:]
}

// addStorage adds the queue settings of the host's block devices, each
// device once: the devices under database paths grouped by stack (the
// mounted device and its disks) under the stack's first role, the other
// whole devices by name. On two hosts whose disks have different names,
// "the device holding postgres:5432's data" is still the same thing; a
// device holding eight database paths is still one device.
func addStorage(s SettingMap, f *facts.Facts) []Stack {
	devs := f.Storage.Devices
	type group struct {
		ps    facts.PathStorage
		roles []string
	}
	groups := map[string]*group{}
	var order []string
	inStack := map[string]bool{}
	for _, in := range f.Instances {
		for _, ps := range in.Storage {
			if ps.Err != "" || ps.Role == "" || len(ps.Physical) == 0 {
				continue // network filesystem, ZFS, or not followed
			}
			phys := append([]string(nil), ps.Physical...)
			sort.Strings(phys)
			id := ps.Device + "|" + strings.Join(phys, ",")
			g := groups[id]
			if g == nil {
				g = &group{ps: ps}
				groups[id] = g
				order = append(order, id)
			}
			g.roles = append(g.roles, in.Name()+"/"+ps.Role)
			inStack[ps.Device] = true
			for _, p := range phys {
				inStack[p] = true
			}
		}
	}
	var stacks []Stack
	for _, id := range order {
		g := groups[id]
		sort.Slice(g.roles, func(i, j int) bool { return lessRole(g.roles[i], g.roles[j]) })
		g.roles = slices.Compact(g.roles)
		st := Stack{Key: KindStorage + "/" + g.roles[0], Roles: g.roles}
		if g.ps.Device != "" {
			st.Devices = append(st.Devices, g.ps.Device)
		}
		phys := append([]string(nil), g.ps.Physical...)
		sort.Strings(phys)
		for _, p := range phys {
			if p != g.ps.Device {
				st.Devices = append(st.Devices, p)
			}
		}
		addPathStorage(s, st.Key, g.ps, devs)
		stacks = append(stacks, st)
	}
	for name, d := range devs {
		if d == nil || d.Partition || inStack[name] {
			continue // a partition's queue is its disk's
		}
		st := Stack{Key: KindDevice + "/" + name, Devices: []string{name}}
		addQueue(s, st.Key, d, d)
		stacks = append(stacks, st)
	}
	sort.Slice(stacks, func(i, j int) bool { return stacks[i].Key < stacks[j].Key })
	return stacks
}

// addPathStorage adds the queue settings of the devices under one database
// path under prefix. Read-ahead is the mounted device's; the other settings
// are the physical disks'. When the disks below (an md or dm device over
// several) disagree, the value names each: "mq-deadline (sda), none (sdb)".
func addPathStorage(s SettingMap, prefix string, ps facts.PathStorage, devs map[string]*facts.BlockDevice) {
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
