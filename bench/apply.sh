#!/usr/bin/env bash
# Wall time of `dbhost fix --apply` and `fix --rollback` on this host for
# the live test's set of fixes (internal/cli BenchmarkLiveFixApply): the
# host is made to fail mem.dirty, net.fin_timeout, net.keepalive,
# mem.thp.enabled, mem.thp.defrag, storage.read_ahead, storage.scheduler,
# limits.nproc (a private PostgreSQL with a low process limit) and
# pg.hardening.md5 (its password_encryption set to md5), through
# the test journal; each iteration applies the fixes with the real binary
# and rolls them back, and the host is compared with its listing before.
# Prints the medians: apply-ms and rollback-ms (whole commands: start-up,
# facts, plan, the changes and, for --apply, the re-audit),
# apply-changes-ms (the journaled changes alone), and the files, values and
# database settings changed.
#
#   sudo bench/apply.sh [ITERATIONS]     # default 20
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_root
n=${1:-20}
DBHOST_INTEGRATION=require go test -count=1 -run '^$' -bench '^BenchmarkLiveFixApply$' -benchtime "${n}x" ./internal/cli/
