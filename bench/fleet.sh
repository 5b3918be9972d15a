#!/usr/bin/env bash
# 'dbhost fleet report' over N snapshots (default 500): symbolic links to
# the recorded hosts (136 today) in testdata/hosts (built from their text form),
# taken in turn, in a temporary directory. Reports the wall time and peak
# RSS (GNU time), the load average before the run (other work on the
# machine slows it down), and the report's size. Runs as any user.
#
#   bench/fleet.sh [N] [extra flags for fleet report, e.g. -j 1]
#   DBHOST=/tmp/dbhost-old bench/fleet.sh 500   # another build, to compare
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500}
shift || true
[ -x /usr/bin/time ] || { echo "fleet.sh: needs GNU time (Debian package time)" >&2; exit 2; }
if [ -z "${DBHOST:-}" ]; then
  [ -x ./dbhost ] || make build >/dev/null
  DBHOST=./dbhost
fi
[ -x "$DBHOST" ] || { echo "fleet.sh: $DBHOST is not an executable" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/snaps"
mkdir "$tmp/recorded"
go run ./tools/ttar build -o "$tmp/recorded" >/dev/null
mapfile -t recorded < <(ls "$tmp"/recorded/*.tar.gz)
for i in $(seq 0 $((n - 1))); do
  ln -s "${recorded[i % ${#recorded[@]}]}" "$(printf '%s/snaps/host%04d.tar.gz' "$tmp" "$i")"
done

echo "$(date -u +%FT%TZ), kernel $(uname -r), $(nproc) CPUs, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
/usr/bin/time -v -o "$tmp/time" "$DBHOST" fleet report -o "$tmp/fleet.html" "$@" "$tmp/snaps" 2>"$tmp/err" || rc=$?
grep -v '^dbhost fleet report: wrote' "$tmp/err" >&2 || true
wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time")
rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time")
user=$(sed -n 's/.*User time (seconds): //p' "$tmp/time")
sys=$(sed -n 's/.*System time (seconds): //p' "$tmp/time")
cpu=$(sed -n 's/.*Percent of CPU this job got: //p' "$tmp/time")
echo "$n snapshots: wall $wall, user ${user}s, system ${sys}s, CPU $cpu, peak RSS $((rss / 1024)) MiB, exit $rc, report $(($(stat -c %s "$tmp/fleet.html") / 1024)) KiB"
