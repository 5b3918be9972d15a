#!/usr/bin/env bash
# Side-by-side: a full audit of this host by dbhost, mysqltuner and
# pt-summary, interleaved, N runs each (default 10), in the same run.
# Reports the median wall time and median peak RSS of each, and whether the
# run succeeded. Needs root (all three read root-only state) and installs
# mysqltuner and percona-toolkit from the distribution when missing.
#
#   sudo bench/compare.sh [RUNS]
#
# Writes bench/results/compare-<date>.md and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
runs=${1:-10}
need_root
need=()
command -v mysqltuner >/dev/null || need+=(mysqltuner)
command -v pt-summary >/dev/null || need+=(percona-toolkit)
[ -x /usr/bin/time ] || need+=(time)
install_packages "${need[@]}"
[ -x ./dbhost ] || make build >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
declare -A cmd
cmd[dbhost]="./dbhost audit --format json --fail-on none"
cmd[mysqltuner]="mysqltuner --nocolor --noask --forcemem 24000"
cmd[pt-summary]="pt-summary"
tools=(dbhost mysqltuner pt-summary)

# One warm-up each: the first run pays for page-cache misses.
for t in "${tools[@]}"; do timeout 120 ${cmd[$t]} </dev/null >/dev/null 2>&1 || true; done
for i in $(seq 1 "$runs"); do
  for t in "${tools[@]}"; do
    rc=0
    # Wall time from bash's microsecond clock (time(1) rounds to 10 ms);
    # peak RSS from time(1).
    t0=$EPOCHREALTIME
    /usr/bin/time -f '%M' -o "$tmp/time" timeout 120 ${cmd[$t]} </dev/null >"$tmp/out" 2>"$tmp/err" || rc=$?
    t1=$EPOCHREALTIME
    rss=$(tail -n1 "$tmp/time")
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b-a}')
    echo "$t $wall $rss $rc" >>"$tmp/samples"
    # Keep the last output of each tool for the record.
    cp "$tmp/out" "$tmp/$t.out"; cp "$tmp/err" "$tmp/$t.err"
  done
done

mkdir -p bench/results
report="bench/results/compare-$(date -u +%Y%m%d-%H%M%S).md"
{
  echo "# Full audit of $(hostname): dbhost vs mysqltuner vs pt-summary"
  echo
  echo "$(date -u +%FT%TZ), kernel $(uname -r), $(nproc) CPUs, $runs interleaved runs each after one warm-up."
  echo "Databases running: $(pgrep -c -x postgres || true) postgres processes, $(pgrep -c -x mariadbd || true) mariadbd, $(pgrep -c -x redis-server || true) redis-server."
  echo
  echo "| tool | median wall (ms) | median peak RSS (MB) | failed runs | exit statuses |"
  echo "|---|---:|---:|---:|---|"
  for t in "${tools[@]}"; do
    w=$(awk -v t="$t" '$1==t {printf "%.1f\n", $2*1000}' "$tmp/samples" | median)
    r=$(awk -v t="$t" '$1==t {printf "%.1f\n", $3/1024}' "$tmp/samples" | median)
    codes=$(awk -v t="$t" '$1==t {print $4}' "$tmp/samples" | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')
    # dbhost exits 1 when it has findings; timeouts (124) and crashes count as failed.
    failed=$(awk -v t="$t" '$1==t && ($4>=2) {n++} END {print n+0}' "$tmp/samples")
    [ "$t" = dbhost ] || failed=$(awk -v t="$t" '$1==t && $4!=0 {n++} END {print n+0}' "$tmp/samples")
    echo "| $t | $w | $r | $failed | $codes|"
  done
  echo
  for t in mysqltuner pt-summary; do
    if awk -v t="$t" '$1==t && $4!=0 {bad=1} END {exit !bad}' "$tmp/samples"; then
      echo "$t failed; the end of its standard error (last run):"
      echo '```'
      grep -v '^\s*$' "$tmp/$t.err" | tail -n 4
      echo '```'
    fi
  done
  echo "dbhost findings (last run): $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["summary"]; print(s["fail"], "failed,", s["unknown"], "unknown,", s["pass"], "passed,", len(d["instances"]), "instances")' "$tmp/dbhost.out" 2>/dev/null || echo unreadable)"
} >"$report"
cat "$report"
