package facts

import (
	"context"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

const (
	zfsKstatDir = "/proc/spl/kstat/zfs"
	// ARCStatsFile holds the ARC counters (name type data).
	ARCStatsFile = zfsKstatDir + "/arcstats"
)

// ZFSProperties are the dataset properties the ZFS checks judge, plus the
// ones that explain them in evidence.
var ZFSProperties = []string{"recordsize", "primarycache", "secondarycache", "atime", "relatime",
	"compression", "compressratio", "logbias", "sync", "mountpoint", "volblocksize"}

// ZFSGetArgs is the `zfs get` command line: scripted (-H), parsable values
// (-p: record sizes in bytes), file systems and volumes only (snapshots
// would multiply the output on hosts that keep many).
func ZFSGetArgs() []string {
	return []string{"get", "-Hp", "-t", "filesystem,volume", "-o", "name,property,value,source", strings.Join(ZFSProperties, ",")}
}

// ZpoolStatusArgs is the `zpool status` command line: -P prints full vdev
// paths, so a log device in /dev/shm shows where it lives.
func ZpoolStatusArgs() []string { return []string{"status", "-P"} }

func gatherZFS(ctx context.Context, h *host.Host) *ZFS {
	z := &ZFS{}
	if out, err := h.Run(ctx, "zfs", ZFSGetArgs()...); err != nil {
		z.DatasetsErr = "zfs get failed: " + host.Explain(err)
	} else {
		z.Datasets, z.Sources = ParseZFSGet(string(out))
	}
	if out, err := h.Run(ctx, "zpool", ZpoolStatusArgs()...); err != nil {
		z.PoolsErr = "zpool status failed: " + host.Explain(err)
	} else {
		z.Pools = ParseZpoolStatus(string(out))
	}
	if b, err := h.ReadFile(ARCStatsFile); err != nil {
		z.ARCErr = host.Explain(err)
	} else {
		z.ARC = ParseKstat(string(b))
	}
	return z
}

// ParseZFSGet reads `zfs get -H -o name,property,value,source` output
// (tab-separated) into dataset → property → value and → source.
func ParseZFSGet(out string) (vals, srcs map[string]map[string]string) {
	vals, srcs = map[string]map[string]string{}, map[string]map[string]string{}
	for _, ln := range strings.Split(out, "\n") {
		f := strings.Split(ln, "\t")
		if len(f) < 3 || f[0] == "" {
			continue
		}
		if vals[f[0]] == nil {
			vals[f[0]], srcs[f[0]] = map[string]string{}, map[string]string{}
		}
		vals[f[0]][f[1]] = f[2]
		if len(f) > 3 {
			srcs[f[0]][f[1]] = f[3]
		}
	}
	return vals, srcs
}

var groupVdev = textio.LazyRegexp(`^(mirror|raidz[123]?|draid[123]?|spare|replacing)(-|:|$)`)

// ParseZpoolStatus reads `zpool status -P`: each pool's name, state, and
// the leaf devices of its logs and cache sections.
func ParseZpoolStatus(out string) []ZPool {
	var pools []ZPool
	var cur *ZPool
	section := ""      // "", "logs", "cache", "spares", "special", "dedup"
	sectionIndent := 0 // indentation of the section header
	inConfig := false
	for _, ln := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(ln)
		switch {
		case strings.HasPrefix(trimmed, "pool:"):
			pools = append(pools, ZPool{Name: strings.TrimSpace(strings.TrimPrefix(trimmed, "pool:"))})
			cur = &pools[len(pools)-1]
			inConfig, section = false, ""
			continue
		case cur == nil:
			continue
		case strings.HasPrefix(trimmed, "state:"):
			cur.State = strings.TrimSpace(strings.TrimPrefix(trimmed, "state:"))
			continue
		case strings.HasPrefix(trimmed, "config:"):
			inConfig = true
			continue
		case strings.HasPrefix(trimmed, "errors:"):
			inConfig = false
			continue
		}
		if !inConfig || trimmed == "" {
			continue
		}
		f := strings.Fields(trimmed)
		if f[0] == "NAME" {
			continue
		}
		indent := len(ln) - len(strings.TrimLeft(ln, " \t"))
		if len(f) == 1 {
			switch f[0] {
			case "logs", "cache", "spares", "special", "dedup":
				section, sectionIndent = f[0], indent
				continue
			}
		}
		if f[0] == cur.Name {
			section = ""
			continue
		}
		if section == "" || indent <= sectionIndent || groupVdev.MatchString(f[0]) {
			continue
		}
		switch section {
		case "logs":
			cur.Logs = append(cur.Logs, f[0])
		case "cache":
			cur.Cache = append(cur.Cache, f[0])
		}
	}
	return pools
}

// ParseKstat reads an SPL kstat file (two header lines, then
// "name type data") into name → value, skipping non-numeric rows.
func ParseKstat(s string) map[string]uint64 {
	out := map[string]uint64{}
	lines := strings.Split(s, "\n")
	for i, ln := range lines {
		if i < 2 {
			continue
		}
		f := strings.Fields(ln)
		if len(f) != 3 {
			continue
		}
		if v, err := strconv.ParseUint(f[2], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}
