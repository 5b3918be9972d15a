#!/usr/bin/env bash
# dbhost's speed beside what each command is measured against, in one run,
# paired and interleaved (after one warm-up each, rounds of A B then B A, so
# neither side always runs right after the other), RUNS rounds (default 20):
#
#   start-up    `dbhost version` vs a hello-world Go binary built here with
#               dbhost's own flags (static, stripped)
#   live audit  `dbhost audit --format json --fail-on none`, and the same with
#               --no-connect, vs pt-summary (in PT_RUNS rounds, default 5,
#               spread over the run: it takes seconds)
#   mem         `dbhost mem --format json` vs `smem -c "pid pss"` on the host as
#               it is, then with idle processes added (half static 4 MiB
#               holders, half sleep) until BUSY (default 250) processes run
#
# Per command: median and min–max wall time (a bare run), median CPU and
# page faults (perf stat) and peak RSS (GNU time); a ratio is the median of the ratios within each round, both
# sides measured under the same conditions. BEFORE=/path/to/old/dbhost adds
# an old build to every round, so one run gives before and after.
#
#   sudo bench/speed.sh [RUNS] [--update-readme]
#   sudo BEFORE=/tmp/dbhost-before bench/speed.sh      # before and after
#   sudo DBHOST=/tmp/dbhost-before bench/speed.sh      # another build alone
#
# Writes bench/results/speed-<date>.md and prints it, then the table for
# README.md's Performance section; --update-readme writes that table between
# the README's speed.sh markers. Needs root (the audit and both memory
# scanners read root-only state). Installs percona-toolkit, smem, time and
# gcc from the distribution when missing (and uses perf when it works); builds ./dbhost (make build) when
# missing and DBHOST is unset; needs go on PATH for the hello world.
set -euo pipefail
# Paths given relative to the caller's directory.
[ -z "${DBHOST:-}" ] || DBHOST=$(realpath -- "$DBHOST")
[ -z "${BEFORE:-}" ] || BEFORE=$(realpath -- "$BEFORE")
cd "$(dirname "$0")/.."
. bench/lib.sh

usage() { echo "usage: sudo [BEFORE=old-dbhost] [DBHOST=dbhost] bench/speed.sh [RUNS] [--update-readme]" >&2; exit 2; }
runs=20
update=0
for a in "$@"; do
  case $a in
    --update-readme) update=1 ;;
    '' | *[!0-9]*) usage ;;
    *) runs=$a ;;
  esac
done
[ "$runs" -ge 1 ] || usage
pt_runs=${PT_RUNS:-5}
busy=${BUSY:-250}
need_root
need=()
command -v pt-summary >/dev/null || need+=(percona-toolkit)
command -v smem >/dev/null || need+=(smem)
[ -x /usr/bin/time ] || need+=(time)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
install_packages "${need[@]}"
command -v go >/dev/null || { echo "speed.sh: needs go on PATH for the hello world" >&2; exit 2; }
if [ -z "${DBHOST:-}" ]; then
  [ -x ./dbhost ] || make build >/dev/null
  DBHOST=$PWD/dbhost
fi
for b in "$DBHOST" ${BEFORE:+"$BEFORE"}; do
  [ -x "$b" ] || { echo "speed.sh: $b is not an executable" >&2; exit 2; }
done

tmp=$(mktemp -d)
pids=()
new=""
cleanup() {
  [ -z "$new" ] || rm -f "$new"
  [ -z "${floor_dir:-}" ] || rm -rf "$floor_dir"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
# INT and TERM exit, and the exit stops the added processes.
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
say() { echo "speed.sh: $*" >&2; }

# The hello world, built as dbhost is (Makefile: CGO_ENABLED=0, -trimpath,
# -s -w), from a source written here: nothing prebuilt is shipped.
mkdir "$tmp/hello"
cat >"$tmp/hello/main.go" <<'EOF'
package main

import "fmt"

func main() { fmt.Println("hello, world") }
EOF
(cd "$tmp/hello" && go mod init hello >/dev/null 2>&1 &&
  CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/hello-world" .)

# The floor that dbhost's dependencies set: a program that imports every
# package dbhost's own packages import (standard library and third-party,
# for their init functions and their size) and does nothing: what is left
# above it is dbhost's own start-up. It is built in
# the module, from a directory removed on exit, so the versions are go.mod's.
floor_dir=$(mktemp -d bench/.floor-XXXXXX)
{
  echo "package main"
  echo
  echo "import ("
  echo '	"os"'
  # The imports of the packages of this module that the binary links.
  go list -deps -f '{{if .Module}}{{if eq .Module.Path "github.com/dbhost/dbhost"}}{{join .Imports "\n"}}{{end}}{{end}}' ./cmd/dbhost |
    grep -v -e '^github.com/dbhost/' -e '^os$' -e '^$' | sort -u | sed 's/.*/\t_ "&"/'
  echo ")"
  echo
  printf '%s\n' 'func main() { os.Stdout.WriteString("hello, world\n") }'
} >"$floor_dir/main.go"
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/deps-only" "./$floor_dir"
rm -rf "$floor_dir"

# A key is WORK.SIDE: new is $DBHOST, old is $BEFORE, peer the other tool.
argv_for() {
  local bin=$DBHOST
  case $1 in *.old) bin=$BEFORE ;; esac
  case $1 in
    start.peer) argv=("$tmp/hello-world") ;;
    start.floor) argv=("$tmp/deps-only") ;;
    start.*) argv=("$bin" version) ;;
    audit.peer) argv=(timeout 120 pt-summary) ;;
    audit.*) argv=("$bin" audit --format json --fail-on none) ;;
    nc.*) argv=("$bin" audit --format json --fail-on none --no-connect) ;;
    mem.peer | busy.peer) argv=(smem -c "pid pss") ;;
    mem.* | busy.*) argv=("$bin" mem --format json) ;;
  esac
}

# rounds KEY... runs each key once to warm up, then $runs rounds of all of
# them, the order reversed every other round.
rounds() {
  local keys=("$@") order i j k
  for k in "${keys[@]}"; do
    argv_for "$k"
    "${argv[@]}" </dev/null >/dev/null 2>&1 || true
  done
  for i in $(seq 1 "$runs"); do
    order=()
    for k in "${keys[@]}"; do
      if ((i % 2)); then order+=("$k"); else order=("$k" "${order[@]}"); fi
    done
    for k in "${order[@]}"; do
      argv_for "$k"
      if [ "$k" = audit.peer ]; then
        # pt_runs rounds, spread evenly over the run.
        ((i * pt_runs / runs > (i - 1) * pt_runs / runs)) || continue
        measure_once "$tmp" "$k" "$i" "${argv[@]}"
      else
        measure "$tmp" "$k" "$i" "${argv[@]}"
      fi
    done
  done
}

# sides WORK prints the keys of a work: dbhost, the old build if any, then
# the peer.
sides() {
  local w
  for w in "$@"; do
    echo "$w.new"
    [ -z "${BEFORE:-}" ] || echo "$w.old"
  done
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
quiet_procs=$(user_processes)
say "start-up, $runs rounds"
mapfile -t ks < <(sides start)
rounds "${ks[@]}" start.floor start.peer
say "live audit, $runs rounds (pt-summary in $((pt_runs < runs ? pt_runs : runs)))"
mapfile -t ks < <(sides audit nc)
rounds "${ks[@]}" audit.peer
say "mem on the host as it is ($quiet_procs processes), $runs rounds"
mapfile -t ks < <(sides mem)
rounds "${ks[@]}" mem.peer

build_memhog "$tmp"
extra=$((busy > quiet_procs ? busy - quiet_procs : 0))
for ((j = 0; j < extra; j++)); do
  if ((j % 2)); then sleep 3600 & else "$tmp/memhog" & fi
  pids+=($!)
done
sleep 1 # the holders have touched their memory
busy_procs=$(user_processes)
say "mem with $busy_procs processes ($extra added), $runs rounds"
mapfile -t ks < <(sides busy)
rounds "${ks[@]}" busy.peer
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

# The report.
s=$tmp/samples
ms() { awk '{printf "%.1f\n", $1}'; }
# ratio formats a ratio; well below 1 it also says how many times faster.
ratio() {
  awk '{if ($1 >= 0.95) printf "%.2f", $1
        else if ($1 > 0.1) printf "%.2f (%.1fx faster)", $1, 1/$1
        else printf "%.2g (%.0fx faster)", $1, 1/$1}'
}
wall() { column "$s" "$1" 3 | median | ms; }
# row KEY LABEL PEER prints a table row.
row() {
  local k=$1 label=$2 peer=$3 vp="" vb="" bad
  [ -z "$peer" ] || vp=$(pair_ratios "$s" "$k" "$peer" 3 | median | ratio)
  if [ -n "${BEFORE:-}" ] && [ "${k#*.}" = new ]; then
    vb="$(pair_ratios "$s" "$k" "${k%.new}.old" 3 | median | ratio) / $(pair_ratios "$s" "$k" "${k%.new}.old" 4 | median | ratio)"
  fi
  bad=$(awk -v k="$k" '$1==k && $7!=0 {n++} END {print n+0}' "$s")
  printf '| %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s |\n' "$label" \
    "$(column "$s" "$k" 3 | wc -l)" "$(wall "$k")" "$(column "$s" "$k" 3 | ms | spread)" \
    "$(column "$s" "$k" 4 | median | ms)" "$(column "$s" "$k" 5 | median | awk '{printf "%.1f", $1/1024}')" \
    "$(column "$s" "$k" 6 | median | awk '{printf "%.0f", $1}')" "$bad" "$vp" "$vb"
}
header() {
  echo "| command | runs | wall ms, median (min–max) | CPU ms | peak RSS MiB | page faults | exit ≠ 0 | ÷ $1, wall | ÷ before, wall / CPU |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
}
# table WORK PEER LABEL prints the rows of dbhost and of the old build.
table() {
  local w=$1 peer=$2 label=$3
  row "$w.new" "$label" "$peer"
  [ -z "${BEFORE:-}" ] || row "$w.old" "$label (before)" "$peer"
}
instances=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["instances"]))' "$tmp/audit.new.out" 2>/dev/null || echo "?")
vers() { "$1" version 2>/dev/null | head -n1; }
date=$(date -u +%F)
mkdir -p bench/results
report="bench/results/speed-$(date -u +%Y%m%d-%H%M%S).md"
{
  echo "# dbhost speed on $(hostname), \`sudo bench/speed.sh $runs\`"
  echo
  echo "$(date -u +%FT%TZ), kernel $(uname -r), $(nproc) CPUs, load average before $load."
  echo "dbhost: \`$DBHOST\` ($(vers "$DBHOST"))${BEFORE:+; before: \`$BEFORE\` ($(vers "$BEFORE"))}."
  echo "Running: $(pgrep -c -x postgres || true) postgres processes, $(pgrep -c -x mariadbd || true) mariadbd, $(pgrep -c -x redis-server || true) redis-server; the audit found $instances instances."
  echo
  echo "$runs rounds after one warm-up of each command, order reversed every other round. Wall: a bare run"
  echo "(\$EPOCHREALTIME around bash's fork and exec); $(if have_perf; then echo "CPU (task-clock) and page faults: a second run under perf stat;"; else echo "CPU: user+sys of the bare run (bash's time, 1 ms steps), minor faults from GNU time;"; fi)"
  echo "peak RSS: a run under GNU time. pt-summary: wall, CPU (user+sys), minor faults and RSS from one run"
  echo "under GNU time. A ratio is the median of the per-round ratios."
  echo
  echo "## Start-up"
  echo
  header "hello"
  table start start.peer "\`dbhost version\`"
  row start.floor "dbhost's imports alone: a binary that links every package dbhost imports and does nothing" "start.peer"
  row start.peer "hello-world Go binary (static, stripped)" ""
  echo
  echo "## Live audit"
  echo
  header "pt-summary"
  table audit audit.peer "\`dbhost audit --format json --fail-on none\`"
  table nc audit.peer "\`… --no-connect\`"
  row audit.peer "\`pt-summary\` ($(dpkg-query -W -f '${Version}' percona-toolkit 2>/dev/null || echo '?'))" ""
  echo
  echo "\`--no-connect\` ÷ the audit that connects, wall, per round: $(pair_ratios "$s" nc.new audit.new 3 | median | ratio)${BEFORE:+ (before: $(pair_ratios "$s" nc.old audit.old 3 | median | ratio))}."
  for w in mem busy; do
    echo
    if [ "$w" = mem ]; then echo "## mem, the host as it is ($quiet_procs processes)"; else echo "## mem, $busy_procs processes ($extra idle ones added: $(((extra + 1) / 2)) static 4 MiB holders, $((extra / 2)) sleep)"; fi
    echo
    header "smem"
    table "$w" "$w.peer" "\`dbhost mem --format json\`"
    row "$w.peer" "\`smem -c \"pid pss\"\` ($(dpkg-query -W -f '${Version}' smem 2>/dev/null || echo '?'))" ""
  done
} >"$report"

# The README's table: the medians and the ratios of the same run.
# cell prints wall and CPU: on a shared machine CPU time moves less with
# the load than wall time does.
cell() { echo "$(wall "$1") ms, CPU $(column "$s" "$1" 4 | median | ms)"; }
rr() { pair_ratios "$s" "$1" "$2" 3 | median | ratio; }
readme() {
  local b=${BEFORE:+1}
  echo "Medians of one run of \`sudo ${BEFORE:+BEFORE=OLD-BUILD }bench/speed.sh $runs\` ($date, $(nproc) vCPUs, Linux $(uname -r | cut -d- -f1), load average"
  echo "${load%% *} before it): $runs interleaved rounds (pt-summary: $((pt_runs < runs ? pt_runs : runs))), wall and CPU in ms, each ratio"
  echo "the median of the per-round ratios of wall times.${BEFORE:+ Before: $(vers "$BEFORE"), after: $(vers "$DBHOST").}"
  echo
  if [ -n "$b" ]; then
    echo "| \`bench/speed.sh\` | dbhost | before | peer | dbhost ÷ peer | dbhost ÷ before |"
    echo "|---|---:|---:|---:|---:|---:|"
  else
    echo "| \`bench/speed.sh\` | dbhost | peer | dbhost ÷ peer |"
    echo "|---|---:|---:|---:|"
  fi
  local w label peer
  for w in start audit nc mem busy; do
    case $w in
      start) label="start-up: \`dbhost version\` vs hello-world Go binary" peer=start.peer ;;
      audit) label="live audit, $instances servers, vs \`pt-summary\`" peer=audit.peer ;;
      nc) label="\`audit --no-connect\` vs \`pt-summary\`" peer=audit.peer ;;
      mem) label="\`mem\`, $quiet_procs processes, vs \`smem\`" peer=mem.peer ;;
      busy) label="\`mem\`, $busy_procs processes, vs \`smem\`" peer=busy.peer ;;
    esac
    if [ -n "$b" ]; then
      echo "| $label | $(cell "$w.new") | $(cell "$w.old") | $(cell "$peer") | $(rr "$w.new" "$peer") | $(rr "$w.new" "$w.old") |"
    else
      echo "| $label | $(cell "$w.new") | $(cell "$peer") | $(rr "$w.new" "$peer") |"
    fi
  done
  echo
}
readme >"$tmp/readme"
{
  echo
  echo "## README block"
  echo
  echo '```'
  cat "$tmp/readme"
  echo '```'
} >>"$report"
cat "$report"
echo
echo "Wrote $report."

if [ "$update" = 1 ]; then
  begin='<!-- speed.sh:begin -->'
  end='<!-- speed.sh:end -->'
  if [ "$(grep -cxF "$begin" README.md)" != 1 ] || [ "$(grep -cxF "$end" README.md)" != 1 ]; then
    echo "speed.sh: README.md needs one line $begin and one line $end" >&2
    exit 1
  fi
  # Written beside README.md, then renamed over it: a reader sees the old
  # file or the new one, never half of one.
  new=$(mktemp README.md.XXXXXX)
  awk -v b="$begin" -v e="$end" -v f="$tmp/readme" '
    $0==b {print; while ((getline l < f) > 0) print l; skip=1; next}
    $0==e {skip=0}
    !skip' README.md >"$new"
  chmod --reference=README.md "$new"
  chown --reference=README.md "$new"
  mv -f "$new" README.md
  echo "Updated README.md's Performance table."
fi
