#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster with wal2json, for walwatch's tests and demo.
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
# older 15.x would refuse to start with it, so it is detected first).
#
# Without PORT, a free port is picked at random (and retried if another
# process takes it first). `start` on a DIR whose cluster is running just
# prints its env; on a stale DIR (crashed or killed cluster) it cleans up and
# starts afresh. Environment: WALWATCH_PG_BINDIR (default
# /usr/lib/postgresql/15/bin).
set -euo pipefail

BINDIR=${WALWATCH_PG_BINDIR:-/usr/lib/postgresql/15/bin}
MARKER=.walwatch-pg-sandbox
PW_ROLE=walwatch_pw
PW_PASSWORD=walwatch_pw

die() { echo "pg-sandbox: $*" >&2; exit 1; }
say() { echo "pg-sandbox: $*" >&2; }

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

IS_ROOT=0
[[ $(id -u) -eq 0 ]] && IS_ROOT=1

# Run a PostgreSQL server-side tool as the cluster's owner, from /, so an
# unreadable current directory does not matter.
as_pg() {
  if ((IS_ROOT)); then
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && "$@")
  fi
}

abs_dir() {
  local d=$1
  [[ -n "$d" ]] || die "DIR is empty"
  if [[ "$d" != /* ]]; then d="$PWD/$d"; fi
  # normalise without requiring existence
  realpath -m -- "$d"
}

print_env() {
  local dir=$1 port=$2
  echo "export WALWATCH_TEST_PGHOST=$dir WALWATCH_TEST_PGPORT=$port"
  echo "export WALWATCH_TEST_PGDATA=$dir/data WALWATCH_TEST_PW_USER=$PW_ROLE WALWATCH_TEST_PW_PASSWORD=$PW_PASSWORD"
  echo "export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres"
}

is_running() {
  local dir=$1 pid state
  [[ -f "$dir/data/postmaster.pid" ]] || return 1
  pid=$(head -n1 "$dir/data/postmaster.pid" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  # Not `pg_ctl status`: it takes a zombie for a live server, and a killed
  # postmaster whose parent is gone may never be reaped in a container.
  [[ -r "/proc/$pid/stat" ]] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
  [[ -n "$state" && "$state" != Z && "$state" != X ]] || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == postgres ]]
}

# Stop whatever cluster runs in DIR. Fast first, immediate if that hangs; as a
# last resort kill the postmaster named in DIR's own postmaster.pid.
stop_cluster() {
  local dir=$1
  [[ -f "$dir/data/postmaster.pid" ]] || return 0
  if is_running "$dir"; then
    as_pg "$BINDIR/pg_ctl" -D "$dir/data" stop -m fast -w -t 30 >/dev/null 2>&1 ||
      as_pg "$BINDIR/pg_ctl" -D "$dir/data" stop -m immediate -w -t 30 >/dev/null 2>&1 || true
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

# Remove DIR, but only if it is one of ours (marker) or empty.
remove_dir() {
  local dir=$1
  [[ -e "$dir" ]] || return 0
  [[ -d "$dir" ]] || die "$dir exists and is not a directory; not touching it"
  if [[ -e "$dir/$MARKER" ]] || [[ -z "$(ls -A "$dir" 2>/dev/null)" ]]; then
    rm -rf -- "$dir"
  else
    die "$dir is not empty and not a pg-sandbox directory (no $MARKER); not touching it"
  fi
}

check_traversable() {
  local dir=$1
  ((IS_ROOT)) || return 0
  id postgres >/dev/null 2>&1 || die "running as root but there is no 'postgres' user (is postgresql-15 installed?)"
  # the nearest existing ancestor (mkdir -p makes the rest 0755)
  local parent
  parent=$(dirname -- "$dir")
  while [[ ! -e "$parent" ]]; do parent=$(dirname -- "$parent"); done
  if ! runuser -u postgres -- test -x "$parent" 2>/dev/null; then
    die "user postgres cannot reach $parent (a parent is not o+x); use a directory under /tmp"
  fi
}

supports_output_plugin_libraries() {
  # Not `grep -q`: it would stop reading early, postgres would die of SIGPIPE,
  # and under pipefail the pipeline would fail at random.
  as_pg "$BINDIR/postgres" --describe-config 2>/dev/null |
    grep '^output_plugin_libraries[[:space:]]' >/dev/null
}

random_port() {
  # 15000..32767: below Linux's default ephemeral range
  echo $((15000 + (RANDOM % 17768)))
}

port_in_use() {
  local port=$1
  # anything accepting on 127.0.0.1:port?
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
  if command -v ss >/dev/null 2>&1 && ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
    return 0
  fi
  return 1
}

init_cluster() {
  local dir=$1
  mkdir -p "$dir/log"
  touch "$dir/$MARKER"
  if ((IS_ROOT)); then chown -R postgres:postgres "$dir"; fi
  chmod 0700 "$dir"

  if ! as_pg "$BINDIR/initdb" -D "$dir/data" -U postgres -E UTF8 --locale=C.UTF-8 \
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
  if as_pg "$BINDIR/pg_ctl" -D "$dir/data" -l "$dir/log/postgresql.log" \
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
  local dir port=${2:-} fixed_port=${2:-}
  dir=$(abs_dir "$1")
  [[ -x "$BINDIR/initdb" ]] || die "$BINDIR/initdb not found (install postgresql-15, or set WALWATCH_PG_BINDIR)"
  if [[ -n "$port" && ! "$port" =~ ^[0-9]+$ ]]; then die "bad PORT: $port"; fi

  # Already running here: idempotent.
  if [[ -e "$dir/$MARKER" ]] && is_running "$dir" && [[ -f "$dir/port" ]]; then
    local cur
    cur=$(cat "$dir/port")
    if [[ -z "$port" || "$port" == "$cur" ]]; then
      say "already running in $dir on port $cur"
      print_env "$dir" "$cur"
      return 0
    fi
    say "running in $dir on port $cur; restarting on port $port"
  fi

  # Stale or foreign DIR: clean it.
  if [[ -e "$dir" ]]; then
    if [[ -e "$dir/$MARKER" ]]; then
      stop_cluster "$dir"
    fi
    remove_dir "$dir"
  fi

  local sockpath_len=$((${#dir} + 13))
  ((sockpath_len < 108)) || die "DIR too long for a Unix socket path ($dir); use a shorter one under /tmp"

  check_traversable "$dir"
  mkdir -p -- "$dir"
  init_cluster "$dir"

  local tries=0 rc
  while :; do
    local p=$port
    if [[ -z "$p" ]]; then
      p=$(random_port)
      while port_in_use "$p"; do p=$(random_port); done
    fi
    rc=0
    try_start "$dir" "$p" || rc=$?
    if ((rc == 0)); then
      port=$p
      break
    fi
    tries=$((tries + 1))
    if ((rc == 3)) && [[ -z "$fixed_port" ]] && ((tries < 20)); then
      continue
    fi
    tail -n 30 "$dir/log/postgresql.log" >&2 || true
    die "could not start PostgreSQL in $dir on port $p (log: $dir/log/postgresql.log)"
  done

  echo "$port" >"$dir/port"
  local i
  for ((i = 0; i < 300; i++)); do
    if "$BINDIR/pg_isready" -q -h "$dir" -p "$port" -d postgres -U postgres; then break; fi
    sleep 0.1
  done
  "$BINDIR/pg_isready" -q -h "$dir" -p "$port" -d postgres -U postgres ||
    die "server in $dir on port $port did not become ready (log: $dir/log/postgresql.log)"

  # The password-authenticated test role.
  if ! "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres \
      >/dev/null 2>"$dir/log/setup.err" <<SQL; then
CREATE ROLE $PW_ROLE LOGIN REPLICATION PASSWORD '$PW_PASSWORD';
GRANT pg_read_all_data TO $PW_ROLE;
-- wal2json must be installed and allowed as an output plugin (a temporary
-- slot, dropped at the end of this session).
SELECT pg_create_logical_replication_slot('pg_sandbox_check', 'wal2json', true);
SQL
    cat "$dir/log/setup.err" >&2
    die "setting up the sandbox failed (role $PW_ROLE, or a wal2json slot: is postgresql-15-wal2json installed?)"
  fi

  say "PostgreSQL $("$BINDIR/postgres" --version | awk '{print $3}') running in $dir on port $port (log: $dir/log/postgresql.log)"
  print_env "$dir" "$port"
}

cmd_stop() {
  local dir
  dir=$(abs_dir "$1")
  [[ -e "$dir" ]] || return 0
  if [[ -e "$dir/$MARKER" ]]; then
    stop_cluster "$dir"
  fi
  remove_dir "$dir"
}

cmd_env() {
  local dir
  dir=$(abs_dir "$1")
  [[ -f "$dir/port" ]] || die "no sandbox in $dir"
  is_running "$dir" || die "the sandbox in $dir is not running"
  print_env "$dir" "$(cat "$dir/port")"
}

(($# >= 1)) || usage
case "$1" in
  start) (($# == 2 || $# == 3)) || usage; cmd_start "$2" "${3:-}" ;;
  stop) (($# == 2)) || usage; cmd_stop "$2" ;;
  env) (($# == 2)) || usage; cmd_env "$2" ;;
  -h | --help | help) usage ;;
  *) usage ;;
esac
