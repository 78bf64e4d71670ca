# shellcheck shell=bash
# Helpers shared by the throwaway-server scripts (pg-sandbox.sh,
# mariadb-sandbox.sh); sourced, not run. Before sourcing, set:
#   SANDBOX_NAME     the prefix of messages ("pg-sandbox")
#   SANDBOX_USER     the OS user the server runs as when the script runs as root
#   SANDBOX_PACKAGE  what to install when that user is missing
#   MARKER           the file that marks a directory as the script's own
# Needs bash with `set -euo pipefail` semantics in mind: every helper returns
# 0 unless it says otherwise.

die() { echo "$SANDBOX_NAME: $*" >&2; exit 1; }
say() { echo "$SANDBOX_NAME: $*" >&2; }

IS_ROOT=0
[[ $(id -u) -eq 0 ]] && IS_ROOT=1

# Run a server-side tool as the server's owner, from /, so an unreadable
# current directory does not matter.
as_owner() {
  if ((IS_ROOT)); then
    (cd / && runuser -u "$SANDBOX_USER" -- "$@")
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

# Whether process PID is alive (not a zombie) and named COMM. Not the
# server's own status tool: it takes a zombie for a live server, and a killed
# server whose parent is gone may never be reaped in a container.
process_alive() {
  local pid=$1 comm=$2 state
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/stat" ]] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
  [[ -n "$state" && "$state" != Z && "$state" != X ]] || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$comm" ]]
}

# Remove DIR, but only if it is one of ours (marker) or empty.
remove_dir() {
  local dir=$1
  [[ -e "$dir" ]] || return 0
  [[ -d "$dir" ]] || die "$dir exists and is not a directory; not touching it"
  if [[ -e "$dir/$MARKER" ]] || [[ -z "$(ls -A "$dir" 2>/dev/null)" ]]; then
    rm -rf -- "$dir"
  else
    die "$dir is not empty and not a $SANDBOX_NAME directory (no $MARKER); not touching it"
  fi
}

check_traversable() {
  local dir=$1
  ((IS_ROOT)) || return 0
  id "$SANDBOX_USER" >/dev/null 2>&1 ||
    die "running as root but there is no '$SANDBOX_USER' user (is $SANDBOX_PACKAGE installed?)"
  # the nearest existing ancestor (mkdir -p makes the rest 0755)
  local parent
  parent=$(dirname -- "$dir")
  while [[ ! -e "$parent" ]]; do parent=$(dirname -- "$parent"); done
  if ! runuser -u "$SANDBOX_USER" -- test -x "$parent" 2>/dev/null; then
    die "user $SANDBOX_USER cannot reach $parent (a parent is not o+x); use a directory under /tmp"
  fi
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

# Starts a server in DIR on PORT, or on a free port picked at random (and
# retried if another process takes it first). Uses the script's is_running
# DIR, stop_server DIR, init_server DIR, try_start DIR PORT (0: started, 3:
# the port was taken, else failed) and print_env DIR PORT, and its
# SERVER_KIND ("MariaDB"), SERVER_LOG (the log under DIR) and
# SOCKET_SUFFIX_LEN (bytes the socket path adds to DIR). Returns 0 once
# started, with the port in DIR/port; 1 if it was running there already (its
# env printed).
sandbox_start() {
  local dir=$1 port=${2:-} fixed_port=${2:-}
  if [[ -n "$port" && ! "$port" =~ ^[0-9]+$ ]]; then die "bad PORT: $port"; fi

  # Already running here: idempotent.
  if [[ -e "$dir/$MARKER" ]] && is_running "$dir" && [[ -f "$dir/port" ]]; then
    local cur
    cur=$(cat "$dir/port")
    if [[ -z "$port" || "$port" == "$cur" ]]; then
      say "already running in $dir on port $cur"
      print_env "$dir" "$cur"
      return 1
    fi
    say "running in $dir on port $cur; restarting on port $port"
  fi

  # Stale or foreign DIR: clean it.
  if [[ -e "$dir" ]]; then
    if [[ -e "$dir/$MARKER" ]]; then stop_server "$dir"; fi
    remove_dir "$dir"
  fi

  ((${#dir} + SOCKET_SUFFIX_LEN < 108)) ||
    die "DIR too long for a Unix socket path ($dir); use a shorter one under /tmp"

  check_traversable "$dir"
  mkdir -p -- "$dir"
  init_server "$dir"

  local tries=0 rc p
  while :; do
    p=$port
    if [[ -z "$p" ]]; then
      p=$(random_port)
      while port_in_use "$p"; do p=$(random_port); done
    fi
    rc=0
    try_start "$dir" "$p" || rc=$?
    if ((rc == 0)); then
      break
    fi
    tries=$((tries + 1))
    if ((rc == 3)) && [[ -z "$fixed_port" ]] && ((tries < 20)); then
      continue
    fi
    tail -n 30 "$dir/$SERVER_LOG" >&2 || true
    stop_server "$dir"
    die "could not start $SERVER_KIND in $dir on port $p (log: $dir/$SERVER_LOG)"
  done
  echo "$p" >"$dir/port"
}

sandbox_stop() {
  local dir
  dir=$(abs_dir "$1")
  [[ -e "$dir" ]] || return 0
  if [[ -e "$dir/$MARKER" ]]; then stop_server "$dir"; fi
  remove_dir "$dir"
}

sandbox_env() {
  local dir
  dir=$(abs_dir "$1")
  [[ -f "$dir/port" ]] || die "no sandbox in $dir"
  is_running "$dir" || die "the sandbox in $dir is not running"
  print_env "$dir" "$(cat "$dir/port")"
}

# The command line: start DIR [PORT] (the script's cmd_start), stop DIR,
# env DIR; anything else prints the script's usage.
sandbox_main() {
  (($# >= 1)) || usage
  case "$1" in
    start) (($# == 2 || $# == 3)) || usage; cmd_start "$2" "${3:-}" ;;
    stop) (($# == 2)) || usage; sandbox_stop "$2" ;;
    env) (($# == 2)) || usage; sandbox_env "$2" ;;
    *) usage ;;
  esac
}
