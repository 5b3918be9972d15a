#!/usr/bin/env bash
# Side-by-side: what one Prometheus scrape costs from dbhost serve and from
# node_exporter on this host. Both run on loopback on free ports; N scrapes
# each (default 200), interleaved, after a warm-up. Reports the median and
# 90th percentile wall time of a scrape (curl's time_total: request to last
# byte, without curl's own start-up), the payload and the series count, and
# the ratio of the medians. Installs prometheus-node-exporter from the
# distribution when missing. Needs root (dbhost reads root-only state).
#
#   sudo bench/compare-scrape.sh [SCRAPES]
#
# Writes bench/results/scrape-<date>.md and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-200}
need_root
need=()
command -v prometheus-node-exporter >/dev/null || need+=(prometheus-node-exporter)
command -v curl >/dev/null || need+=(curl)
install_packages "${need[@]}"
[ -x ./dbhost ] || make build >/dev/null

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

dport=$(free_port)
./dbhost serve --web.listen-address "127.0.0.1:$dport" --interval 60s >"$tmp/dbhost.log" 2>&1 &
pids+=($!)
nport=$(free_port)
# node_exporter as Debian ships it, with its default collectors.
prometheus-node-exporter --web.listen-address "127.0.0.1:$nport" >"$tmp/node.log" 2>&1 &
pids+=($!)

declare -A url=([dbhost]="http://127.0.0.1:$dport/metrics" [node_exporter]="http://127.0.0.1:$nport/metrics")
tools=(dbhost node_exporter)
# dbhost serves its first audit's result once /healthz says ok.
for _ in $(seq 1 300); do
  curl -fs "http://127.0.0.1:$dport/healthz" >/dev/null 2>&1 && curl -fs "${url[node_exporter]}" >/dev/null 2>&1 && break
  sleep 0.1
done
for t in "${tools[@]}"; do for _ in 1 2 3 4 5; do curl -fs -o /dev/null "${url[$t]}"; done; done
for _ in $(seq 1 "$n"); do
  for t in "${tools[@]}"; do
    s=$(curl -fs -o "$tmp/$t.body" -w '%{time_total}' "${url[$t]}")
    echo "$t $s" >>"$tmp/samples"
  done
done

pct() { sort -g | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p+0.999); if (i<1) i=1; print a[i]}'; }
mkdir -p bench/results
report="bench/results/scrape-$(date -u +%Y%m%d-%H%M%S).md"
{
  echo "# One scrape: dbhost serve vs node_exporter on $(hostname)"
  echo
  echo "$(date -u +%FT%TZ), kernel $(uname -r), $(nproc) CPUs, $n interleaved scrapes each after 5 warm-up scrapes;"
  echo "$(prometheus-node-exporter --version 2>&1 | head -n1); dbhost $(./dbhost version | cut -d' ' -f2)."
  echo
  echo "| exporter | median scrape (ms) | p90 (ms) | payload (bytes) | series |"
  echo "|---|---:|---:|---:|---:|"
  for t in "${tools[@]}"; do
    med=$(awk -v t="$t" '$1==t {printf "%.3f\n", $2*1000}' "$tmp/samples" | pct 0.5)
    p90=$(awk -v t="$t" '$1==t {printf "%.3f\n", $2*1000}' "$tmp/samples" | pct 0.9)
    echo "$t $med" >>"$tmp/medians"
    echo "| $t | $med | $p90 | $(wc -c <"$tmp/$t.body") | $(grep -vc '^#' "$tmp/$t.body") |"
  done
  echo
  awk '{m[$1]=$2} END {printf "dbhost / node_exporter, median scrape time: %.3f\n", m["dbhost"]/m["node_exporter"]}' "$tmp/medians"
  echo "dbhost series of its own (dbhost_*): $(grep -c '^dbhost_' "$tmp/dbhost.body"); its audit took $(awk '/^dbhost_audit_duration_seconds/ {printf "%.0f ms", $2*1000}' "$tmp/dbhost.body") in the background."
} >"$report"
cat "$report"
