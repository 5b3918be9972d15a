#!/usr/bin/env bash
# Side-by-side: `dbhost mem --format json` and `smem -c "pid pss"` on the
# same host, interleaved, N runs each (default 10) after one warm-up.
# Reports the median wall time of each and compares PSS per process between
# the two. Needs root (both read every process's smaps) and installs smem
# from the distribution when missing.
#
# The host is given a private PostgreSQL (shared_buffers 64MB, loaded by
# pgbench and prewarmed) with 40 idle client connections (psql), and 60 idle
# processes: 50 static `memhog` processes that each hold 4 MiB of their own
# memory and share only their own binary, and 10 `sleep`. All are idle, so
# PSS holds still between the two tools' reads.
# One effect remains, and the report names it: smem is a Python program, and
# while it runs its interpreter maps libc, so every process that maps libc
# has its libc pages shared one more way (its PSS drops a little); dbhost is
# a static binary and shares nothing with them. The static memhogs share no
# page with either tool: their PSS must be equal.
#
#   sudo bench/compare-mem.sh [RUNS]
#
# Writes bench/results/compare-mem-<date>.md and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
runs=${1:-10}
need_root
need=()
command -v smem >/dev/null || need+=(smem)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
install_packages "${need[@]}"
[ -x ./dbhost ] || make build >/dev/null
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -x "$pgbin/postgres" ] || { echo "compare-mem.sh: no PostgreSQL server installed" >&2; exit 2; }

tmp=$(mktemp -d)
pids=()
pgdir=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$pgdir" ] && [ -f "$pgdir/data/postmaster.pid" ]; then
    (cd / && runuser -u postgres -- "$pgbin/pg_ctl" -D "$pgdir/data" -m fast -w stop) >/dev/null 2>&1 || true
  fi
  [ -n "$pgdir" ] && rm -rf "$pgdir"
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# A private PostgreSQL on a free port, its own socket directory.
pgrun() { (cd / && runuser -u postgres -- "$@"); }
pgdir=$(mktemp -d /tmp/dbhost-bench-pg-XXXXXX)
chown postgres: "$pgdir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pgrun "$pgbin/initdb" -D "$pgdir/data" -U postgres --auth=trust --no-sync >/dev/null
pgrun "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w start \
  -o "-p $port -k $pgdir -c listen_addresses=127.0.0.1 -c shared_buffers=64MB -c fsync=off" >/dev/null
pgrun "$pgbin/pgbench" -i -s 5 -q -h "$pgdir" -p "$port" -U postgres postgres >/dev/null 2>&1
pgrun "$pgbin/psql" -X -q -h "$pgdir" -p "$port" -U postgres -d postgres \
  -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm" -c "SELECT pg_prewarm('pgbench_accounts')" >/dev/null
pgpid=$(head -n1 "$pgdir/data/postmaster.pid")
# 40 idle client connections (what a database host has many of): psql
# sessions whose backends sleep in pg_sleep.
for _ in $(seq 40); do
  "$pgbin/psql" -X -q -h "$pgdir" -p "$port" -U postgres -d postgres -c "SELECT pg_sleep(3600)" >/dev/null 2>&1 &
  pids+=($!)
done

# 50 static processes holding 4 MiB each, and 10 sleep.
cat >"$tmp/memhog.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) { char *p = malloc(4 << 20); memset(p, 1, 4 << 20); pause(); return p[0]; }
EOF
gcc -O1 -static -o "$tmp/memhog" "$tmp/memhog.c"
for _ in $(seq 50); do "$tmp/memhog" & pids+=($!); done
hogs=("${pids[@]: -50}")
for _ in $(seq 10); do sleep 3600 & pids+=($!); done
printf '%s\n' "${hogs[@]}" >"$tmp/memhogs"
printf '%s\n' "${pids[@]: -10}" >"$tmp/sleeps"
for _ in $(seq 50); do
  [ "$(pgrep -c -P "$pgpid")" -ge 45 ] && break
  sleep 0.2
done
sleep 1
nproc_all=$(ls /proc | grep -c '^[0-9]')

tools=(dbhost smem)
run() {
  if [ "$1" = smem ]; then smem -c "pid pss"; else ./dbhost mem --format json; fi
}
for t in "${tools[@]}"; do run "$t" >/dev/null 2>&1 || true; done
for i in $(seq 1 "$runs"); do
  for t in "${tools[@]}"; do
    rc=0
    t0=$EPOCHREALTIME
    run "$t" </dev/null >"$tmp/$t.out" 2>"$tmp/$t.err" || rc=$?
    t1=$EPOCHREALTIME
    echo "$t $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b-a}') $rc" >>"$tmp/samples"
  done
done

mkdir -p bench/results
report="bench/results/compare-mem-$(date -u +%Y%m%d-%H%M%S).md"
dw=$(awk '$1=="dbhost" {printf "%.1f\n", $2*1000}' "$tmp/samples" | median)
sw=$(awk '$1=="smem" {printf "%.1f\n", $2*1000}' "$tmp/samples" | median)
fails=$(awk '$3!=0 {n++} END {print n+0}' "$tmp/samples")
{
  echo "# dbhost mem vs smem on $(hostname)"
  echo
  echo "$(date -u +%FT%TZ), kernel $(uname -r), $(nproc) CPUs, $runs interleaved runs each after one warm-up; $nproc_all processes (kernel threads included),"
  echo "a private PostgreSQL (pid $pgpid, shared_buffers 64MB, pgbench -i -s 5 prewarmed, $(pgrep -c -P "$pgpid") processes below the postmaster with 40 idle psql connections),"
  echo "50 static memhog and 10 sleep processes. Failed runs: $fails."
  echo
  echo "| tool | median wall (ms) |"
  echo "|---|---:|"
  echo "| \`dbhost mem --format json\` | $dw |"
  echo "| \`smem -c \"pid pss\"\` | $sw |"
  echo
  awk -v d="$dw" -v s="$sw" 'BEGIN {printf "dbhost is %.1fx faster.\n\n", s/d}'
  echo "PSS per process (the last run of each; dbhost in bytes, smem in KiB):"
  echo
  python3 - "$tmp/dbhost.out" "$tmp/smem.out" "$tmp/memhogs" "$tmp/sleeps" "$pgpid" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
dbh = {p["pid"]: p["pss_bytes"] / 1024 for p in doc["processes"]}
src = {p["pid"]: p["source"] for p in doc["processes"]}
maps = {}
for p in dbh:
    try:
        maps[p] = sum(1 for _ in open(f"/proc/{p}/maps"))
    except OSError:
        pass
parent = {p["pid"]: p["ppid"] for p in doc["processes"]}
sm = {}
for ln in open(sys.argv[2]).read().splitlines()[1:]:
    f = ln.split()
    if len(f) >= 2 and f[0].isdigit():
        sm[int(f[0])] = int(f[1])
hogs = [int(x) for x in open(sys.argv[3]).read().split()]
sleeps = [int(x) for x in open(sys.argv[4]).read().split()]
pg = int(sys.argv[5])
pgs = [p for p in dbh if p == pg or parent.get(p) == pg]
common = [p for p in dbh if p in sm]
print("| processes | compared | max relative difference | max difference (KiB) | equal within 1 KiB per mapping |")
print("|---|---:|---:|---:|---:|")
for name, group in (("static memhog (share nothing with either tool)", hogs),
                    ("sleep (maps libc)", sleeps),
                    ("the private PostgreSQL and its 40 idle backends (map libc)", pgs),
                    ("every process both report (also busy ones, which change between the reads)", common)):
    g = [p for p in group if p in dbh and p in sm and sm[p] > 0]
    if not g:
        print(f"| {name} | 0 | | | |")
        continue
    rel = max(abs(dbh[p] - sm[p]) / sm[p] for p in g)
    ab = max(abs(dbh[p] - sm[p]) for p in g)
    eq = sum(1 for p in g if 0 <= dbh[p] - sm[p] <= maps.get(p, 1))
    print(f"| {name} | {len(g)} | {100*rel:.2f} % | {ab:.1f} | {eq} of {len(g)} |")
print()
print("dbhost takes a process's PSS from smaps_rollup, which sums the exact per-page shares and rounds once;")
print("smem sums the PSS lines of smaps, each rounded down to a KiB, so it reads up to 1 KiB per mapping lower")
print(f"(processes read by dbhost from smaps_rollup: {sum(1 for s in src.values() if s == 'smaps_rollup')} of {len(src)}).")
EOF
} >"$report"
cat "$report"
