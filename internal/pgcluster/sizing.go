package pgcluster

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

const (
	kiB = 1 << 10
	miB = 1 << 20
	giB = 1 << 30
)

// The shared_buffers rule (see the package comment for why).
const (
	minSharedBuffers = 128 * miB
	maxSharedBuffers = 4 * giB
	// sharedBuffersStep rounds the automatic size down, so that the same
	// host gives the same size run after run despite small changes in
	// MemAvailable.
	sharedBuffersStep = 128 * miB
)

// connectionReserve is what max_connections holds beyond the benchmark's
// clients: superuser_reserved_connections (3) plus dbhost's own sessions
// (settings, fingerprints, prewarm, pgbench's setup connection).
const connectionReserve = 10

// defaultClients is the client count assumed when Options.MaxClients is 0
// (PostgreSQL's own default of max_connections).
const defaultClients = 100

// Sizing is the configuration a cluster gets from the host's memory and disk.
type Sizing struct {
	MemTotal     uint64 `json:"mem_total"`     // bytes, from /proc/meminfo
	MemAvailable uint64 `json:"mem_available"` // bytes, 0 when unknown
	DiskFree     uint64 `json:"disk_free"`     // bytes free under Options.Dir, 0 when unknown

	SharedBuffers      uint64 `json:"shared_buffers"`
	EffectiveCacheSize uint64 `json:"effective_cache_size"`
	MaintenanceWorkMem uint64 `json:"maintenance_work_mem"`
	MaxWALSize         uint64 `json:"max_wal_size"`
	MaxConnections     int    `json:"max_connections"`
}

// Size applies the sizing rules to a host with memTotal bytes of memory,
// memAvailable of them available (0: unknown) and diskFree bytes free where
// the cluster goes (0: unknown):
//
//   - shared_buffers: o.SharedBuffers when set; else 25 % of memTotal,
//     at most 4 GiB and at most half of memAvailable, at least 128 MiB,
//     rounded down to a multiple of 128 MiB.
//   - effective_cache_size: half of memTotal, at least shared_buffers (a
//     planner hint; nothing is allocated).
//   - maintenance_work_mem: memTotal/32 between 64 MiB and 1 GiB (pgbench's
//     index build at load time).
//   - max_wal_size: twice shared_buffers between 1 GiB and 16 GiB, and at
//     most a quarter of diskFree (never under 256 MiB), so that checkpoints
//     come from the workload's pace rather than the 1 GB default, without
//     filling the disk.
//   - max_connections: o.MaxClients (100 when 0) plus 10 for the superuser
//     reserve and dbhost's own sessions.
func Size(memTotal, memAvailable, diskFree uint64, o Options) Sizing {
	s := Sizing{MemTotal: memTotal, MemAvailable: memAvailable, DiskFree: diskFree}
	if o.SharedBuffers > 0 {
		s.SharedBuffers = o.SharedBuffers
	} else {
		sb := min(memTotal/4, maxSharedBuffers)
		if memAvailable > 0 {
			sb = min(sb, memAvailable/2)
		}
		sb = sb / sharedBuffersStep * sharedBuffersStep
		s.SharedBuffers = max(sb, minSharedBuffers)
	}
	s.EffectiveCacheSize = max(memTotal/2, s.SharedBuffers)
	s.MaintenanceWorkMem = clamp(memTotal/32, 64*miB, giB)
	s.MaxWALSize = clamp(2*s.SharedBuffers, giB, 16*giB)
	if diskFree > 0 {
		s.MaxWALSize = max(min(s.MaxWALSize, diskFree/4), 256*miB)
	}
	clients := o.MaxClients
	if clients <= 0 {
		clients = defaultClients
	}
	s.MaxConnections = clients + connectionReserve
	return s
}

func clamp(v, lo, hi uint64) uint64 { return max(lo, min(v, hi)) }

// hostSizing reads memory and free disk space from the host.
func hostSizing(h *host.Host, parent string, o Options) (Sizing, error) {
	mi, err := h.Meminfo()
	if err != nil {
		return Sizing{}, fmt.Errorf("reading memory size: %s", host.Explain(err))
	}
	if mi.MemTotal == nil || *mi.MemTotal == 0 {
		return Sizing{}, fmt.Errorf("reading memory size: no MemTotal in /proc/meminfo")
	}
	total := *mi.MemTotal * kiB
	var avail uint64
	if mi.MemAvailable != nil {
		avail = *mi.MemAvailable * kiB
	}
	var free uint64
	if st, err := h.Statfs(parent); err == nil && st.Bsize > 0 {
		free = st.Bfree * uint64(st.Bsize)
	}
	return Size(total, avail, free, o), nil
}

// settings are the server settings the sizing and the experiment's fixed
// choices give, before Options.Settings.
func (s Sizing) settings(port int, socketDir string) map[string]string {
	return map[string]string{
		// Only the private socket: no TCP listener another user could reach.
		"listen_addresses":        "",
		"port":                    strconv.Itoa(port),
		"unix_socket_directories": socketDir,
		"shared_buffers":          kb(s.SharedBuffers),
		"effective_cache_size":    kb(s.EffectiveCacheSize),
		"maintenance_work_mem":    kb(s.MaintenanceWorkMem),
		"max_wal_size":            kb(s.MaxWALSize),
		"max_connections":         strconv.Itoa(s.MaxConnections),
		// A trial of a minute or two should not straddle a timed
		// checkpoint by chance; the WAL size still triggers them.
		"checkpoint_timeout":           "15min",
		"checkpoint_completion_target": "0.9",
		// fsync, synchronous_commit, full_page_writes keep PostgreSQL's
		// defaults (on): experiments measure real durability costs.
		"logging_collector": "off",
		"log_checkpoints":   "on",
		"log_line_prefix":   "%m [%p] ",
	}
}

func kb(b uint64) string { return strconv.FormatUint((b+kiB-1)/kiB, 10) + "kB" }

var settingName = textio.LazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// fixed are settings Options.Settings may not change: they locate the
// cluster's files and socket, which the journal's undo and RestartArgv rely
// on, or are configuration-file directives rather than settings.
var fixed = map[string]bool{
	"data_directory": true, "config_file": true, "hba_file": true, "ident_file": true,
	"external_pid_file": true, "port": true, "unix_socket_directories": true,
	"include": true, "include_if_exists": true, "include_dir": true,
}

func checkSettings(m map[string]string) error {
	for k, v := range m {
		switch {
		case !settingName.MatchString(k):
			return fmt.Errorf("pgcluster: setting name %q is not a PostgreSQL parameter name", k)
		case fixed[strings.ToLower(k)]:
			return fmt.Errorf("pgcluster: setting %s is fixed by the cluster and cannot be overridden", k)
		case strings.ContainsAny(v, "\n\r\x00"):
			return fmt.Errorf("pgcluster: setting %s: value contains a line break or NUL", k)
		}
	}
	return nil
}

// confLine renders name = 'value' in postgresql.conf syntax: single quotes
// doubled, backslashes escaped (the file's quoted strings honour escapes).
func confLine(name, value string) string {
	v := strings.ReplaceAll(value, `\`, `\\`)
	v = strings.ReplaceAll(v, `'`, `''`)
	return name + " = '" + v + "'\n"
}

// confFile renders the cluster's own configuration file: the sized
// settings, then the caller's (later lines win in postgresql.conf).
func confFile(s Sizing, base, extra map[string]string) string {
	var b strings.Builder
	b.WriteString("# Written by dbhost for a throwaway experiment cluster; removed with it.\n")
	fmt.Fprintf(&b, "# Sized for MemTotal %d MiB, MemAvailable %d MiB, %d MiB free disk.\n",
		s.MemTotal/miB, s.MemAvailable/miB, s.DiskFree/miB)
	writeSorted(&b, base)
	if len(extra) > 0 {
		b.WriteString("# Requested settings\n")
		writeSorted(&b, extra)
	}
	return b.String()
}

func writeSorted(b *strings.Builder, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(confLine(k, m[k]))
	}
}
