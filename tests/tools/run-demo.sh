#!/usr/bin/env bash
# `make run`: the live demo.
#
#   tests/tools/run-demo.sh [WATCH_PATH]      default: '/api/v1/pods?watch=1'
#   make run WATCH='/apis/apps/v1/deployments?watch=1'
#   make run DB=mariadb                       the same on MariaDB
#
# Installs what is missing, builds walwatch and the demo writer, starts a
# throwaway PostgreSQL 15 + wal2json (tests/tools/pg-sandbox.sh) in a temporary
# directory, creates Clusterpedia's `resources` table (schema/clusterpedia.sql),
# starts walwatch on it, starts tests/tools/demo_writer (writes like
# Clusterpedia's collector), and prints walwatch's live watch stream with curl.
# With DB=mariadb: a throwaway MariaDB with a row-based binlog instead
# (tests/tools/mariadb-sandbox.sh), a database `clusterpedia` with the table
# (schema/mysql/clusterpedia.sql) and the `walwatch` account
# (schema/mysql/roles.sql), `walwatch --source mysql` reading its binlog as
# that account, and the writer writing as the collector does on MySQL.
# Ctrl-C stops the writer, walwatch and the database server and removes the
# temporary directory: nothing is left on disk.
#
# Environment (for development):
#   DB (postgres)                           postgres or mariadb
#   DEMO_RATE (5)  DEMO_CLUSTERS (2)        the writer's --rate and --clusters
#   WALWATCH_BIN, DEMO_WRITER_BIN           binaries (default build/walwatch,
#                                           build/demo_writer)
#   WALWATCH_DEMO_NO_BUILD=1                skip install-deps and the build
#   BUILD_DIR (build), JOBS (2)

# shellcheck disable=SC2317  # functions called from traps only
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
WATCH_PATH=${1:-/api/v1/pods?watch=1}
[[ "$WATCH_PATH" == /* ]] || WATCH_PATH="/$WATCH_PATH"
DEMO_RATE=${DEMO_RATE:-5}
DEMO_CLUSTERS=${DEMO_CLUSTERS:-2}
WALWATCH_BIN=${WALWATCH_BIN:-$ROOT/$BUILD_DIR/walwatch}
DEMO_WRITER_BIN=${DEMO_WRITER_BIN:-$ROOT/$BUILD_DIR/demo_writer}
SLOT=walwatch_demo
DB=${DB:-postgres}
case "$DB" in
  postgres | postgresql | pg) DB=postgres ;;
  mariadb | mysql) DB=mariadb ;;
  *) echo "run-demo: DB=$DB: use postgres or mariadb" >&2; exit 2 ;;
esac

say() { echo "run-demo: $*" >&2; }

if [[ "${WALWATCH_DEMO_NO_BUILD:-}" != 1 ]]; then
  "$ROOT/tests/tools/install-deps.sh"
  say "building walwatch and demo_writer in $BUILD_DIR ..."
  cmake -S . -B "$BUILD_DIR" >/dev/null
  cmake --build "$BUILD_DIR" -j"$JOBS" --target walwatch demo_writer
fi
for bin in "$WALWATCH_BIN" "$DEMO_WRITER_BIN"; do
  [[ -x "$bin" ]] || { say "$bin is missing (build failed?)"; exit 1; }
done

DIR=""
WALWATCH_PID=""
WRITER_PID=""

stop_pid() {
  local pid=$1 i
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  # Finish the cleanup whatever happens to the terminal or a pipe we print to
  # (Ctrl-C also kills a `| tee` or `| less` downstream).
  set +e
  trap '' PIPE INT TERM
  echo >&2
  say "stopping ..."
  stop_pid "$WRITER_PID"
  stop_pid "$WALWATCH_PID"
  if [[ -n "$DIR" ]]; then
    if [[ "$DB" == mariadb ]]; then
      "$ROOT/tests/tools/mariadb-sandbox.sh" stop "$DIR/db" || true
    else
      "$ROOT/tests/tools/pg-sandbox.sh" stop "$DIR" || true
    fi
    rm -rf -- "$DIR"
  fi
  say "stopped; removed ${DIR:-nothing}"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

DIR=$(mktemp -d /tmp/walwatch-demo.XXXXXX)
SOCK=$DIR/walwatch.sock
if [[ "$DB" == mariadb ]]; then
  # The server runs as `mysql`, which must reach its directory under ours.
  chmod 755 "$DIR"
  myenv=$("$ROOT/tests/tools/mariadb-sandbox.sh" start "$DIR/db")
  eval "$myenv"
  DB_PORT=$WALWATCH_TEST_MYPORT
  my() { mariadb --no-defaults --socket="$WALWATCH_TEST_MYSOCKET" -uroot "$@"; }
  my -e 'CREATE DATABASE clusterpedia CHARACTER SET utf8mb4'
  my clusterpedia <"$ROOT/schema/mysql/clusterpedia.sql"
  my --init-command="SET @walwatch_password = 'walwatch-demo'" clusterpedia \
    <"$ROOT/schema/mysql/roles.sql"
  WALWATCH_SOURCE=(--source mysql --server-id 4242 --mysql-conninfo
    "host=127.0.0.1 port=$DB_PORT user=walwatch password=walwatch-demo database=clusterpedia")
  WRITER_DB=(--mysql-conninfo "socket=$WALWATCH_TEST_MYSOCKET user=root database=clusterpedia")
  DB_BANNER="MariaDB (binlog)           $DIR/db (port $DB_PORT), table clusterpedia.resources"
  SOURCE_BANNER="server id 4242, account walwatch"
else
  pgenv=$("$ROOT/tests/tools/pg-sandbox.sh" start "$DIR")
  eval "$pgenv"
  psql -X -q -v ON_ERROR_STOP=1 -f "$ROOT/schema/clusterpedia.sql"
  DB_PORT=$PGPORT
  CONNINFO="host=$DIR port=$PGPORT dbname=postgres user=postgres"
  WALWATCH_SOURCE=(--conninfo "$CONNINFO" --slot "$SLOT")
  WRITER_DB=(--conninfo "$CONNINFO")
  DB_BANNER="PostgreSQL 15 + wal2json   $DIR (port $PGPORT), table public.resources"
  SOURCE_BANNER="slot $SLOT"
fi

"$WALWATCH_BIN" "${WALWATCH_SOURCE[@]}" --socket "$SOCK" \
  >"$DIR/walwatch.log" 2>&1 &
WALWATCH_PID=$!

"$DEMO_WRITER_BIN" "${WRITER_DB[@]}" --rate "$DEMO_RATE" --clusters "$DEMO_CLUSTERS" \
  >"$DIR/demo_writer.log" 2>&1 &
WRITER_PID=$!

say "waiting for walwatch's socket $SOCK ..."
for ((i = 0; i < 600; i++)); do
  [[ -S "$SOCK" ]] && break
  if ! kill -0 "$WALWATCH_PID" 2>/dev/null; then
    say "walwatch exited before serving; its log:"
    cat "$DIR/walwatch.log" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ ! -S "$SOCK" ]]; then
  say "walwatch did not create $SOCK within 60 s; its log:"
  tail -n 50 "$DIR/walwatch.log" >&2
  exit 1
fi

# walwatch serves every resource path, whether or not the table holds a row
# of it yet; wait until it answers the watch path at all.
probe="http://localhost$WATCH_PATH"
if [[ "$probe" == *\?* ]]; then probe+="&timeoutSeconds=1"; else probe+="?timeoutSeconds=1"; fi
say "waiting for walwatch to answer $WATCH_PATH ..."
for ((i = 0; ; i++)); do
  code=$(curl -s -o "$DIR/probe.body" -w '%{http_code}' --max-time 5 \
    --unix-socket "$SOCK" "$probe" || true)
  [[ "$code" == 200 ]] && break
  if [[ "$code" != 000 ]] || ((i >= 30)); then
    say "GET $WATCH_PATH answers $code:"
    cat "$DIR/probe.body" >&2
    echo >&2
    exit 1
  fi
  sleep 1
done

clusters=$(seq -f 'c%g' 1 "$DEMO_CLUSTERS" | tr '\n' ' ')
cat >&2 <<BANNER

==============================================================================
 walwatch demo
   $DB_BANNER
   demo writer                Clusterpedia-like writes, $DEMO_RATE/s, clusters: $clusters
                              (pods, deployments, configmaps; log: $DIR/demo_writer.log)
   walwatch                   $SOURCE_BANNER, socket $SOCK
                              (log: $DIR/walwatch.log)

 Below is the live watch stream of
     GET $WATCH_PATH
 one Kubernetes watch event per line, {"type":"ADDED|MODIFIED|DELETED|...","object":{...}}:
 first the current objects (ADDED), then every change the writer makes, in
 commit order, with metadata.resourceVersion = walwatch's resourceVersion.

 Other streams, from another terminal while this runs:
   curl -sN --unix-socket $SOCK 'http://localhost/apis/apps/v1/deployments?watch=1'
   curl -sN --unix-socket $SOCK 'http://localhost/clusters/c1/api/v1/namespaces/default/pods?watch=1'
   curl -sN --unix-socket $SOCK 'http://localhost/api/v1/configmaps?watch=1'
 or start the demo on another path: make run WATCH='/apis/apps/v1/deployments?watch=1'
 Ctrl-C stops everything and removes $DIR.
==============================================================================

BANNER

# A watch ends by itself after the server's timeout: watch again (it starts
# with the current objects again) for as long as walwatch runs.
while :; do
  rc=0
  curl -sN --unix-socket "$SOCK" "http://localhost$WATCH_PATH" || rc=$?
  if ((rc == 0)) && kill -0 "$WALWATCH_PID" 2>/dev/null; then
    echo >&2
    say "the watch ended (server timeout, or an error above); watching again in 2 s"
    sleep 2
    continue
  fi
  break
done
say "the watch stream failed (curl exit $rc); walwatch's last log lines:"
tail -n 20 "$DIR/walwatch.log" >&2 || true
exit 1
