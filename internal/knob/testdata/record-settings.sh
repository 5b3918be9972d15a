#!/bin/sh
# Records the pg_settings rows and MariaDB SYSTEM_VARIABLES rows the unit
# tests check values against, from throwaway servers of this machine's
# PostgreSQL and MariaDB (run as root; nothing shared is touched).
set -eu
out=$(cd "$(dirname "$0")" && pwd)
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
tmp=$(mktemp -d /tmp/dbhost-record-XXXXXX)
chown postgres "$tmp" && chmod 755 "$tmp"
trap 'runuser -u postgres -- "$bin/pg_ctl" -D "$tmp/pg" stop -m immediate >/dev/null 2>&1 || true
	[ -f "$tmp/my/pid" ] && kill "$(cat "$tmp/my/pid")" 2>/dev/null; sleep 1; rm -rf "$tmp"' EXIT
runuser -u postgres -- "$bin/initdb" -D "$tmp/pg" -U postgres --auth=trust --no-sync >/dev/null
runuser -u postgres -- "$bin/pg_ctl" -D "$tmp/pg" -o "-k $tmp -p 55999 -c listen_addresses=''" -w start >/dev/null
runuser -u postgres -- psql -h "$tmp" -p 55999 -U postgres -AtF '	' -c "
SELECT name, vartype, coalesce(unit, ''), context, coalesce(min_val, ''), coalesce(max_val, ''),
       coalesce(array_to_string(enumvals, ','), ''), setting
FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', 'random_page_cost', 'huge_pages', 'fsync',
  'checkpoint_timeout', 'wal_buffers', 'max_wal_size', 'search_path', 'DateStyle', 'vacuum_cost_delay',
  'max_locks_per_transaction', 'log_min_duration_statement', 'effective_io_concurrency')
ORDER BY name" >"$out/pg_settings.tsv"
mkdir "$tmp/my" && chown mysql "$tmp/my"
mariadb-install-db --no-defaults --user=mysql --datadir="$tmp/my/data" --auth-root-authentication-method=socket --skip-test-db >/dev/null 2>&1
mariadbd --no-defaults --user=mysql --datadir="$tmp/my/data" --socket="$tmp/my/sock" --skip-networking \
	--pid-file="$tmp/my/pid" --log-error="$tmp/my/err" &
for _ in $(seq 100); do [ -S "$tmp/my/sock" ] && break; sleep 0.1; done
mariadb -S "$tmp/my/sock" -u root -N -B -e "
SELECT LOWER(VARIABLE_NAME), VARIABLE_TYPE, READ_ONLY, VARIABLE_SCOPE, COALESCE(NUMERIC_MIN_VALUE, ''),
       COALESCE(NUMERIC_MAX_VALUE, ''), COALESCE(NUMERIC_BLOCK_SIZE, ''), COALESCE(ENUM_VALUE_LIST, ''), GLOBAL_VALUE
FROM information_schema.SYSTEM_VARIABLES WHERE VARIABLE_NAME IN ('MAX_CONNECTIONS', 'INNODB_IO_CAPACITY',
  'INNODB_FLUSH_LOG_AT_TRX_COMMIT', 'INNODB_BUFFER_POOL_SIZE', 'INNODB_FLUSH_METHOD', 'AUTOCOMMIT', 'SORT_BUFFER_SIZE',
  'LONG_QUERY_TIME', 'OPTIMIZER_SWITCH', 'INNODB_LOG_BUFFER_SIZE', 'TMP_TABLE_SIZE', 'INNODB_READ_IO_THREADS', 'SQL_MODE')
ORDER BY 1" >"$out/mariadb_variables.tsv"
