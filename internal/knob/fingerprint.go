package knob

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
)

// Fingerprint describes the conditions of a trial, key → value:
//
//	<knob name>                  each knob asked for, read back (as Current)
//	thp.enabled, thp.defrag      transparent huge pages
//	hugepages.<size>.total|free|rsvd|surp   each explicit huge page pool
//	disk.devices                 the whole devices under the data directory ("none")
//	disk.<dev>.scheduler, disk.<dev>.read_ahead_kb
//	cpu.governor                 cpufreq governors in use, "none" without cpufreq
//	cpu.online, kernel.release
//	load.1, load.5, load.15      load average
//	pg.<parameter>, mysql.<variable>   the database's key settings
//	interval.steal_percent, interval.iowait_percent   filled by Interval
type Fingerprint map[string]string

// pgKeySettings and mysqlKeySettings are the database settings that change
// a benchmark's outcome, fingerprinted for every trial.
var (
	pgKeySettings = []string{"server_version", "shared_buffers", "huge_pages", "effective_cache_size", "work_mem",
		"maintenance_work_mem", "max_connections", "wal_buffers", "max_wal_size", "checkpoint_timeout",
		"synchronous_commit", "fsync", "full_page_writes", "random_page_cost", "effective_io_concurrency",
		"max_worker_processes", "max_parallel_workers_per_gather", "jit"}
	mysqlKeySettings = []string{"version", "innodb_buffer_pool_size", "innodb_buffer_pool_instances", "innodb_log_file_size",
		"innodb_flush_method", "innodb_flush_log_at_trx_commit", "innodb_io_capacity", "sync_binlog",
		"max_connections", "large_pages", "thread_handling"}
)

// Fingerprint describes the conditions of a trial: the knobs' read-back
// values plus THP, huge pages (total/free/rsvd/surp per size), scheduler
// and read_ahead of the data devices, CPU governor (or "none"), load
// average, the database's key settings; steal and I/O wait over the trial
// are added by Interval. On error the Fingerprint holds what could be read.
//
// It reads these files itself rather than through facts.GatherHost: it runs
// before and after every trial, and the memory and system domains cost
// several times more (getconf, THP boot files, NUMA; see the benchmarks),
// while keeping each raw value as read, absent when unreadable.
func (a *Applier) Fingerprint(ctx context.Context, names []string) (Fingerprint, error) {
	fp := Fingerprint{}
	var errs []error
	if len(names) > 0 {
		cur, err := a.Current(ctx, names)
		errs = append(errs, err)
		for k, v := range cur {
			fp[k] = v
		}
	}
	h := a.h
	for _, k := range []string{"enabled", "defrag"} {
		if v, err := h.ReadString(thpDir + "/" + k); err == nil {
			fp["thp."+k] = journal.Current(v)
		}
	}
	if dirs, err := h.ReadDir(hugeDir); err == nil {
		for _, d := range dirs {
			kb, ok := host.HugePageSizeKB(d)
			if !ok {
				continue
			}
			key := "hugepages." + hugeSizeName(kb)
			for _, f := range []struct{ key, file string }{{"total", "nr_hugepages"}, {"free", "free_hugepages"},
				{"rsvd", "resv_hugepages"}, {"surp", "surplus_hugepages"}} {
				if v, err := h.ReadString(hugeDir + "/" + d + "/" + f.file); err == nil {
					fp[key+"."+f.key] = v
				}
			}
		}
	}
	if a.t.DataDir != "" {
		devs, err := a.dataDevices()
		if err != nil {
			fp["disk.devices"] = "none"
		} else {
			fp["disk.devices"] = strings.Join(devs, " ")
			for _, d := range devs {
				for _, attr := range []string{"scheduler", "read_ahead_kb"} {
					if v, err := h.ReadString("/sys/block/" + d + "/queue/" + attr); err == nil {
						fp["disk."+d+"."+attr] = journal.Current(v)
					}
				}
			}
		}
	}
	fp["cpu.governor"] = governors(h)
	if v, err := h.ReadString("/sys/devices/system/cpu/online"); err == nil {
		fp["cpu.online"] = v
	}
	if v, err := h.ReadString("/proc/sys/kernel/osrelease"); err == nil {
		fp["kernel.release"] = v
	}
	if la, err := h.LoadAvg(); err == nil {
		fp["load.1"] = strconv.FormatFloat(la.Load1, 'f', 2, 64)
		fp["load.5"] = strconv.FormatFloat(la.Load5, 'f', 2, 64)
		fp["load.15"] = strconv.FormatFloat(la.Load15, 'f', 2, 64)
	}
	// The target holds a connection for its own engine only.
	if a.t.PG != nil {
		errs = append(errs, a.fingerprintPG(ctx, fp))
	}
	if a.t.MySQL != nil {
		errs = append(errs, a.fingerprintMySQL(ctx, fp))
	}
	return fp, errors.Join(errs...)
}

func (a *Applier) fingerprintPG(ctx context.Context, fp Fingerprint) error {
	c, err := a.pgConnect(ctx)
	if err != nil {
		return fmt.Errorf("fingerprint: %w", err)
	}
	defer c.Close(context.Background())
	for _, n := range pgKeySettings {
		var v *string
		if err := c.QueryRow(ctx, "SELECT current_setting($1, true)", n).Scan(&v); err != nil {
			return fmt.Errorf("fingerprint: %s: %w", n, err)
		}
		if v != nil {
			fp["pg."+n] = *v
		}
	}
	return nil
}

func (a *Applier) fingerprintMySQL(ctx context.Context, fp Fingerprint) error {
	db, _, err := a.myConnect(ctx)
	if err != nil {
		return fmt.Errorf("fingerprint: %w", err)
	}
	defer db.Close()
	for _, n := range mysqlKeySettings {
		var v *string
		// A variable this server does not have is left out.
		if db.QueryRowContext(ctx, "SELECT @@GLOBAL."+myIdent(n)).Scan(&v) == nil && v != nil {
			fp["mysql."+n] = *v
		}
	}
	return nil
}

// governors lists the cpufreq governors in use ("performance", or
// "ondemand powersave" when CPUs differ); "none" without cpufreq (most
// virtual machines).
func governors(h *host.Host) string {
	cpus, err := h.ReadDir("/sys/devices/system/cpu")
	if err != nil {
		return "none"
	}
	seen := map[string]bool{}
	for _, c := range cpus {
		if !strings.HasPrefix(c, "cpu") {
			continue
		}
		if _, err := strconv.Atoi(c[3:]); err != nil {
			continue
		}
		if g, err := h.ReadString("/sys/devices/system/cpu/" + c + "/cpufreq/scaling_governor"); err == nil && g != "" {
			seen[g] = true
		}
	}
	if len(seen) == 0 {
		return "none"
	}
	return strings.Join(sortedKeys(seen), " ")
}

// CPUTimes is the kernel's CPU time counters summed over all CPUs
// (/proc/stat), in seconds: the start (or end) of an interval.
type CPUTimes struct {
	Steal, IOWait, Total float64
}

// ReadCPUTimes reads the CPU time counters now.
func ReadCPUTimes(h *host.Host) (CPUTimes, error) {
	st, err := h.KernelStat()
	if err != nil {
		return CPUTimes{}, fmt.Errorf("/proc/stat: %s", host.Explain(err))
	}
	c := st.CPUTotal
	// Guest time is already counted in user time.
	total := c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	return CPUTimes{Steal: c.Steal, IOWait: c.Iowait, Total: total}, nil
}

// CPUTimes reads the host's CPU time counters: keep the result at the
// start of a trial and pass it to Interval at its end.
func (a *Applier) CPUTimes() (CPUTimes, error) { return ReadCPUTimes(a.h) }

// StealSince returns the share of CPU time, in percent, the hypervisor
// gave to other guests between prev and c: time the benchmark wanted and
// did not get. 0 when no time passed.
func (c CPUTimes) StealSince(prev CPUTimes) float64 {
	return share(c.Steal-prev.Steal, c.Total-prev.Total)
}

// IOWaitSince returns the share of CPU time, in percent, spent idle with
// I/O outstanding between prev and c.
func (c CPUTimes) IOWaitSince(prev CPUTimes) float64 {
	return share(c.IOWait-prev.IOWait, c.Total-prev.Total)
}

func share(part, total float64) float64 {
	if total <= 0 || part < 0 {
		return 0
	}
	return 100 * part / total
}

// Interval adds to fp the figures measured over a trial that began at
// start: interval.steal_percent and interval.iowait_percent. Drift ignores
// them (a trial with heavy steal is judged by its caller, not compared).
func (a *Applier) Interval(fp Fingerprint, start CPUTimes) error {
	now, err := a.CPUTimes()
	if err != nil {
		return err
	}
	fp["interval.steal_percent"] = strconv.FormatFloat(now.StealSince(start), 'f', 2, 64)
	fp["interval.iowait_percent"] = strconv.FormatFloat(now.IOWaitSince(start), 'f', 2, 64)
	return nil
}

// volatile reports the keys whose change is not drift: the load, pages
// taken from a pool while the database runs, interval figures.
func volatile(key string) bool {
	if strings.HasPrefix(key, "load.") || strings.HasPrefix(key, "interval.") {
		return true
	}
	if strings.HasPrefix(key, "hugepages.") {
		for _, s := range []string{".free", ".rsvd", ".surp"} {
			if strings.HasSuffix(key, s) {
				return true
			}
		}
	}
	return false
}

// Drift lists the keys whose values differ where they must not (knob
// values, THP, scheduler, huge page totals, governor, database settings)
// — ignoring the volatile ones (load, free pages, interval figures); each
// entry is "key: was X, now Y", sorted by key. A key only one side has
// drifted too ("(absent)").
func Drift(expected, got Fingerprint) []string {
	keys := map[string]bool{}
	for k := range expected {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var out []string
	for _, k := range sortedKeys(keys) {
		if volatile(k) {
			continue
		}
		was, ok1 := expected[k]
		now, ok2 := got[k]
		if ok1 && ok2 && was == now {
			continue
		}
		if !ok1 {
			was = "(absent)"
		}
		if !ok2 {
			now = "(absent)"
		}
		out = append(out, fmt.Sprintf("%s: was %s, now %s", k, was, now))
	}
	sort.Strings(out)
	return out
}
