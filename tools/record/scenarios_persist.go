package main

import (
	"strconv"

	"github.com/dbhost/dbhost/internal/testdb"
)

// Scenarios for what a reboot loses: values set at runtime only, against
// the same value persisted in a temporary /etc/sysctl.d file (removed
// afterwards), and a transient server (a private PostgreSQL started by hand
// from a temporary directory) beside huge pages.

const (
	persistSysctlFile = "/etc/sysctl.d/99-dbhost-record-persist.conf"
	// persistUnit is a unit name PostgreSQL 15's profile looks for (PGDG's);
	// the machine's PostgreSQL runs as postgresql@15-main and is unaffected.
	persistUnit = "/etc/systemd/system/postgresql-15.service"
)

func init() {
	register(Scenario{
		Name:  "persist-swappiness-runtime",
		Note:  "vm.swappiness=1 set at runtime (sysctl -w) and no sysctl.d file sets it: the next boot gives the kernel default 60",
		Setup: sysctlSetup("vm.swappiness", "1"),
	})
	register(Scenario{
		Name: "persist-swappiness-persisted",
		Note: "vm.swappiness=1 at runtime, persisted by " + persistSysctlFile + ", and kernel.pid_max set to the 4194304 that /usr/lib/sysctl.d/50-pid-max.conf persists: every judged parameter holds its next-boot value",
		Setup: func(r *Run) error {
			if err := r.Sysctl("kernel.pid_max", "4194304"); err != nil {
				return err
			}
			return persistedSysctl("vm.swappiness", "1")(r)
		},
	})
	register(Scenario{
		Name: "persist-hugepages-runtime-pg-on",
		Note: "vm.nr_hugepages set at runtime only to the private PostgreSQL's shared_memory_size_in_huge_pages + 1, the server (shared_buffers=512MB, huge_pages=on) maps them and a temporary unit " + persistUnit + " naming its data directory starts it at boot: the next boot gives 0 pages and it does not start",
		Setup: func(r *Run) error {
			return hugePagesPGOn(r, false)
		},
	})
	register(Scenario{
		Name: "persist-hugepages-persisted-pg-on",
		Note: "as persist-hugepages-runtime-pg-on, with vm.nr_hugepages also in " + persistSysctlFile,
		Setup: func(r *Run) error {
			return hugePagesPGOn(r, true)
		},
	})
	register(Scenario{
		Name: "persist-hugepages-transient",
		Note: "a transient private PostgreSQL (temporary directory, no unit, shared_buffers=512MB, huge_pages=try) started without huge pages, then vm.nr_hugepages set at runtime to its shared_memory_size_in_huge_pages + 1: the pages are idle and only a server that does not persist waits for them",
		Setup: func(r *Run) error {
			need, err := pgHugePagesNeeded(r)
			if err != nil {
				return err
			}
			r.Postgres(testdb.Options{Settings: map[string]string{"shared_buffers": pgHugeBuffer, "huge_pages": "try"}})
			return r.Sysctl("vm.nr_hugepages", strconv.Itoa(need+1))
		},
	})
}

// persistedSysctl sets a kernel parameter now and in a temporary sysctl.d
// file.
func persistedSysctl(name, value string) func(*Run) error {
	return func(r *Run) error {
		if err := r.Sysctl(name, value); err != nil {
			return err
		}
		return tempFile(r, persistSysctlFile, "# dbhost fixture\n"+name+" = "+value+"\n")
	}
}

// hugePagesPGOn reserves the pages a private PostgreSQL with huge_pages=on
// needs (plus one), starts it and writes a unit that would start it at boot
// (so it persists); persist also writes the count to a temporary sysctl.d
// file.
func hugePagesPGOn(r *Run, persist bool) error {
	need, err := pgHugePagesNeeded(r)
	if err != nil {
		return err
	}
	n := strconv.Itoa(need + 1)
	set := sysctlSetup("vm.nr_hugepages", n)
	if persist {
		set = persistedSysctl("vm.nr_hugepages", n)
	}
	if err := set(r); err != nil {
		return err
	}
	s := r.Postgres(testdb.Options{Settings: map[string]string{"shared_buffers": pgHugeBuffer, "huge_pages": "on"}})
	return tempFile(r, persistUnit, "# dbhost fixture\n[Unit]\nDescription=PostgreSQL (dbhost record)\n\n[Service]\nType=notify\nUser=postgres\n"+
		"ExecStart=/usr/lib/postgresql/15/bin/postgres -D "+s.DataDir+"\n\n[Install]\nWantedBy=multi-user.target\n")
}
