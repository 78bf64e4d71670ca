#!/usr/bin/env bash
# A throwaway MariaDB server with a row-based binary log, for walwatch's tests
# and demo.
#
#   mariadb-sandbox.sh start DIR [PORT]   create (or reuse) and start a server in
#                                         DIR; prints `export ...` lines for eval
#   mariadb-sandbox.sh stop DIR           stop it (mariadb-admin shutdown) and
#                                         remove DIR
#   mariadb-sandbox.sh env DIR            print the `export ...` lines again
#
#   eval "$(tests/tools/mariadb-sandbox.sh start /tmp/ww-my)"
#   mariadb --socket="$WALWATCH_TEST_MYSOCKET" -uroot -e 'select 1'
#   tests/tools/mariadb-sandbox.sh stop /tmp/ww-my
# (Pass --socket: Debian's client option files name the system server's
# socket, and they win over $MYSQL_UNIX_PORT.)
#
# Layout of DIR:
#   DIR/data                    the data directory
#   DIR/binlog/mariadb-bin.*    the binary log (and its index)
#   DIR/log/mariadbd.log        the server's error log
#   DIR/tmp                     its tmpdir
#   DIR/my.cnf                  the only option file the server reads
#   DIR/mariadbd.sock           the Unix socket
#   DIR/mariadbd.pid            the server's pid
#   DIR/port                    the port in use
#   DIR/.walwatch-mariadb-sandbox  marker; `stop` and a restarting `start` only
#                               ever delete a DIR that carries it (or an empty one)
#
# Accounts:
#   - root@localhost, no password (Unix socket or 127.0.0.1).
#   - walwatch_pw@'%' with password `walwatch_pw`, mysql_native_password,
#     granted REPLICATION SLAVE, REPLICATION CLIENT and SELECT on every table
#     (exported as WALWATCH_TEST_MY_PW_USER/_PASSWORD), so that password and
#     wrong-password tests are possible.
#
# Settings: log_bin, binlog_format=ROW, binlog_row_image=FULL,
# binlog_row_metadata=FULL (column names in every TABLE_MAP event),
# binlog_checksum=CRC32, server_id=1, gtid_strict_mode=ON,
# character_set_server=utf8mb4, bind-address=127.0.0.1, skip-name-resolve,
# and durability off (innodb_flush_log_at_trx_commit=2, sync_binlog=0): a
# test server. MARIADB_SANDBOX_EXTRA adds option lines to the [mariadbd]
# group, e.g. MARIADB_SANDBOX_EXTRA=skip-log-bin for a server without a
# binary log.
#
# Running as root: mariadbd refuses root, so the server and
# mariadb-install-db run as the `mysql` user (runuser), DIR is chowned to
# mysql, and every parent of DIR must be traversable by mysql. A directory
# under /tmp always works (`mktemp -d /tmp/walwatch-my.XXXXXX`). As any other
# user they run as that user. Keep DIR short: DIR/mariadbd.sock must fit in
# 107 bytes.
#
# Without PORT a free port is picked at random (and retried if another
# process takes it first). `start` on a DIR whose server runs prints its env;
# on a stale DIR (crashed or killed server) it cleans up and starts afresh.
set -euo pipefail

MARKER=.walwatch-mariadb-sandbox
PW_USER=walwatch_pw
PW_PASSWORD=walwatch_pw
MARIADBD=${WALWATCH_MARIADBD:-/usr/sbin/mariadbd}

SANDBOX_NAME=mariadb-sandbox
SANDBOX_USER=mysql
SANDBOX_PACKAGE=mariadb-server
SERVER_KIND=MariaDB
SERVER_LOG=log/mariadbd.log
SOCKET_SUFFIX_LEN=14  # /mariadbd.sock
# shellcheck source=tests/tools/sandbox-lib.sh
source "$(dirname "$0")/sandbox-lib.sh"

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

print_env() {
  local dir=$1 port=$2
  echo "export WALWATCH_TEST_MYSOCKET=$dir/mariadbd.sock WALWATCH_TEST_MYHOST=127.0.0.1 WALWATCH_TEST_MYPORT=$port WALWATCH_TEST_MYUSER=root"
  echo "export WALWATCH_TEST_MYDIR=$dir WALWATCH_TEST_MY_PW_USER=$PW_USER WALWATCH_TEST_MY_PW_PASSWORD=$PW_PASSWORD"
}

server_pid() {
  local dir=$1 pid
  [[ -f "$dir/mariadbd.pid" ]] || return 1
  pid=$(head -n1 "$dir/mariadbd.pid" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  echo "$pid"
}

is_running() {
  local pid
  pid=$(server_pid "$1") || return 1
  process_alive "$pid" mariadbd
}

wait_gone() {
  local pid=$1 tenths=$2 i
  for ((i = 0; i < tenths; i++)); do
    [[ -e "/proc/$pid" ]] || return 0
    local state
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
    [[ "$state" == Z || "$state" == X ]] && return 0
    sleep 0.1
  done
  return 1
}

# Stop the server of DIR: a clean shutdown first; as a last resort kill the
# pid named in DIR's own pid file.
stop_server() {
  local dir=$1 pid
  is_running "$dir" || return 0
  pid=$(server_pid "$dir")
  mariadb-admin --no-defaults --socket="$dir/mariadbd.sock" -uroot \
    --connect-timeout=10 shutdown >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" 600; then
    say "mariadbd $pid did not stop in 60 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 100 || true
  fi
}

write_config() {
  local dir=$1 port=$2
  {
    echo "# mariadb-sandbox: throwaway server for walwatch tests"
    echo "[mariadbd]"
    echo "datadir = $dir/data"
    echo "socket = $dir/mariadbd.sock"
    echo "pid-file = $dir/mariadbd.pid"
    echo "log-error = $dir/log/mariadbd.log"
    # Its own: a starting server removes the temporary files it finds in
    # tmpdir, other sandboxes' too.
    echo "tmpdir = $dir/tmp"
    echo "port = $port"
    echo "bind-address = 127.0.0.1"
    echo "skip-name-resolve"
    echo "server_id = 1"
    echo "log_bin = $dir/binlog/mariadb-bin"
    echo "binlog_format = ROW"
    echo "binlog_row_image = FULL"
    echo "binlog_row_metadata = FULL"
    echo "binlog_checksum = CRC32"
    echo "gtid_strict_mode = ON"
    echo "character_set_server = utf8mb4"
    echo "collation_server = utf8mb4_general_ci"
    echo "max_connections = 200"
    echo "innodb_buffer_pool_size = 128M"
    echo "innodb_log_file_size = 64M"
    echo "innodb_flush_log_at_trx_commit = 2"
    echo "sync_binlog = 0"
    echo "max_allowed_packet = 256M"
    echo "skip-log-slave-updates"
    if [[ -n "${MARIADB_SANDBOX_EXTRA:-}" ]]; then
      echo "# MARIADB_SANDBOX_EXTRA"
      tr ';' '\n' <<<"$MARIADB_SANDBOX_EXTRA"
    fi
  } >"$dir/my.cnf"
  if ((IS_ROOT)); then chown mysql:mysql "$dir/my.cnf"; fi
}

init_server() {
  local dir=$1
  mkdir -p "$dir/log" "$dir/binlog" "$dir/data" "$dir/tmp"
  touch "$dir/$MARKER"
  write_config "$dir" 0
  if ((IS_ROOT)); then chown -R mysql:mysql "$dir"; fi
  chmod 0755 "$dir"
  local user_opt=()
  ((IS_ROOT)) && user_opt=(--user=mysql)
  if ! as_owner mariadb-install-db --defaults-file="$dir/my.cnf" "${user_opt[@]}" \
      --auth-root-authentication-method=normal --skip-test-db \
      --skip-name-resolve >"$dir/log/install-db.log" 2>&1; then
    cat "$dir/log/install-db.log" >&2
    tail -n 20 "$dir/log/mariadbd.log" >&2 || true
    die "mariadb-install-db failed"
  fi
}

# Start on PORT; returns 0 on success, 3 if the port was taken, 1 else.
try_start() {
  local dir=$1 port=$2 pid i
  write_config "$dir" "$port"
  : >"$dir/log/mariadbd.log"
  if ((IS_ROOT)); then chown mysql:mysql "$dir/log/mariadbd.log"; fi
  rm -f "$dir/mariadbd.pid"
  # Detached from this script's stdio, so that a caller reading our output
  # (eval "$(...)", ctest) is not held open by the server.
  # setpriv, not runuser: it execs the server, where runuser stays its
  # parent and stops itself for good when the server is stopped (SIGSTOP,
  # as a test of a silent server does).
  local run=()
  ((IS_ROOT)) && run=(setpriv --reuid=mysql --regid=mysql --init-groups --)
  (cd / && exec setsid "${run[@]}" "$MARIADBD" --defaults-file="$dir/my.cnf") \
    </dev/null >>"$dir/log/mariadbd.log" 2>&1 &
  # Ready once it answers on its socket; failed once its log says so.
  for ((i = 0; i < 1200; i++)); do
    if mariadb-admin --no-defaults --socket="$dir/mariadbd.sock" -uroot \
        --connect-timeout=2 ping >/dev/null 2>&1; then
      return 0
    fi
    if grep -qE 'Address already in use|Do you already have another' "$dir/log/mariadbd.log" 2>/dev/null; then
      pid=$(server_pid "$dir" || true)
      if [[ -n "$pid" ]]; then wait_gone "$pid" 300 || true; fi
      return 3
    fi
    if grep -qE '\[ERROR\] Aborting' "$dir/log/mariadbd.log" 2>/dev/null; then
      return 1
    fi
    sleep 0.1
  done
  return 1
}

cmd_start() {
  local dir port
  dir=$(abs_dir "$1")
  [[ -x "$MARIADBD" ]] || die "$MARIADBD not found (install mariadb-server, or set WALWATCH_MARIADBD)"
  command -v mariadb-install-db >/dev/null || die "mariadb-install-db not found (install mariadb-server)"
  sandbox_start "$dir" "${2:-}" || return 0
  port=$(cat "$dir/port")

  if ! mariadb --no-defaults --socket="$dir/mariadbd.sock" -uroot \
      >/dev/null 2>"$dir/log/setup.err" <<SQL; then
CREATE USER '$PW_USER'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('$PW_PASSWORD');
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '$PW_USER'@'%';
SQL
    cat "$dir/log/setup.err" >&2
    die "setting up the sandbox failed (user $PW_USER)"
  fi

  say "MariaDB $("$MARIADBD" --version | awk '{print $3}') running in $dir on port $port (log: $dir/log/mariadbd.log)"
  print_env "$dir" "$port"
}

sandbox_main "$@"
