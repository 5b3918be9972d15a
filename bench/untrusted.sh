#!/usr/bin/env bash
# What look-alike database servers cost dbhost. Any local user can start
# processes named postgres; this starts N of them (default 1000) as nobody,
# each with its own command line (-D DIR/dI -c port=I, every tenth data
# directory with a line break in its name), and measures each dbhost binary
# given (default ./dbhost, built when missing) without them and with them:
# the series and payload of a scrape of `dbhost serve`, the wall time of
# `dbhost audit --format json` (median of RUNS runs, default 5), and serve's
# resident memory after its first audit (now and at its peak) and that
# audit's own duration. Give an older build beside ./dbhost to compare.
# Needs root; installs nothing but curl from the distribution when missing.
# The dummies are built from internal/exporter/testdata/dummy (as
# TestUntrustedScrape builds them) and run in one process group, killed on
# exit and on signals, and by a watcher should this script be killed.
#
#   sudo bench/untrusted.sh [N [BINARY...]]
#
# Writes bench/results/untrusted-<date>.md and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-1000}
shift || true
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(./dbhost)
runs=${RUNS:-5}
need_root
need=()
command -v curl >/dev/null || need+=(curl)
install_packages "${need[@]}"
[ -x ./dbhost ] || make build >/dev/null

tmp=$(mktemp -d)
chmod 755 "$tmp"
serve_pid=
pgid=
session=
stop_dummies() {
  [ -n "$pgid" ] || return 0
  kill -KILL -- "-$pgid" 2>/dev/null || true
  wait "$session" 2>/dev/null || true
  while pgrep -g "$pgid" -x postgres >/dev/null; do sleep 0.1; done
  pgid=
}
cleanup() {
  [ -z "$serve_pid" ] || kill "$serve_pid" 2>/dev/null || true
  stop_dummies
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# The dummy: C where there is a compiler (static where the C library
# allows), else Go with one P and no GC.
src=internal/exporter/testdata/dummy
mkdir "$tmp/bin"
dummy="$tmp/bin/postgres"
if command -v cc >/dev/null && { cc -O2 -static -o "$dummy" "$src/dummy.c" 2>/dev/null || cc -O2 -o "$dummy" "$src/dummy.c"; }; then
  kind="C ($(file -b "$dummy" 2>/dev/null | grep -o 'statically linked\|dynamically linked' || echo cc))"
else
  (cd "$src/go" && go build -o "$dummy" .)
  kind="Go, GOMAXPROCS=1 GOGC=off"
fi

# start_dummies starts n dummies in a new session (one process group),
# with a watcher that kills the group when this script is gone.
start_dummies() {
  setsid bash -c '
    echo $$ >"$2/pgid"
    dirs=()
    for ((i = 0; i < $3; i++)); do
      dirs+=("$2/d$i")
      ((i % 10)) || dirs[i]+=$'"'"'\nlooks like a second line'"'"'
    done
    mkdir "${dirs[@]}" && chown 65534:65534 "${dirs[@]}"
    for ((i = 0; i < $3; i++)); do
      env -i GOMAXPROCS=1 GOGC=off setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$1" -D "${dirs[i]}" -c "port=$((20000 + i))" </dev/null >/dev/null 2>&1 &
    done
    while kill -0 "$4" 2>/dev/null; do sleep 1; done
    kill -KILL 0' _ "$dummy" "$tmp" "$n" "$$" &
  session=$!
  until [ -s "$tmp/pgid" ]; do sleep 0.05; done
  pgid=$(cat "$tmp/pgid")
  until [ "$(pgrep -c -g "$pgid" -x postgres)" -ge "$n" ]; do sleep 0.1; done
}

ms() { echo $(($(date +%s%N) / 1000000)); }
status_kb() { awk -v k="$2:" '$1==k {print $2}' "/proc/$1/status"; }

# measure BINARY DUMMIES adds one row to the table.
measure() {
  local bin=$1 dummies=$2 port body
  for ((r = 0; r < runs; r++)); do
    local t0
    t0=$(ms)
    "$bin" audit --format json >/dev/null 2>&1 || true # exit 1: findings fail
    echo $(($(ms) - t0)) >>"$tmp/audit"
  done
  port=$(free_port)
  "$bin" serve --web.listen-address "127.0.0.1:$port" --interval 1h >"$tmp/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 1200); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  body="$tmp/body"
  for _ in 1 2 3 4 5; do curl -fs -o "$body" "http://127.0.0.1:$port/metrics"; done
  local rss hwm
  rss=$(status_kb "$serve_pid" VmRSS)
  hwm=$(status_kb "$serve_pid" VmHWM)
  kill "$serve_pid"
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=
  printf '| %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f |\n' "$("$bin" version | cut -d' ' -f2)" "$dummies" \
    "$(grep -vc '^#' "$body")" "$(grep -c '^dbhost_' "$body")" "$(wc -c <"$body")" \
    "$(median <"$tmp/audit")" "$(awk '/^dbhost_audit_duration_seconds/ {printf "%.0f", $2*1000}' "$body")" \
    "$(echo "$rss" | awk '{print $1/1024}')" "$(echo "$hwm" | awk '{print $1/1024}')" >>"$tmp/rows"
  rm -f "$tmp/audit"
}

for b in "${bins[@]}"; do measure "$b" 0; done
t0=$(ms)
start_dummies
started=$(($(ms) - t0))
pss=$(for p in $(pgrep -g "$pgid" -x postgres); do awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup"; done | awk '{s+=$1} END {printf "%.1f", s/1024}')
for b in "${bins[@]}"; do measure "$b" "$n"; done
stop_dummies

mkdir -p bench/results
report="bench/results/untrusted-$(date -u +%Y%m%d-%H%M%S).md"
{
  echo "# dbhost with $n look-alike postgres processes on $(hostname)"
  echo
  echo "$(date -u +%FT%TZ), kernel $(uname -r), $(nproc) CPUs. $n dummies named postgres run as nobody, each"
  echo "with its own -D and -c port= (every tenth data directory with a line break): $kind, started in"
  echo "$started ms, $pss MB of memory together (PSS). Audit: median of $runs runs of \`dbhost audit --format json\`."
  echo "Serve: \`dbhost serve --interval 1h\`, after its first audit and five scrapes; RSS now and at its peak."
  echo
  echo "| dbhost | dummies | series | dbhost_* series | payload (bytes) | audit (ms) | serve's audit (ms) | serve RSS (MB) | serve peak RSS (MB) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  cat "$tmp/rows"
} >"$report"
cat "$report"
