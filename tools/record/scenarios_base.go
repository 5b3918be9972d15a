package main

func init() {
	register(Scenario{
		Name: "baseline",
		Note: "this VM as provisioned: shared PostgreSQL 15, MariaDB 10.11 and Redis 7 running, kernel defaults (swappiness 60, THP madvise)",
	})
	register(Scenario{
		Name:   "baseline-nonroot",
		Note:   "the baseline host collected as user nobody: what a non-root audit cannot see",
		AsUser: "nobody",
	})
	register(Scenario{
		Name:  "mem-swappiness-1",
		Note:  "vm.swappiness set to 1",
		Setup: sysctlSetup("vm.swappiness", "1"),
	})
	register(Scenario{
		Name:  "mem-swappiness-0",
		Note:  "vm.swappiness set to 0",
		Setup: sysctlSetup("vm.swappiness", "0"),
	})
}
