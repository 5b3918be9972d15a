package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dbhost/dbhost/internal/engine/mongo/mongotest"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Memory scenarios: THP, dirty thresholds, overcommit, zone reclaim,
// min_free_kbytes, swap, huge pages with private PostgreSQL and MariaDB
// servers. Every kernel knob goes through the journal; files written under
// /etc and the swap file are removed by cleanups. (The machine's shared
// PostgreSQL, MariaDB and Redis keep running and are recorded too.)

const (
	thpDir       = "/sys/kernel/mm/transparent_hugepage"
	hugepages1G  = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
	recordTmpf   = "/etc/tmpfiles.d/dbhost-record-thp.conf"
	recordUnit   = "dbhost-record-disable-thp.service"
	recordSwap   = "/var/tmp/dbhost-record.swap"
	pgHugeBuffer = "512MB"
)

// myLargePages is a private MariaDB whose buffer pool wants huge pages.
var myLargePages = testdb.Options{Settings: map[string]string{"large-pages": "ON", "innodb-buffer-pool-size": "256M"}}

func init() {
	register(Scenario{
		Name:  "mem-thp-never",
		Note:  "THP enabled=never and defrag=never, set at runtime only (nothing persists them)",
		Setup: thpSetup("never", "never"),
	})
	register(Scenario{
		Name: "mem-thp-never-persisted",
		Note: "THP enabled=never and defrag=never at runtime, persisted by /etc/tmpfiles.d/dbhost-record-thp.conf",
		Setup: func(r *Run) error {
			if err := thp(r, "never", "never"); err != nil {
				return err
			}
			return writeFile(r, recordTmpf, "# written by tools/record\nw "+thpDir+"/enabled - - - - never\nw "+thpDir+"/defrag - - - - never\n", 0o644)
		},
	})
	register(Scenario{
		Name: "mem-thp-unit",
		Note: "THP enabled=never and defrag=never at runtime, persisted by an enabled systemd unit /etc/systemd/system/dbhost-record-disable-thp.service (the disable-thp recipe)",
		Setup: func(r *Run) error {
			if err := thp(r, "never", "never"); err != nil {
				return err
			}
			unit := "[Unit]\nDescription=Disable Transparent Huge Pages (dbhost record)\nDefaultDependencies=no\nBefore=sysinit.target local-fs.target\n\n" +
				"[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo never > " + thpDir + "/enabled && echo never > " + thpDir + "/defrag'\n\n" +
				"[Install]\nWantedBy=multi-user.target\n"
			if err := writeFile(r, "/etc/systemd/system/"+recordUnit, unit, 0o644); err != nil {
				return err
			}
			// multi-user.target.wants exists on this VM: only the link is new.
			link := filepath.Join("/etc/systemd/system/multi-user.target.wants", recordUnit)
			if err := os.Symlink("/etc/systemd/system/"+recordUnit, link); err != nil {
				return err
			}
			r.Cleanup(func() { os.Remove(link) })
			return nil
		},
	})
	register(Scenario{
		Name:  "mem-thp-always",
		Note:  "THP enabled=always and defrag=always (khugepaged max_ptes_none stays at its default 511)",
		Setup: thpSetup("always", "always"),
	})
	register(Scenario{
		Name:  "mem-thp-always-ptes0",
		Note:  "THP enabled=always, defrag=defer+madvise, khugepaged max_ptes_none=0 (MongoDB 8's settings)",
		Setup: thpMongo8,
	})
	register(Scenario{
		Name:  "mem-dirty-high",
		Note:  "vm.dirty_ratio=40 and vm.dirty_background_ratio=30 on a 24 GiB host",
		Setup: sysctlSetup("vm.dirty_ratio", "40", "vm.dirty_background_ratio", "30"),
	})
	register(Scenario{
		Name:  "mem-dirty-bg-equal",
		Note:  "vm.dirty_ratio=10 and vm.dirty_background_ratio=10: the background threshold is not below the dirty threshold",
		Setup: sysctlSetup("vm.dirty_ratio", "10", "vm.dirty_background_ratio", "10"),
	})
	register(Scenario{
		Name:  "mem-dirty-low",
		Note:  "vm.dirty_ratio=10 and vm.dirty_background_ratio=3 (Red Hat's values for large hosts)",
		Setup: sysctlSetup("vm.dirty_ratio", "10", "vm.dirty_background_ratio", "3"),
	})
	register(Scenario{
		Name:  "mem-overcommit-2",
		Note:  "vm.overcommit_memory=2 with the default overcommit_ratio 50 (CommitLimit about 12 GB, far above what the host commits), shared PostgreSQL and Redis running",
		Setup: sysctlSetup("vm.overcommit_memory", "2"),
	})
	register(Scenario{
		Name:  "mem-overcommit-1",
		Note:  "vm.overcommit_memory=1, shared PostgreSQL (postmaster oom_score_adj 0) and Redis running",
		Setup: sysctlSetup("vm.overcommit_memory", "1"),
	})
	register(Scenario{
		Name: "mem-overcommit-redis-fork",
		Note: "private PostgreSQL and a private Redis holding about 1 GB (DEBUG POPULATE); vm.overcommit_memory=2 with overcommit_kbytes set so CommitLimit exceeds Committed_AS by 90 % of the Redis resident size: its BGSAVE fork would not fit",
		Setup: func(r *Run) error {
			r.Postgres(testdb.Options{})
			rd := r.Redis(testdb.Options{Settings: map[string]string{"enable-debug-command": "local"}})
			if err := r.Command("redis-cli", "-s", rd.Socket, "DEBUG", "POPULATE", "1000000", "key", "1000"); err != nil {
				return err
			}
			rss, err := statusKB(rd.PID, "VmRSS")
			if err != nil {
				return err
			}
			committed, err := meminfoKB("Committed_AS")
			if err != nil {
				return err
			}
			// Writing overcommit_kbytes zeroes overcommit_ratio and the
			// reverse: journal the ratio first so the restore (newest first)
			// ends by writing it back.
			if err := r.Sysctl("vm.overcommit_ratio", "50"); err != nil {
				return err
			}
			if err := r.Sysctl("vm.overcommit_kbytes", strconv.FormatUint(committed+rss*9/10, 10)); err != nil {
				return err
			}
			return r.Sysctl("vm.overcommit_memory", "2")
		},
	})
	register(Scenario{
		Name:   "mem-nonroot",
		Note:   "private PostgreSQL (shared_buffers=512MB, huge_pages=try) and private MariaDB (large-pages), 20 huge pages reserved (too few for either), collected as user nobody: their maps, smaps_rollup and numa_maps are unreadable",
		AsUser: "nobody",
		Setup: func(r *Run) error {
			if err := r.Sysctl("vm.nr_hugepages", "20"); err != nil {
				return err
			}
			r.Postgres(testdb.Options{Settings: map[string]string{"shared_buffers": pgHugeBuffer, "huge_pages": "try"}})
			r.MariaDB(myLargePages)
			return nil
		},
	})
	register(Scenario{
		Name: "mem-redis-big",
		Note: "a private Redis holding about 3.5 GB (DEBUG POPULATE 3000000 keys of 1000 bytes); base of the derived numa-* fixtures",
		Setup: func(r *Run) error {
			rd := r.Redis(testdb.Options{Settings: map[string]string{"enable-debug-command": "local"}})
			return r.Command("redis-cli", "-s", rd.Socket, "DEBUG", "POPULATE", "3000000", "key", "1000")
		},
	})
	register(Scenario{
		Name: "mem-mongo-maxmap",
		Note: "a mongod 8.0.4 with an open-files limit of 20000 (this VM's ceiling: 16000 connections, 32000 map areas wanted) and vm.max_map_count lowered to 30000" + standInNote,
		Setup: func(r *Run) error {
			// The VM refuses to raise a hard open-files limit above 20000,
			// so the map count comes down instead.
			if err := r.Sysctl("vm.max_map_count", "30000"); err != nil {
				return err
			}
			mongotest.Start(r.tb, mongotest.Options{Version: "8.0.4"})
			return nil
		},
	})
	register(Scenario{
		Name: "mem-mongo8-thp",
		Note: "a mongod 8.0.4 with MongoDB 8's THP settings (enabled=always, defrag=defer+madvise, khugepaged max_ptes_none=0) next to the shared PostgreSQL and MariaDB, which want THP off" + standInNote,
		Setup: func(r *Run) error {
			if err := thpMongo8(r); err != nil {
				return err
			}
			mongotest.Start(r.tb, mongotest.Options{Version: "8.0.4"})
			return nil
		},
	})
	register(Scenario{
		Name: "mem-commit-near",
		Note: "vm.overcommit_memory=2 (ratio 50) while the recorder holds an untouched private writable mapping that brings Committed_AS to about 93 % of CommitLimit",
		Setup: func(r *Run) error {
			total, err := meminfoKB("MemTotal")
			if err != nil {
				return err
			}
			committed, err := meminfoKB("Committed_AS")
			if err != nil {
				return err
			}
			limit := total * 50 / 100 // no swap, no huge pages, ratio 50
			target := limit * 93 / 100
			if target <= committed {
				return fmt.Errorf("Committed_AS %d kB already above the target %d kB", committed, target)
			}
			// A private writable mapping is charged in full at mmap time but
			// never touched, so it costs no RAM.
			mem, err := syscall.Mmap(-1, 0, int((target-committed)<<10), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
			if err != nil {
				return fmt.Errorf("mmap: %w", err)
			}
			r.Cleanup(func() { syscall.Munmap(mem) })
			return r.Sysctl("vm.overcommit_memory", "2")
		},
	})
	register(Scenario{
		Name:  "mem-zone-reclaim-1",
		Note:  "vm.zone_reclaim_mode=1 on this single-node VM",
		Setup: sysctlSetup("vm.zone_reclaim_mode", "1"),
	})
	register(Scenario{
		Name:  "mem-minfree-low",
		Note:  "vm.min_free_kbytes=8192 on a 24 GiB host (kernel formula about 19900)",
		Setup: sysctlSetup("vm.min_free_kbytes", "8192"),
	})
	register(Scenario{
		Name:  "mem-minfree-high",
		Note:  "vm.min_free_kbytes=2097152 (2 GiB, 8.5 % of RAM)",
		Setup: sysctlSetup("vm.min_free_kbytes", "2097152"),
	})
	register(Scenario{
		Name: "mem-swapfile",
		Note: "a 1 GiB swap file /var/tmp/dbhost-record.swap on ext4 is active (mkswap, swapon; swapoff and removed afterwards)",
		Setup: func(r *Run) error {
			r.Cleanup(func() { os.Remove(recordSwap) })
			if err := r.Command("dd", "if=/dev/zero", "of="+recordSwap, "bs=1M", "count=1024", "status=none"); err != nil {
				return err
			}
			if err := os.Chmod(recordSwap, 0o600); err != nil {
				return err
			}
			if err := r.Command("mkswap", recordSwap); err != nil {
				return err
			}
			if err := r.Command("swapon", recordSwap); err != nil {
				return err
			}
			r.Cleanup(func() { exec.Command("swapoff", recordSwap).Run() })
			return nil
		},
	})
	register(Scenario{
		Name:  "mem-shmmax-small",
		Note:  "kernel.shmmax=32, below the 56-byte System V interlock segment of the running PostgreSQL servers",
		Setup: sysctlSetup("kernel.shmmax", "32"),
	})
	register(Scenario{
		Name:  "mem-hugepages-pg-try0",
		Note:  "private PostgreSQL with shared_buffers=512MB and huge_pages=try, no huge pages reserved: it runs on 4 kB pages",
		Setup: postgresSetup(testdb.Options{Settings: map[string]string{"shared_buffers": pgHugeBuffer, "huge_pages": "try"}}),
	})
	register(Scenario{
		Name: "mem-hugepages-pg-on",
		Note: "vm.nr_hugepages set to the private PostgreSQL's shared_memory_size_in_huge_pages + 1, and the server (shared_buffers=512MB) started with huge_pages=on: its shared memory is a hugetlb mapping",
		Setup: func(r *Run) error {
			need, err := pgHugePagesNeeded(r)
			if err != nil {
				return err
			}
			if err := r.Sysctl("vm.nr_hugepages", strconv.Itoa(need+1)); err != nil {
				return err
			}
			r.Postgres(testdb.Options{Settings: map[string]string{"shared_buffers": pgHugeBuffer, "huge_pages": "on"}})
			return nil
		},
	})
	register(Scenario{
		Name:  "mem-hugepages-pg-off-large",
		Note:  "private PostgreSQL with shared_buffers=8GB and huge_pages=off (the buffers are mapped, not touched)",
		Setup: postgresSetup(testdb.Options{Settings: map[string]string{"shared_buffers": "8GB", "huge_pages": "off"}}),
	})
	register(Scenario{
		Name: "mem-hugepages-pg-pending",
		Note: "private PostgreSQL (shared_buffers=512MB) started with the default huge_pages=try and no huge pages, then ALTER SYSTEM SET huge_pages = on (pending restart) and pg_hba switched to peer so root reads its settings from the files: the next restart will fail",
		Setup: func(r *Run) error {
			s := r.Postgres(testdb.Options{Settings: map[string]string{"shared_buffers": pgHugeBuffer}})
			if err := psql(r, s, "ALTER SYSTEM SET huge_pages = on"); err != nil {
				return err
			}
			return pgHBA(s, "local all all peer\n")
		},
	})
	register(Scenario{
		Name: "mem-hugepages-unused",
		Note: "two 1 GiB huge pages reserved (hugepages-1048576kB/nr_hugepages=2) that no process maps",
		Setup: func(r *Run) error {
			if err := r.Set(hugepages1G, "2"); err != nil {
				return err
			}
			if n, _ := os.ReadFile(hugepages1G); strings.TrimSpace(string(n)) != "2" {
				return fmt.Errorf("the kernel could only reserve %q 1 GiB pages", strings.TrimSpace(string(n)))
			}
			return nil
		},
	})
	register(Scenario{
		Name: "mem-hugepages-mariadb",
		Note: "private MariaDB with large-pages and innodb_buffer_pool_size=256M, 160 huge pages of 2 MiB reserved (vm.nr_hugepages=160): InnoDB maps its buffer pool with MAP_HUGETLB",
		Setup: func(r *Run) error {
			if err := r.Sysctl("vm.nr_hugepages", "160"); err != nil {
				return err
			}
			r.MariaDB(myLargePages)
			return nil
		},
	})
	register(Scenario{
		Name:  "mem-hugepages-mariadb-nopages",
		Note:  "private MariaDB with large-pages and innodb_buffer_pool_size=256M but no huge pages reserved: InnoDB falls back to conventional memory",
		Setup: mariaDBSetup(myLargePages),
	})
}

// thp sets THP enabled and defrag.
func thp(r *Run, enabled, defrag string) error {
	if err := r.Set(thpDir+"/enabled", enabled); err != nil {
		return err
	}
	return r.Set(thpDir+"/defrag", defrag)
}

// thpMongo8 applies MongoDB 8's THP settings: enabled=always,
// defrag=defer+madvise, khugepaged max_ptes_none=0.
func thpMongo8(r *Run) error {
	if err := thp(r, "always", "defer+madvise"); err != nil {
		return err
	}
	return r.Set(thpDir+"/khugepaged/max_ptes_none", "0")
}

// writeFile creates a file that must not exist yet and removes it after
// collection.
func writeFile(r *Run, path, content string, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	r.Cleanup(func() { os.Remove(path) })
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pgHugePagesNeeded starts a throw-away private PostgreSQL with the
// scenario's shared_buffers, asks it for shared_memory_size_in_huge_pages
// (PostgreSQL 15+) and stops it.
func pgHugePagesNeeded(r *Run) (int, error) {
	s := r.Postgres(testdb.Options{Settings: map[string]string{"shared_buffers": pgHugeBuffer, "huge_pages": "off"}})
	defer s.Stop(r.tb)
	out, err := exec.Command("psql", "-X", "-At", "-h", s.Socket, "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "postgres",
		"-c", "SHOW shared_memory_size_in_huge_pages").Output()
	if err != nil {
		return 0, fmt.Errorf("psql: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("shared_memory_size_in_huge_pages: %q", strings.TrimSpace(string(out)))
	}
	return n, nil
}

// meminfoKB reads a /proc/meminfo field in kB.
func meminfoKB(field string) (uint64, error) {
	return procKB("/proc/meminfo", field)
}

// statusKB reads a /proc/PID/status field in kB.
func statusKB(pid int, field string) (uint64, error) {
	return procKB(fmt.Sprintf("/proc/%d/status", pid), field)
}

func procKB(file, field string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == field {
			f := strings.Fields(v)
			if len(f) > 0 {
				return strconv.ParseUint(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s: no %s", file, field)
}
