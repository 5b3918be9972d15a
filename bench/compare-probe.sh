#!/usr/bin/env bash
# Side-by-side: this host's context-switch capacity as measured by
# `dbhost contention --probe` and by `sysbench threads` (the test the
# capacity figure of the knowledge base came from), interleaved, N runs each
# (default 5), each run SECS seconds (default 3). For both, the host's
# context switches per second are measured the same way: the /proc/stat ctxt
# difference over the run's wall time. dbhost's own figure (the best of its
# sub-runs) and sysbench's events per second are reported next to it.
#
#   sudo bench/compare-probe.sh [RUNS] [SECS]
#
# Writes bench/results/compare-probe-<date>.md and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
runs=${1:-5}
secs=${2:-3}
need_root
command -v sysbench >/dev/null || install_packages sysbench
cores=$(nproc)
threads=$((2 * cores))

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# This tree's dbhost, whatever ./dbhost is.
PATH=$PATH:/usr/local/go/bin CGO_ENABLED=0 ${GO:-go} build -o "$tmp/dbhost" ./cmd/dbhost
load0=$(cut -d' ' -f1-3 /proc/loadavg)
ctxt() { awk '/^ctxt / {print $2}' /proc/stat; }

# One run of a tool: wall time and ctxt difference around it.
measure() {
  local name=$1; shift
  local c0 c1 t0 t1 rc=0
  c0=$(ctxt); t0=$EPOCHREALTIME
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  t1=$EPOCHREALTIME; c1=$(ctxt)
  [ "$rc" -eq 0 ] || { echo "compare-probe.sh: $name failed ($rc):" >&2; cat "$tmp/err" >&2; exit 1; }
  awk -v a="$c0" -v b="$c1" -v x="$t0" -v y="$t1" 'BEGIN {printf "%.0f %.4f\n", (b-a)/(y-x), y-x}'
}

for i in $(seq 1 "$runs"); do
  read -r cs wall < <(measure dbhost "$tmp/dbhost" contention --probe --probe-time "${secs}s" --state "$tmp/probe.json" --format json)
  own=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f %.0f %.0f %.1f" % (d["switches_per_second"], d["switches_per_second_per_core"], d["handoffs_per_second"], d["cost_per_switch_ns"]))' "$tmp/out")
  echo "dbhost $cs $wall $own" >>"$tmp/samples"
  read -r cs wall < <(measure sysbench sysbench threads --threads="$threads" --time="$secs" run)
  ev=$(awk '/total number of events:/ {e=$NF} /total time:/ {t=$NF+0} END {printf "%.0f", e/t}' "$tmp/out")
  echo "sysbench $cs $wall $ev" >>"$tmp/samples"
done

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.0f\n", (a[NR/2]+a[NR/2+1])/2}'; }
col() { awk -v t="$1" -v c="$2" '$1==t {print $c}' "$tmp/samples" | median; }
k() { awk -v v="$1" 'BEGIN {printf "%.0f K", v/1000}'; }
mkdir -p bench/results
report="bench/results/compare-probe-$(date -u +%Y%m%d-%H%M%S).md"
d_cs=$(col dbhost 2); s_cs=$(col sysbench 2)
{
  echo "# Context-switch capacity of $(hostname): dbhost contention --probe vs sysbench threads"
  echo
  echo "$(date -u +%FT%TZ), kernel $(uname -r), $cores CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $runs interleaved runs of ${secs} s each."
  echo "Load average before: $load0, after: $(cut -d' ' -f1-3 /proc/loadavg) (the host is shared; interleaving gives both tools the same conditions)."
  echo
  echo "| tool | median switches/s (ctxt over the run) | per core | its own figure (median) | runs |"
  echo "|---|---:|---:|---|---:|"
  echo "| dbhost contention --probe | $(k "$d_cs") | $(k $((d_cs / cores))) | best sub-run $(k "$(col dbhost 4)")/s, $(k "$(col dbhost 5)")/s per core; $(k "$(col dbhost 6)") hand-offs/s; $(col dbhost 7) ns per switch | $runs |"
  echo "| sysbench threads --threads=$threads | $(k "$s_cs") | $(k $((s_cs / cores))) | $(col sysbench 4) events/s | $runs |"
  echo
  echo "Every run (switches/s from ctxt; dbhost: ctxt, wall, best sub-run total, per core, hand-offs/s, ns per switch; sysbench: ctxt, wall, events/s):"
  echo '```'
  cat "$tmp/samples"
  echo '```'
} >"$report"
cat "$report"
