#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for walwatch's tests and demo: Debian's 15
# with wal2json, or another server (WALWATCH_PG_BINDIR below).
#
#   pg-sandbox.sh start DIR [PORT]   create (or reuse) and start a cluster in DIR;
#                                    prints `export ...` lines for eval on stdout
#   pg-sandbox.sh stop DIR           stop it (pg_ctl -m fast) and remove DIR
#   pg-sandbox.sh env DIR            print the `export ...` lines again
#
#   eval "$(tests/tools/pg-sandbox.sh start /tmp/ww-pg)"
#   psql -c 'select 1'              # PGHOST/PGPORT/PGUSER now point at it
#   tests/tools/pg-sandbox.sh stop /tmp/ww-pg
#
# Layout of DIR:
#   DIR/data                  PGDATA
#   DIR/log/postgresql.log    the server log
#   DIR/.s.PGSQL.PORT         the Unix socket (unix_socket_directories = DIR)
#   DIR/port                  the port in use
#   DIR/.walwatch-pg-sandbox  marker; `stop` and a restarting `start` only ever
#                             delete a DIR that carries it (or an empty one)
#
# Authentication (pg_hba.conf):
#   - Unix socket: trust, every role (superuser `postgres`).
#   - 127.0.0.1: role `walwatch_pw` (LOGIN REPLICATION, member of
#     pg_read_all_data) must give its password, SCRAM-SHA-256; its password is
#     `walwatch_pw` (exported as WALWATCH_TEST_PW_USER/_PASSWORD) -- so a
#     wrong-password test is possible. Every other role: trust.
#
# Running as root: initdb and pg_ctl refuse root, so they run as the `postgres`
# user (runuser), DIR is chowned to postgres, and every parent directory of DIR
# must be traversable (o+x) by postgres. A directory under /tmp always works
# (e.g. `mktemp -d /tmp/walwatch-pg.XXXXXX`). As any other user they run
# directly as that user.
#
# Also keep DIR short: the socket path DIR/.s.PGSQL.PORT must fit in 107 bytes.
#
# Settings: wal_level=logical, max_replication_slots=64, max_wal_senders=64,
# max_connections=200, wal_sender_timeout=60s, listen_addresses=127.0.0.1,
# fsync=off, synchronous_commit=on, and output_plugin_libraries =
# 'pgoutput, test_decoding, wal2json' where the server knows that setting
# (Debian's 15.20 security update refuses other output plugins without it;
# older 15.x would refuse to start with it, so it is detected first). Then
# WALWATCH_PG_SETTINGS's, if any.
#
# Without PORT, a free port is picked at random (and retried if another
# process takes it first). `start` on a DIR whose cluster is running just
# prints its env; on a stale DIR (crashed or killed cluster) it cleans up and
# starts afresh.
#
# Environment:
#   WALWATCH_PG_BINDIR   the server's bin dir (default /usr/lib/postgresql/15/bin).
#                        Another major: tests/tools/install-pg-npm.sh prints
#                        16's, 17's and 18's, which hold initdb, pg_ctl and
#                        postgres only; psql and pg_isready then come from
#                        Debian's 15 (/usr/lib/postgresql/15/bin), whose
#                        clients speak to newer servers.
#   WALWATCH_PG_SETTINGS more postgresql.conf settings, as whitespace-separated
#                        name=value words (each written name = 'value'), e.g.
#                        "debug_logical_replication_streaming=immediate"
#
# Output plugins: `start` checks that pgoutput is usable (a temporary slot),
# and wal2json too where it must be there: on Debian's servers
# (/usr/lib/postgresql/*/bin, where postgresql-NN-wal2json installs it) and
# on any server whose library directory has it. The npm servers have none.
set -euo pipefail

DEBIAN_BINDIR=/usr/lib/postgresql/15/bin
BINDIR=${WALWATCH_PG_BINDIR:-$DEBIAN_BINDIR}
# psql and pg_isready: the server's own where it has them, else Debian's 15.
CLIENT_BINDIR=$BINDIR
if [[ ! -x $BINDIR/psql || ! -x $BINDIR/pg_isready ]]; then CLIENT_BINDIR=$DEBIAN_BINDIR; fi
MARKER=.walwatch-pg-sandbox
PW_ROLE=walwatch_pw
PW_PASSWORD=walwatch_pw

SANDBOX_NAME=pg-sandbox
SANDBOX_USER=postgres
SANDBOX_PACKAGE=postgresql-15
SERVER_KIND=PostgreSQL
SERVER_LOG=log/postgresql.log
SOCKET_SUFFIX_LEN=13
# shellcheck source=tests/tools/sandbox-lib.sh
source "$(dirname "$0")/sandbox-lib.sh"

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

print_env() {
  local dir=$1 port=$2
  echo "export WALWATCH_TEST_PGHOST=$dir WALWATCH_TEST_PGPORT=$port"
  echo "export WALWATCH_TEST_PGDATA=$dir/data WALWATCH_TEST_PW_USER=$PW_ROLE WALWATCH_TEST_PW_PASSWORD=$PW_PASSWORD"
  echo "export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres"
}

is_running() {
  local dir=$1
  [[ -f "$dir/data/postmaster.pid" ]] || return 1
  process_alive "$(head -n1 "$dir/data/postmaster.pid" 2>/dev/null || true)" postgres
}

# Stop whatever cluster runs in DIR. Fast first, immediate if that hangs; as a
# last resort kill the postmaster named in DIR's own postmaster.pid.
stop_server() {
  local dir=$1
  [[ -f "$dir/data/postmaster.pid" ]] || return 0
  if is_running "$dir"; then
    as_owner "$BINDIR/pg_ctl" -D "$dir/data" stop -m fast -w -t 30 >/dev/null 2>&1 ||
      as_owner "$BINDIR/pg_ctl" -D "$dir/data" stop -m immediate -w -t 30 >/dev/null 2>&1 || true
  fi
  if is_running "$dir"; then
    local pid
    pid=$(head -n1 "$dir/data/postmaster.pid" 2>/dev/null || true)
    if [[ "$pid" =~ ^[0-9]+$ ]]; then
      say "postmaster $pid did not stop; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 1
    fi
  fi
}

supports_output_plugin_libraries() {
  # Not `grep -q`: it would stop reading early, postgres would die of SIGPIPE,
  # and under pipefail the pipeline would fail at random.
  as_owner "$BINDIR/postgres" --describe-config 2>/dev/null |
    grep '^output_plugin_libraries[[:space:]]' >/dev/null
}

# Whether the server must have wal2json: Debian's do (install-deps.sh installs
# postgresql-15-wal2json), and so does one whose library directory holds it
# (Debian's layout: BINDIR/../lib; a source build's: BINDIR/../lib/postgresql).
wants_wal2json() {
  [[ $BINDIR == /usr/lib/postgresql/*/bin ]] ||
    [[ -e $BINDIR/../lib/wal2json.so || -e $BINDIR/../lib/postgresql/wal2json.so ]]
}

init_server() {
  local dir=$1
  mkdir -p "$dir/log"
  touch "$dir/$MARKER"
  if ((IS_ROOT)); then chown -R postgres:postgres "$dir"; fi
  chmod 0700 "$dir"

  if ! as_owner "$BINDIR/initdb" -D "$dir/data" -U postgres -E UTF8 --locale=C.UTF-8 \
      --auth-local=trust --auth-host=trust --no-sync >"$dir/log/initdb.log" 2>&1; then
    cat "$dir/log/initdb.log" >&2
    die "initdb failed"
  fi

  cat >"$dir/data/pg_hba.conf" <<HBA
# pg-sandbox: throwaway cluster for walwatch tests
# TYPE  DATABASE     USER          ADDRESS        METHOD
local   all          all                          trust
local   replication  all                          trust
host    all          $PW_ROLE   127.0.0.1/32   scram-sha-256
host    replication  $PW_ROLE   127.0.0.1/32   scram-sha-256
host    all          all           127.0.0.1/32   trust
host    replication  all           127.0.0.1/32   trust
HBA

  {
    echo ""
    echo "# ---- pg-sandbox settings ----"
    echo "wal_level = logical"
    echo "max_replication_slots = 64"
    echo "max_wal_senders = 64"
    echo "max_connections = 200"
    echo "wal_sender_timeout = 60s"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = '$dir'"
    echo "fsync = off"
    echo "synchronous_commit = on"
    echo "full_page_writes = off"
    echo "password_encryption = 'scram-sha-256'"
    echo "log_line_prefix = '%m [%p] %q%u@%d '"
    echo "log_replication_commands = on"
    if supports_output_plugin_libraries; then
      echo "output_plugin_libraries = 'pgoutput, test_decoding, wal2json'"
    fi
    local setting
    for setting in ${WALWATCH_PG_SETTINGS:-}; do
      [[ $setting =~ ^([a-z_.]+)=([^\']*)$ ]] ||
        die "WALWATCH_PG_SETTINGS: '$setting' is not name=value (no quotes)"
      echo "${BASH_REMATCH[1]} = '${BASH_REMATCH[2]}'"
    done
    echo "include_if_exists = 'sandbox_port.conf'"
  } >>"$dir/data/postgresql.conf"
  if ((IS_ROOT)); then chown -R postgres:postgres "$dir"; fi
}

# Try to start on PORT; returns 0 on success, 3 if the port was taken, 1 else.
try_start() {
  local dir=$1 port=$2
  echo "port = $port" >"$dir/data/sandbox_port.conf"
  if ((IS_ROOT)); then chown postgres:postgres "$dir/data/sandbox_port.conf"; fi
  : >"$dir/log/postgresql.log"
  if ((IS_ROOT)); then chown postgres:postgres "$dir/log/postgresql.log"; fi
  if as_owner "$BINDIR/pg_ctl" -D "$dir/data" -l "$dir/log/postgresql.log" \
      -w -t 60 start >/dev/null 2>&1; then
    return 0
  fi
  if grep -qE 'Address already in use|could not create any TCP/IP sockets|could not create lock file' \
      "$dir/log/postgresql.log" 2>/dev/null; then
    return 3
  fi
  return 1
}

cmd_start() {
  local dir port
  dir=$(abs_dir "$1")
  [[ -x "$BINDIR/initdb" ]] || die "$BINDIR/initdb not found (install postgresql-15, or set WALWATCH_PG_BINDIR)"
  [[ -x "$CLIENT_BINDIR/psql" && -x "$CLIENT_BINDIR/pg_isready" ]] ||
    die "$CLIENT_BINDIR has no psql and pg_isready (install postgresql-15: tests/tools/install-deps.sh)"
  sandbox_start "$dir" "${2:-}" || return 0
  port=$(cat "$dir/port")
  local i
  for ((i = 0; i < 300; i++)); do
    if "$CLIENT_BINDIR/pg_isready" -q -h "$dir" -p "$port" -d postgres -U postgres; then break; fi
    sleep 0.1
  done
  "$CLIENT_BINDIR/pg_isready" -q -h "$dir" -p "$port" -d postgres -U postgres ||
    die "server in $dir on port $port did not become ready (log: $dir/log/postgresql.log)"

  # The password-authenticated test role; the output plugins must be
  # installed and allowed (temporary slots, dropped at the end of this
  # session).
  local plugins="a pgoutput slot"
  if wants_wal2json; then plugins="a pgoutput or wal2json slot: is postgresql-15-wal2json installed?"; fi
  if ! {
    echo "CREATE ROLE $PW_ROLE LOGIN REPLICATION PASSWORD '$PW_PASSWORD';"
    echo "GRANT pg_read_all_data TO $PW_ROLE;"
    echo "SELECT pg_create_logical_replication_slot('pg_sandbox_check_pgoutput', 'pgoutput', true);"
    if wants_wal2json; then
      echo "SELECT pg_create_logical_replication_slot('pg_sandbox_check_wal2json', 'wal2json', true);"
    fi
  } | "$CLIENT_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres \
      >/dev/null 2>"$dir/log/setup.err"; then
    cat "$dir/log/setup.err" >&2
    die "setting up the sandbox failed (role $PW_ROLE, or $plugins)"
  fi

  say "PostgreSQL $("$BINDIR/postgres" --version | awk '{print $3}') running in $dir on port $port (log: $dir/log/postgresql.log)"
  print_env "$dir" "$port"
}

sandbox_main "$@"
