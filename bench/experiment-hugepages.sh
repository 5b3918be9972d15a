#!/usr/bin/env bash
# The `hugepages` preset on this host, with a stated budget: a throwaway
# PostgreSQL cluster sized to the host, 4 KB vs 2 MB pages (and 1 GB pages
# where the kernel offers them), pgbench select-only on a data set that fits
# in shared_buffers, trials in randomised ABBA blocks with sequential looks.
# Prints the verdicts with ratio and interval, the trials and the wall time
# used, next to what the published protocol (3 runs x 30 min per setting,
# median; knowledge.md §9) would cost for the same comparison.
#
#   sudo bench/experiment-hugepages.sh [BUDGET]     # default 12m, the preset's own
#
# Writes bench/results/experiment-hugepages-<date>.md and prints it; the
# experiment stays in the results database (dbhost results report ID -o x.html).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
budget=${1:-12m}
db=${DB:-/var/lib/dbhost/results.db}
need_root
make build >/dev/null # this tree's dbhost, never a stale binary
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
set +e
./dbhost experiment --preset hugepages --time "$budget" --db "$db" --format json >"$tmp/out.json" 2> >(tee "$tmp/log" >&2)
code=$?
set -e
wall=$(($(date +%s) - start))
[ -s "$tmp/out.json" ] || { echo "experiment-hugepages.sh: the experiment failed (exit $code)" >&2; exit 1; }
mkdir -p bench/results
report=bench/results/experiment-hugepages-$(date -u +%Y%m%d-%H%M%S).md
python3 - "$tmp/out.json" "$wall" "$budget" "$code" "$tmp/log" >"$report" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
wall, budget, code = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
log = open(sys.argv[5]).read().splitlines()
arms = s.get("arms") or []
def fmt_iv(iv):
    lo = "0" if iv[0] is None else f"{iv[0]:.3f}"
    hi = "∞" if iv[1] is None else f"{iv[1]:.3f}"
    return f"{lo}–{hi}"
print(f"# dbhost experiment --preset hugepages on this host\n")
print(f"Experiment {s['id']}, status {s['status']} (exit {code}); target: {s.get('target', '')}.\n")
for line in log:
    if line.startswith(("2 MB pages", "1 GB pages", "loading", "loaded", "arm ")):
        print(f"- {line}")
print()
print(f"Budget `--time {budget}`; wall time of the whole command {wall // 60}m{wall % 60:02d}s "
      f"(cluster creation, data load, trials, restore); trials: {s['trials']} "
      f"({s['excluded']} excluded), budget {s['max_per_arm']} per arm.\n")
print("| arm | knobs | trials | median tps | vs 4k | 95% CI | p | verdict |")
print("|---|---|--:|--:|--:|---|--:|---|")
for a in arms:
    knobs = " ".join(k for k in a["knobs"] if not k.startswith(("hugepages.1G=0", "pg.huge_page_size=0")))
    if a["index"] == 0:
        print(f"| {a['name']} (base) | {knobs} | {a['trials']} | {a['median']:.0f} | | | | |")
    else:
        iv = a.get("interval") or [None, None]
        print(f"| {a['name']} | {knobs} | {a['trials']} | {a['median']:.0f} | {a.get('ratio', 0):.3f}x | {fmt_iv(iv)} | {a.get('p', 1):.3g} | {a.get('verdict', '')} |")
print()
for c in s.get("comparisons") or []:
    print(f"- {c['name']} vs {arms[0]['name']}: {c['decision']['reason']}")
k = len(arms)
seeds_h = 3 * 30 * k / 60
print()
print(f"The published protocol for the same comparison: 3 runs x 30 min for each of the {k} settings = "
      f"{seeds_h:g} h of benchmark alone ({seeds_h * 3600 / max(wall, 1):.0f}x this run's wall time), "
      f"and with 3 runs per setting the smallest p-value an exact rank test can reach is 2/20 = 0.1: "
      f"no change, however large, can be declared at 5 %.")
EOF
cat "$report"
