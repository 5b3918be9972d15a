#!/usr/bin/env bash
# Re-records the tool outputs the parser tests read, from real pgbench and
# sysbench runs against private servers (never the machine's shared ones):
#
#   record.sh PG_SOCKET_DIR PG_PORT PG_DATA_DIR MARIADB_SOCKET MARIADB_PID_FILE
#
# The PostgreSQL server must trust user postgres on its socket; MariaDB must
# let root in over its socket and have a database "sbtest". The "stopped"
# cases stop the servers mid-run: restart them before recording again.
set -uo pipefail
pgdir=$1 pgport=$2 pgdata=$3 mysock=$4 mypid=$5
cd "$(dirname "$0")"
mkdir -p pgbench sysbench
export LC_ALL=C
PG=(-h "$pgdir" -p "$pgport" -U postgres)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pgbench: out = stdout, err = stderr, log = the per-transaction log files
# concatenated, rc = exit status.
pgb() { # name args...
	local name=$1
	shift
	rm -f "$tmp"/tx.*
	pgbench "$@" >"pgbench/$name.out" 2>"pgbench/$name.err"
	echo $? >"pgbench/$name.rc"
	if ls "$tmp"/tx.* >/dev/null 2>&1; then cat "$tmp"/tx.* >"pgbench/$name.log"; fi
}
pgbench "${PG[@]}" -i -q -s 2 postgres >/dev/null 2>&1
printf '\\set aid random(1, 100000 * :scale)\nSELEC abalance FROM pgbench_accounts WHERE aid = :aid;\n' >"$tmp/syntax.sql"
printf '\\set aid random(1, 100000 * :scale)\nSELECT abalance FROM nosuch_table WHERE aid = :aid;\n' >"$tmp/missing.sql"
printf '\\set bad random(1, \n' >"$tmp/parse.sql"
printf '\\set x random(0, 25000)\nSELECT 1/:x;\n' >"$tmp/partial.sql"
printf 'BEGIN ISOLATION LEVEL REPEATABLE READ;\nUPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;\nEND;\n' >"$tmp/conflict.sql"

# Rate-limited so the logs stay small (and the lag fields get recorded).
pgb tpcb "${PG[@]}" -c 4 -j 2 -T 3 --rate=300 --progress=1 -l --log-prefix="$tmp/tx" postgres
pgb select "${PG[@]}" -S -c 2 -j 2 -T 2 --progress=1 postgres
pgb failed "${PG[@]}" -n -f "$tmp/conflict.sql" -c 4 -j 2 -T 2 --rate=400 --progress=1 -l --log-prefix="$tmp/tx" postgres
pgb syntax "${PG[@]}" -n -f "$tmp/syntax.sql" -c 2 -T 2 --progress=1 postgres
pgb missing "${PG[@]}" -n -f "$tmp/missing.sql" -c 2 -T 2 --progress=1 postgres
pgb parse "${PG[@]}" -n -f "$tmp/parse.sql" -c 2 -T 2 --progress=1 postgres
pgb port -h 127.0.0.1 -p 1 -U postgres -c 2 -T 2 --progress=1 postgres
# A client aborting part-way (division by zero once in 25 000).
for _ in 1 2 3 4 5; do
	pgb partial "${PG[@]}" -n -f "$tmp/partial.sql" -c 4 -j 2 -T 3 --progress=1 postgres
	[ "$(cat pgbench/partial.rc)" = 2 ] && grep -q progress pgbench/partial.err && break
done

# sysbench: everything goes to stdout but nothing is lost recording both.
sb() { # name args...
	local name=$1
	shift
	sysbench "$@" >"sysbench/$name.out" 2>"sysbench/$name.err"
	echo $? >"sysbench/$name.rc"
}
SBPG=(--db-driver=pgsql --pgsql-host="$pgdir" --pgsql-port="$pgport" --pgsql-user=postgres --pgsql-db=postgres --tables=2 --table-size=10000)
SBMY=(--db-driver=mysql --mysql-socket="$mysock" --mysql-user=root --mysql-db=sbtest)
RUN=(--report-interval=1 --histogram=on)
sysbench oltp_read_only "${SBPG[@]}" cleanup >/dev/null 2>&1
sb pg_prepare oltp_read_only "${SBPG[@]}" prepare
sb pg_ro oltp_read_only "${SBPG[@]}" --threads=2 --time=3 "${RUN[@]}" run
sb pg_rw oltp_read_write "${SBPG[@]}" --threads=4 --time=2 "${RUN[@]}" run
sb pg_port oltp_read_only --db-driver=pgsql --pgsql-host=127.0.0.1 --pgsql-port=1 --pgsql-user=postgres --pgsql-db=postgres --threads=2 --time=2 "${RUN[@]}" run
psql "${PG[@]}" -qc 'ALTER TABLE sbtest2 RENAME TO sbtest2x' postgres
sb pg_missing oltp_read_only "${SBPG[@]}" --threads=2 --time=2 "${RUN[@]}" run
psql "${PG[@]}" -qc 'ALTER TABLE sbtest2x RENAME TO sbtest2' postgres

sysbench oltp_read_write "${SBMY[@]}" --tables=2 cleanup >/dev/null 2>&1
sb my_prepare oltp_read_write "${SBMY[@]}" --tables=2 --table-size=10000 prepare
sb my_rw oltp_read_write "${SBMY[@]}" --tables=2 --table-size=10000 --threads=2 --time=3 "${RUN[@]}" run
# Deadlocks on a tiny table: ignored errors (err/s).
sysbench oltp_write_only "${SBMY[@]}" --tables=1 --table-size=20 cleanup >/dev/null 2>&1
sysbench oltp_write_only "${SBMY[@]}" --tables=1 --table-size=20 prepare >/dev/null 2>&1
sb my_deadlock oltp_write_only "${SBMY[@]}" --tables=1 --table-size=20 --threads=8 --time=3 "${RUN[@]}" run
sysbench oltp_read_write "${SBMY[@]}" --tables=2 --table-size=10000 prepare >/dev/null 2>&1
sb my_port oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=1 --mysql-user=root --mysql-db=sbtest --tables=2 --threads=2 --time=2 "${RUN[@]}" run
mariadb -S "$mysock" sbtest -e 'RENAME TABLE sbtest2 TO sbtest2x'
sb my_missing oltp_read_write "${SBMY[@]}" --tables=2 --threads=2 --time=2 "${RUN[@]}" run
mariadb -S "$mysock" sbtest -e 'RENAME TABLE sbtest2x TO sbtest2'
# Warm-up alternative that was considered: a report checkpoint resets the
# counters and the histogram in-run.
sb pg_checkpoint oltp_read_only "${SBPG[@]}" --threads=2 --time=3 --report-checkpoints=1 "${RUN[@]}" run

# Servers stopped mid-run (last: they stay down). sysbench/pg_stopped was
# recorded the same way: oltp_read_only --threads=2 --time=5 against
# PostgreSQL, stopped (SIGINT) after 2.5 s.
(sleep 2.5 && kill -TERM "$(cat "$mypid")") &
sb my_stopped oltp_read_write "${SBMY[@]}" --tables=2 --threads=2 --time=5 "${RUN[@]}" run
wait
(sleep 2.5 && kill -INT "$(head -1 "$pgdata/postmaster.pid")") &
pgb stopped "${PG[@]}" -c 2 -j 2 -T 5 --progress=1 postgres
wait
