#!/bin/sh
# Records the host files the knob unit tests read, from the machine this
# runs on, into testdata/host (and two /proc/stat readings, 5 s apart and
# under load, into testdata/stat-a and testdata/stat-b).
set -eu
cd "$(dirname "$0")"
rm -rf host stat-a stat-b
copy() {
	for f in "$@"; do
		mkdir -p "host$(dirname "$f")"
		cat "$f" >"host$f"
	done
}
copy /proc/sys/vm/swappiness /proc/sys/vm/dirty_ratio /proc/sys/kernel/osrelease /proc/loadavg /proc/stat \
	/sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag \
	/sys/devices/system/cpu/online
for d in /sys/kernel/mm/hugepages/hugepages-*; do
	copy "$d/nr_hugepages" "$d/free_hugepages" "$d/resv_hugepages" "$d/surplus_hugepages"
done
for c in /sys/devices/system/cpu/cpu[0-9]*; do
	copy "$c/topology/core_id"
	if [ -e "$c/cpufreq/scaling_governor" ]; then copy "$c/cpufreq/scaling_governor"; fi
done
mkdir -p stat-a/proc stat-b/proc
cat /proc/stat >stat-a/proc/stat
timeout 5 sh -c 'while :; do :; done' &
timeout 5 sh -c 'while :; do :; done' &
wait
cat /proc/stat >stat-b/proc/stat
