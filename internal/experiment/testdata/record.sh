#!/bin/sh
# Records the host files the experiment unit tests read (HostFacts and the
# presets built on them) from the machine this runs on into hosts/live,
# and derives hosts/no1g: the same host with a kernel that offers no 1 GB
# huge pages (no hugepages-1048576kB directory).
#
# hosts/pg holds the pid file of the machine's PostgreSQL and its
# postmaster's cgroup file (how dbhost finds a server's systemd service);
# hosts/pg-systemd derives the same under systemd: the cgroup v2 path of
# the Debian service postgresql@15-main.service.
set -eu
cd "$(dirname "$0")"
rm -rf hosts
copy() {
	for f in "$@"; do
		mkdir -p "hosts/live$(dirname "$f")"
		cat "$f" >"hosts/live$f"
	done
}
copy /proc/meminfo /proc/sys/kernel/osrelease /proc/sys/kernel/hostname /sys/devices/system/cpu/online \
	/proc/sys/vm/dirty_bytes /proc/sys/vm/dirty_background_bytes
for d in /sys/kernel/mm/hugepages/hugepages-*; do
	copy "$d/nr_hugepages"
done
cp -r hosts/live hosts/no1g
rm -rf hosts/no1g/sys/kernel/mm/hugepages/hugepages-1048576kB

pidfile=$(ls /var/run/postgresql/*.pid | head -n1)
pid=$(head -n1 "$pidfile")
mkdir -p "hosts/pg$(dirname "$pidfile")" "hosts/pg/proc/$pid"
cat "$pidfile" >"hosts/pg$pidfile"
cat "/proc/$pid/cgroup" >"hosts/pg/proc/$pid/cgroup"
cp -r hosts/pg hosts/pg-systemd
printf '0::/system.slice/system-postgresql.slice/postgresql@15-main.service\n' >"hosts/pg-systemd/proc/$pid/cgroup"
