# shellcheck shell=bash
# Shared by the bench scripts, which source it after changing to the
# repository root.

# need_root stops the script unless it runs as root: the tools compared
# read state only root can.
need_root() {
  [ "$(id -u)" -eq 0 ] || { echo "$(basename "$0"): run as root" >&2; exit 2; }
}

# install_packages installs distribution packages quietly; given none, it
# does nothing.
install_packages() {
  [ $# -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# free_port prints a TCP port free on loopback now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# median prints the median of the numbers on its input, one a line.
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# elapsed_ms prints the milliseconds between two $EPOCHREALTIME readings,
# with bash arithmetic on the microseconds (no process started).
elapsed_ms() {
  local us=$(( ${2//[.,]/} - ${1//[.,]/} ))
  printf '%d.%03d' $((us / 1000)) $((us % 1000))
}

# measure DIR KEY ROUND CMD... runs CMD three times and appends one line to
# DIR/samples: "KEY ROUND WALL_MS CPU_MS RSS_KB FAULTS RC".
#   1. bare, as bash runs any command: the wall time, from $EPOCHREALTIME;
#   2. under perf stat: CPU (task-clock) and page faults, counted from the
#      exec on, to the microsecond;
#   3. under GNU time: the peak RSS.
# time(1) prints CPU in 10 ms steps and counts its child's faults from the
# fork; either wrapper adds its own fork and exec to the wall time: too coarse
# for a start-up of a few milliseconds. Without a working perf, CPU is bash's
# time of the bare run (1 ms steps) and the faults time(1)'s minor ones.
# The last bare run's output stays in DIR/KEY.out and DIR/KEY.err.
measure() {
  local dir=$1 key=$2 round=$3 rc=0 t0 t1 cpu rss faults TIMEFORMAT='%3U %3S'
  shift 3
  t0=$EPOCHREALTIME
  { time "$@" </dev/null >"$dir/$key.out" 2>"$dir/$key.err"; } 2>"$dir/cpu" || rc=$?
  t1=$EPOCHREALTIME
  /usr/bin/time -f '%M %R' -o "$dir/rusage" "$@" </dev/null >/dev/null 2>&1 || true
  read -r rss faults < <(tail -n1 "$dir/rusage")
  cpu=$(awk '{printf "%.3f", ($1+$2)*1000}' "$dir/cpu")
  if have_perf; then
    perf stat -x, -e task-clock,page-faults -o "$dir/perf" -- "$@" </dev/null >/dev/null 2>&1 || true
    cpu=$(awk -F, '$3 ~ /^task-clock/ {print $1}' "$dir/perf")
    faults=$(awk -F, '$3 ~ /^page-faults/ {print $1}' "$dir/perf")
  fi
  echo "$key $round $(elapsed_ms "$t0" "$t1") $cpu $rss $faults $rc" >>"$dir/samples"
}

# have_perf says whether perf stat can count here (as root it can, when the
# package matches the kernel); it asks once.
have_perf() {
  if [ -z "${_have_perf:-}" ]; then
    _have_perf=no
    perf stat -x, -e task-clock -o /dev/null -- true >/dev/null 2>&1 && _have_perf=yes
  fi
  [ "$_have_perf" = yes ]
}

# measure_once is measure for commands that take seconds: one run under GNU
# time, whose own start-up is then lost in the noise, gives every column.
measure_once() {
  local dir=$1 key=$2 round=$3 rc=0 t0 t1 TIMEFORMAT='%3U %3S'
  shift 3
  t0=$EPOCHREALTIME
  { time /usr/bin/time -f '%M %R' -o "$dir/rusage" "$@" </dev/null >"$dir/$key.out" 2>"$dir/$key.err"; } 2>"$dir/cpu" || rc=$?
  t1=$EPOCHREALTIME
  echo "$key $round $(elapsed_ms "$t0" "$t1") $(awk '{printf "%.3f", ($1+$2)*1000}' "$dir/cpu") $(tail -n1 "$dir/rusage") $rc" >>"$dir/samples"
}

# column FILE KEY N prints column N (see measure) of KEY's samples.
column() { awk -v k="$2" -v n="$3" '$1==k {print $n}' "$1"; }

# spread prints "min–max" of the numbers on its input.
spread() { sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {if (NR) printf "%s–%s\n", lo, hi}'; }

# pair_ratios FILE A B N prints, for each round that has samples of both A
# and B, column N of A divided by column N of B: the ratio within a pair,
# taken under the same conditions.
pair_ratios() {
  awk -v a="$2" -v b="$3" -v n="$4" '
    $1==a {x[$2]=$n} $1==b {y[$2]=$n}
    END {for (r in x) if ((r in y) && y[r] > 0) printf "%.4f\n", x[r]/y[r]}' "$1"
}

# build_memhog DIR compiles DIR/memhog, a static program that holds 4 MiB of
# its own memory and sleeps: it shares no page with any other process.
build_memhog() {
  cat >"$1/memhog.c" <<'EOC'
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) { char *p = malloc(4 << 20); memset(p, 1, 4 << 20); pause(); return p[0]; }
EOC
  gcc -O1 -static -o "$1/memhog" "$1/memhog.c"
}

# user_processes prints how many processes are not kernel threads (kthreadd,
# PID 2, and its children), ps itself included.
user_processes() { ps --ppid 2 -p 2 --deselect -o pid= | wc -l; }
