#!/usr/bin/env bash
# A throwaway PostgreSQL 17 cluster WITH wal2json for walwatch's tests: Debian
# 13's own postgresql-17 and postgresql-17-wal2json, run in a Debian 13
# (trixie) root made once with debootstrap. Root only (chroot needs it).
# WALWATCH_PG_DEBIAN_MAJOR=18: PostgreSQL 18 and wal2json from Debian testing
# (forky) instead, in a root of its own (see "18" below).
#
#   pg-trixie-sandbox.sh install         make the trixie root if it is missing
#                                        (about 2 minutes, 570 MB); prints its path
#   pg-trixie-sandbox.sh start DIR [PORT]  as pg-sandbox.sh: create (or reuse)
#                                        and start a cluster in DIR (making the
#                                        root first if needed); prints
#                                        `export ...` lines for eval on stdout
#   pg-trixie-sandbox.sh stop DIR        stop it and remove DIR
#   pg-trixie-sandbox.sh env DIR         print the `export ...` lines again
#
#   eval "$(tests/tools/pg-trixie-sandbox.sh start /tmp/ww-pg17w)"
#   psql -c "select pg_create_logical_replication_slot('s', 'wal2json')"
#   tests/tools/pg-trixie-sandbox.sh stop /tmp/ww-pg17w
#
# Why a chroot: Debian 12 packages PostgreSQL 15 only, the npm registry's
# 16..18 servers (install-pg-npm.sh) have no wal2json and no headers to build
# it with, and Debian 13's wal2json.so needs glibc 2.38 (__isoc23_strtol), so
# it loads only into a Debian 13 server. The clients stay the host's: Debian
# 12's psql and libpq (walwatch, the tests) talk to the server through its
# Unix socket in DIR or 127.0.0.1:PORT, as with pg-sandbox.sh.
#
# DIR is the same on both sides: every command run in the root runs in a
# mount namespace of its own (unshare --mount) that bind-mounts DIR at
# ROOT/DIR and mounts /proc and /dev; the postmaster keeps that namespace
# alive, and when the last process in it exits the kernel drops its mounts.
# Nothing is ever mounted in the host's namespace, so there is nothing to
# unmount, even after a crash or a SIGKILL. `stop` removes the empty
# mount point ROOT/DIR. DIR must not pass through a symlink inside the root
# (any directory under /tmp is fine) and must be short (socket path < 108).
#
# Layout of DIR, settings, roles and authentication: exactly pg-sandbox.sh's
# (DIR/data, DIR/log/postgresql.log, DIR/.s.PGSQL.PORT, DIR/port, the marker;
# wal_level=logical, ..., output_plugin_libraries = 'pgoutput, test_decoding,
# wal2json'; WALWATCH_PG_SETTINGS), plus DIR/debian-root: the root and major
# that `stop` uses. The files in DIR belong to the root's `postgres` user,
# whose uid may be another user's on the host (here: messagebus).
#
# The root: /var/cache/walwatch/trixie-pg17 (WALWATCH_PG_TRIXIE_ROOT), made by
#   debootstrap --variant=minbase trixie ROOT MIRROR
#   chroot ROOT apt-get install --no-install-recommends postgresql-17 postgresql-17-wal2json
# (no cluster is created, no service started), from the host's own Debian
# mirror (the URIs of /etc/apt's sources, or WALWATCH_DEBIAN_MIRROR), plus
# trixie-updates and trixie-security. Installs debootstrap on the host if it
# is missing. The packages are whatever trixie serves on the day the root is
# made; ROOT/.walwatch-trixie-root records them. `rm -rf ROOT` (with no
# sandbox running) and the next `install` or `start` makes it again. Two runs
# at once: one makes it (flock ROOT.lock), the other waits for it.
#
# 18 (WALWATCH_PG_DEBIAN_MAJOR=18): Debian has PostgreSQL 18 only in testing,
# forky, so its root is /var/cache/walwatch/forky-pg18, made with
# debootstrap's sid script (Debian 12's debootstrap has no forky script), from
# forky main alone. Testing moves: the root holds whatever forky had the day
# it was made. This mirror's forky Release file was past its Valid-Until (by
# 31 days on 2026-12-07), so apt in that root is told not to check it
# (Acquire::Check-Valid-Until "false"; the signatures are still checked).
set -euo pipefail

MAJOR=${WALWATCH_PG_DEBIAN_MAJOR:-17}
case $MAJOR in
  17) SUITE=trixie ;;
  18) SUITE=forky ;;
  *) echo "pg-trixie-sandbox: WALWATCH_PG_DEBIAN_MAJOR must be 17 or 18, not '$MAJOR'" >&2; exit 2 ;;
esac
PACKAGES="postgresql-$MAJOR postgresql-$MAJOR-wal2json"
ROOT=${WALWATCH_PG_TRIXIE_ROOT:-/var/cache/walwatch/$SUITE-pg$MAJOR}
ROOT_STAMP=.walwatch-trixie-root
RECIPE="debootstrap --variant=minbase $SUITE; apt-get install --no-install-recommends $PACKAGES"
BINDIR=/usr/lib/postgresql/$MAJOR/bin   # inside the root
CLIENT_BINDIR=/usr/lib/postgresql/15/bin # the host's psql and pg_isready
MARKER=.walwatch-pg-sandbox
PW_ROLE=walwatch_pw
PW_PASSWORD=walwatch_pw

SANDBOX_NAME=pg-trixie-sandbox
SANDBOX_USER=postgres
SANDBOX_PACKAGE=postgresql-$MAJOR
SERVER_KIND="PostgreSQL $MAJOR (root $ROOT)"
SERVER_LOG=log/postgresql.log
SOCKET_SUFFIX_LEN=13
# shellcheck source=tests/tools/sandbox-lib.sh
source "$(dirname "$0")/sandbox-lib.sh"

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

print_env() {
  local dir=$1 port=$2
  echo "export WALWATCH_TEST_PGHOST=$dir WALWATCH_TEST_PGPORT=$port"
  echo "export WALWATCH_TEST_PGDATA=$dir/data WALWATCH_TEST_PW_USER=$PW_ROLE WALWATCH_TEST_PW_PASSWORD=$PW_PASSWORD"
  echo "export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres"
}

# ---------------------------------------------------------------------------
# The root

# The host's Debian mirror (.../debian) and security mirror
# (.../debian-security), from /etc/apt's sources.
host_mirror() {
  local kind=$1 url
  url=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
          2>/dev/null | grep -oE "https?://[^[:space:]]+/$kind/?([[:space:]]|$)" | head -n1 | tr -d '[:space:]' ||
          true)
  echo "${url%/}"
}

# Runs "$@" in a private mount namespace with /proc and /dev mounted in the
# tree TREE (and, with a DIR, DIR bind-mounted at TREE/DIR), chrooted there.
# The mounts go away with the namespace's last process.
in_tree() {
  local tree=$1 dir=$2
  shift 2
  unshare --mount --propagation private /bin/bash -c '
    set -e
    tree=$1 dir=$2
    shift 2
    mount -t proc proc "$tree/proc"
    mount --rbind /dev "$tree/dev"
    if [[ -n $dir ]]; then mount --bind "$dir" "$tree$dir"; fi
    exec chroot "$tree" "$@"
  ' in_tree "$tree" "$dir" "$@"
}

# Runs a server tool in the root as its `postgres` user, DIR visible (chroot
# starts it in /).
in_root() {
  local dir=$1
  shift
  chroot "$ROOT" mkdir -p -- "$dir"   # the mount point
  in_tree "$ROOT" "$dir" /usr/sbin/runuser -u postgres -- "$@"
}

root_ready() {
  [[ -f $ROOT/$ROOT_STAMP && -x $ROOT$BINDIR/postgres && -f $ROOT/usr/lib/postgresql/$MAJOR/lib/wal2json.so ]] &&
    grep -qxF "recipe: $RECIPE" "$ROOT/$ROOT_STAMP"
}

# Runs "$@" with its output in LOG; on failure prints LOG's tail and dies.
logged() {
  local log=$1 what=$2
  shift 2
  if ! "$@" >>"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "$what failed (whole log: $log)"
  fi
}

make_root() {
  local mirror security tree log start
  mirror=${WALWATCH_DEBIAN_MIRROR:-$(host_mirror debian)}
  mirror=${mirror:-http://deb.debian.org/debian}
  security=$(host_mirror debian-security)
  security=${security:-${mirror%/debian}/debian-security}
  tree=$ROOT.new
  log=$ROOT.log
  start=$SECONDS
  : >"$log"
  say "making the $SUITE root $ROOT from $mirror (about 2 minutes; log: $log)"

  if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >>"$log" 2>&1 || {
      logged "$log" "apt-get update" apt-get update
      logged "$log" "apt-get install debootstrap" \
        env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
    }
  fi
  local script=/usr/share/debootstrap/scripts/$SUITE
  if [[ $SUITE == forky && ! -e $script ]]; then script=/usr/share/debootstrap/scripts/sid; fi
  [[ -e $script ]] || die "this debootstrap has no script for $SUITE ($script)"

  rm -rf -- "$tree"
  # In a namespace of its own too: debootstrap mounts /proc and /sys in the
  # tree and would leave them mounted if it were killed.
  logged "$log" "debootstrap --variant=minbase $SUITE $tree $mirror" \
    unshare --mount --propagation private debootstrap --variant=minbase "$SUITE" "$tree" "$mirror" "$script"

  if [[ $SUITE == trixie ]]; then
    printf 'deb %s %s main\n' "$mirror" trixie "$mirror" trixie-updates "$security" trixie-security \
      >"$tree/etc/apt/sources.list"
  else
    echo "deb $mirror $SUITE main" >"$tree/etc/apt/sources.list"
    echo 'Acquire::Check-Valid-Until "false";' >"$tree/etc/apt/apt.conf.d/99walwatch-valid-until"
  fi
  # No cluster made by postgresql-common, no service started by its postinst.
  mkdir -p "$tree/etc/postgresql-common/createcluster.d"
  echo "create_main_cluster = false" >"$tree/etc/postgresql-common/createcluster.d/walwatch.conf"
  printf '#!/bin/sh\nexit 101\n' >"$tree/usr/sbin/policy-rc.d"
  chmod 0755 "$tree/usr/sbin/policy-rc.d"

  logged "$log" "apt-get update in the root" in_tree "$tree" "" apt-get update
  # shellcheck disable=SC2086
  logged "$log" "apt-get install $PACKAGES in the root" \
    in_tree "$tree" "" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends $PACKAGES
  in_tree "$tree" "" apt-get clean >>"$log" 2>&1 || true

  [[ -f $tree/usr/lib/postgresql/$MAJOR/lib/wal2json.so ]] ||
    die "postgresql-$MAJOR-wal2json installed no $tree/usr/lib/postgresql/$MAJOR/lib/wal2json.so"
  {
    echo "recipe: $RECIPE"
    echo "mirror: $mirror"
    echo "made: $(date -u +%FT%TZ)"
    in_tree "$tree" "" dpkg-query -W -f 'package: ${Package} ${Version}\n' \
      libc6 postgresql-$MAJOR postgresql-$MAJOR-wal2json
  } >"$tree/$ROOT_STAMP"

  # Replace an outdated root, unless a server still runs from it.
  if [[ -e $ROOT ]]; then
    local p
    for p in /proc/[0-9]*; do
      if [[ $(readlink "$p/root" 2>/dev/null) == "$ROOT" ]]; then
        die "an outdated $ROOT is in use (process ${p#/proc/}); stop its sandboxes, then run again"
      fi
    done
    rm -rf -- "$ROOT"
  fi
  mv -- "$tree" "$ROOT"
  say "made $ROOT in $((SECONDS - start))s, $(du -sxh "$ROOT" | cut -f1)"
}

ensure_root() {
  ((IS_ROOT)) ||
    die "must run as root: the server runs in a chroot (a Debian $SUITE root), and chroot, unshare and mount need root"
  root_ready && return 0
  mkdir -p -- "$(dirname -- "$ROOT")"
  local lock_fd
  exec {lock_fd}>"$ROOT.lock"
  flock "$lock_fd"
  root_ready || make_root
  exec {lock_fd}>&-
}

# ---------------------------------------------------------------------------
# The server (the functions sandbox-lib.sh's sandbox_start and sandbox_stop
# call)

# Instead of sandbox-lib.sh's: DIR's parents on the host do not matter (the
# server sees DIR at the same path in the root); in the root, DIR must be
# reached without a symlink, or the bind mount and the server's paths differ.
check_traversable() {
  local dir=$1 resolved
  resolved=$(chroot "$ROOT" realpath -m -- "$dir")
  [[ $resolved == "$dir" ]] ||
    die "$dir passes through a symlink in the root ($resolved there); use a directory under /tmp"
}

is_running() {
  local dir=$1
  [[ -f "$dir/data/postmaster.pid" ]] || return 1
  process_alive "$(head -n1 "$dir/data/postmaster.pid" 2>/dev/null || true)" postgres
}

# Stop whatever cluster runs in DIR (fast, immediate if that hangs, then
# SIGKILL of its postmaster), then remove the mount point ROOT/DIR. With the
# root and major DIR/debian-root names (a 17 sandbox stopped with
# WALWATCH_PG_DEBIAN_MAJOR=18 set, or the other way round); a subshell, so
# a `start` that stops a stale cluster keeps its own.
stop_server() (
  local dir=$1
  if [[ -f $dir/debian-root ]]; then
    ROOT=$(sed -n 1p "$dir/debian-root")
    BINDIR=/usr/lib/postgresql/$(sed -n 2p "$dir/debian-root")/bin
  fi
  if [[ -f "$dir/data/postmaster.pid" ]] && is_running "$dir"; then
    in_root "$dir" "$BINDIR/pg_ctl" -D "$dir/data" stop -m fast -w -t 30 >/dev/null 2>&1 ||
      in_root "$dir" "$BINDIR/pg_ctl" -D "$dir/data" stop -m immediate -w -t 30 >/dev/null 2>&1 || true
    if is_running "$dir"; then
      local pid
      pid=$(head -n1 "$dir/data/postmaster.pid" 2>/dev/null || true)
      if [[ "$pid" =~ ^[0-9]+$ ]]; then
        say "postmaster $pid did not stop; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 1
      fi
    fi
  fi
  rmdir -- "$ROOT$dir" 2>/dev/null || true
)

init_server() {
  local dir=$1 owner
  owner=$(chroot "$ROOT" id -u postgres):$(chroot "$ROOT" id -g postgres)
  mkdir -p "$dir/log"
  touch "$dir/$MARKER"
  printf '%s\n%s\n' "$ROOT" "$MAJOR" >"$dir/debian-root"
  chown -R "$owner" "$dir"
  chmod 0700 "$dir"

  if ! in_root "$dir" "$BINDIR/initdb" -D "$dir/data" -U postgres -E UTF8 --locale=C.UTF-8 \
      --auth-local=trust --auth-host=trust --no-sync >"$dir/log/initdb.log" 2>&1; then
    cat "$dir/log/initdb.log" >&2
    die "initdb failed"
  fi

  cat >"$dir/data/pg_hba.conf" <<HBA
# pg-trixie-sandbox: throwaway cluster for walwatch tests
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
    echo "# ---- pg-trixie-sandbox settings (pg-sandbox.sh's) ----"
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
    # Not `grep -q`: postgres would die of SIGPIPE (see pg-sandbox.sh).
    if in_root "$dir" "$BINDIR/postgres" --describe-config 2>/dev/null |
        grep '^output_plugin_libraries[[:space:]]' >/dev/null; then
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
  chown -R "$owner" "$dir"
}

# Try to start on PORT; returns 0 on success, 3 if the port was taken, 1 else.
try_start() {
  local dir=$1 port=$2 owner
  owner=$(stat -c %u:%g "$dir")
  echo "port = $port" >"$dir/data/sandbox_port.conf"
  : >"$dir/log/postgresql.log"
  chown "$owner" "$dir/data/sandbox_port.conf" "$dir/log/postgresql.log"
  if in_root "$dir" "$BINDIR/pg_ctl" -D "$dir/data" -l "$dir/log/postgresql.log" \
      -w -t 60 start >"$dir/log/pg_ctl.log" 2>&1; then
    return 0
  fi
  if grep -qE 'Address already in use|could not create any TCP/IP sockets|could not create lock file' \
      "$dir/log/postgresql.log" 2>/dev/null; then
    return 3
  fi
  cat "$dir/log/pg_ctl.log" >&2 || true
  return 1
}

cmd_start() {
  local dir port
  dir=$(abs_dir "$1")
  [[ -x "$CLIENT_BINDIR/psql" && -x "$CLIENT_BINDIR/pg_isready" ]] ||
    die "$CLIENT_BINDIR has no psql and pg_isready (install postgresql-15: tests/tools/install-deps.sh)"
  ensure_root
  sandbox_start "$dir" "${2:-}" || return 0
  port=$(cat "$dir/port")
  local i
  for ((i = 0; i < 300; i++)); do
    if "$CLIENT_BINDIR/pg_isready" -q -h "$dir" -p "$port" -d postgres -U postgres; then break; fi
    sleep 0.1
  done
  "$CLIENT_BINDIR/pg_isready" -q -h "$dir" -p "$port" -d postgres -U postgres ||
    die "server in $dir on port $port did not become ready (log: $dir/log/postgresql.log)"

  if ! {
    echo "CREATE ROLE $PW_ROLE LOGIN REPLICATION PASSWORD '$PW_PASSWORD';"
    echo "GRANT pg_read_all_data TO $PW_ROLE;"
    echo "SELECT pg_create_logical_replication_slot('pg_sandbox_check_pgoutput', 'pgoutput', true);"
    echo "SELECT pg_create_logical_replication_slot('pg_sandbox_check_wal2json', 'wal2json', true);"
  } | "$CLIENT_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres \
      >/dev/null 2>"$dir/log/setup.err"; then
    cat "$dir/log/setup.err" >&2
    die "setting up the sandbox failed (role $PW_ROLE, or a pgoutput or wal2json slot)"
  fi

  local version
  version=$("$CLIENT_BINDIR/psql" -X -At -h "$dir" -p "$port" -U postgres -d postgres \
    -c 'show server_version' 2>/dev/null || echo "$MAJOR")
  say "PostgreSQL $version with wal2json (root $ROOT) running in $dir on port $port (log: $dir/log/postgresql.log)"
  print_env "$dir" "$port"
}

cmd_stop() {
  ((IS_ROOT)) || die "must run as root (the server runs in a chroot)"
  sandbox_stop "$1"
}

case "${1:-}" in
  install) (($# == 1)) || usage; ensure_root; echo "$ROOT" ;;
  stop) (($# == 2)) || usage; cmd_stop "$2" ;;
  *) sandbox_main "$@" ;;
esac
