# Shared by fanout_bench.sh, memory_bench.sh, replay_bench.sh and soak.sh
# (sourced, not run): a throwaway PostgreSQL with Clusterpedia's table,
# walwatch started and stopped, and /proc figures of a process.
#
#   source tests/bench/bench_lib.sh
#   bench_init NAME          work directory, sandbox, schema; sets ROOT, DIR,
#                            CONNINFO, WALWATCH_BIN, BENCH_WRITER,
#                            FANOUT_CLIENT, WRITER_DB; cleanup on exit
#   start_walwatch SLOT [FLAGS...]   sets WALWATCH_PID, SOCK, METRICS_ADDR;
#                            returns once /readyz answers 200
#
# BENCH_DB=mysql (set before bench_init): a throwaway MariaDB
# (tests/tools/mariadb-sandbox.sh) with schema/mysql/clusterpedia.sql in
# database `bench` in place of PostgreSQL; sets MYSQL_CONNINFO (walwatch's
# --mysql-conninfo, root over TCP; with BENCH_MYSQL_TRANSPORT=socket over
# the Unix socket, as CONNINFO reaches PostgreSQL) and MY_PORT, and my_q /
# my_v run the mariadb client on it (my_v: tab-separated rows, no header).
# WRITER_DB is bench_writer's database argument either way, and
# start_walwatch starts walwatch --source mysql with a server id derived
# from SLOT.
#   stop_walwatch [SIGNAL]   TERM by default; waits for the exit
#   bench_build DIR JOBS TARGET...   configure DIR for the benchmarks (with
#                            the -march walwatch ships with) and build TARGETs
#
# Environment: WALWATCH_BIN (default build-bench/walwatch, else
# build/walwatch), BENCH_KEEP=1 keeps the work directory, BENCH_TIMEOUT (600)
# bounds any one wait.
# shellcheck shell=bash
# shellcheck disable=SC2034  # variables for the scripts that source this

bench_say() { echo "${BENCH_NAME:-bench}: $*" >&2; }

# The -march walwatch ships with (CMakeLists.txt: haswell on x86-64), unless
# WALWATCH_MARCH says otherwise: a build directory configured before that
# default changed keeps its cached x86-64-v3, which compiles simdjson's
# fallback kernel.
bench_build() {
  local dir=$1 jobs=$2
  shift 2
  local march_args=()
  if [[ -n "${WALWATCH_MARCH+set}" ]]; then
    march_args=("-DWALWATCH_MARCH=$WALWATCH_MARCH")
  elif [[ "$(uname -m)" == x86_64 ]]; then
    march_args=(-DWALWATCH_MARCH=haswell)
  fi
  cmake -S . -B "$dir" -DWALWATCH_BUILD_BENCH=ON -DWALWATCH_BUILD_TESTS=OFF \
    "${march_args[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs" --target "$@"
}
bench_die() { bench_say "$*"; exit 1; }

bench_init() {
  BENCH_NAME=$1
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [[ -z "${WALWATCH_BIN:-}" ]]; then
    WALWATCH_BIN=$ROOT/build-bench/walwatch
    [[ -x "$WALWATCH_BIN" ]] || WALWATCH_BIN=$ROOT/build/walwatch
  fi
  local bin_dir
  bin_dir=$(dirname "$WALWATCH_BIN")
  BENCH_WRITER=${BENCH_WRITER:-$bin_dir/bench_writer}
  FANOUT_CLIENT=${FANOUT_CLIENT:-$bin_dir/fanout_client}
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-600}
  local b
  for b in "$WALWATCH_BIN" "$BENCH_WRITER" "$FANOUT_CLIENT"; do
    [[ -x "$b" ]] || bench_die "no $b; build the bench targets first (make bench builds them)"
  done
  # Thousands of connections: the client and walwatch need the descriptors.
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  WALWATCH_PID=""
  CLIENT_PID=""
  DIR=$(mktemp -d "/tmp/ww-$BENCH_NAME.XXXXXX")
  chmod 0755 "$DIR"
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  if [[ "${BENCH_DB:-postgres}" == mysql ]]; then
    sandbox_env=$("$ROOT/tests/tools/mariadb-sandbox.sh" start "$DIR/my")  # set -e stops here on failure
    eval "$sandbox_env"
    MY_SOCKET=$WALWATCH_TEST_MYSOCKET MY_PORT=$WALWATCH_TEST_MYPORT
    my_q -e "CREATE DATABASE bench CHARACTER SET utf8mb4"
    my_q bench <"$ROOT/schema/mysql/clusterpedia.sql"
    MYSQL_CONNINFO="host=127.0.0.1 port=$MY_PORT user=root database=bench"
    [[ "${BENCH_MYSQL_TRANSPORT:-tcp}" != socket ]] ||
      MYSQL_CONNINFO="socket=$MY_SOCKET user=root database=bench"
    CONNINFO=""
    WRITER_DB=(--mysql "$MYSQL_CONNINFO")
    return 0
  fi
  sandbox_env=$("$ROOT/tests/tools/pg-sandbox.sh" start "$DIR/pg")  # set -e stops here on failure
  eval "$sandbox_env"
  CONNINFO="host=$PGHOST port=$PGPORT dbname=postgres user=postgres"
  WRITER_DB=(--conninfo "$CONNINFO")
  psql -X -q -v ON_ERROR_STOP=1 -f "$ROOT/schema/clusterpedia.sql"
}

# The mariadb client on BENCH_DB=mysql's server, as root.
my_q() { mariadb --no-defaults --socket="$MY_SOCKET" -uroot "$@"; }
my_v() { mariadb --no-defaults --socket="$MY_SOCKET" -uroot -N -B "$@"; }

# shellcheck disable=SC2317  # called from the EXIT trap
bench_cleanup() {
  local rc=$?
  set +e
  trap '' INT TERM
  [[ -z "$CLIENT_PID" ]] || { kill -TERM "$CLIENT_PID" 2>/dev/null; wait "$CLIENT_PID" 2>/dev/null; }
  stop_walwatch KILL
  if [[ -n "${DIR:-}" ]]; then
    [[ ! -d "$DIR/pg" ]] || "$ROOT/tests/tools/pg-sandbox.sh" stop "$DIR/pg" >/dev/null 2>&1
    [[ ! -d "$DIR/my" ]] || "$ROOT/tests/tools/mariadb-sandbox.sh" stop "$DIR/my" >/dev/null 2>&1
    if [[ "${BENCH_KEEP:-}" == 1 ]]; then
      bench_say "kept $DIR"
    else
      rm -rf -- "$DIR"
    fi
  fi
  exit "$rc"
}

# A free loopback TCP port for --metrics-address.
# A port below the kernel's ephemeral range: a run's thousands of client
# connections leave their ephemeral ports in TIME_WAIT (sockets without
# SO_REUSEADDR, so they block a bind), which the connect below cannot see,
# and a server started next on one of them failed with "address already in
# use" (etcd_bench, debezium_bench).
free_port() {
  local port low
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  ((low > 11000)) || low=61000
  for port in $(shuf -i 10000-$((low - 1)) -n 50); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  bench_die "no free TCP port"
}

start_walwatch() {
  local slot=$1 i
  shift
  SOCK=$DIR/walwatch.sock
  METRICS_ADDR=127.0.0.1:$(free_port)
  local -a db=(--conninfo "$CONNINFO" --slot "$slot")
  if [[ "${BENCH_DB:-postgres}" == mysql ]]; then
    db=(--source mysql --mysql-conninfo "$MYSQL_CONNINFO" --server-id-from "bench-$slot")
  fi
  "$WALWATCH_BIN" "${db[@]}" --socket "$SOCK" \
    --metrics-address "$METRICS_ADDR" --log-level warn "$@" \
    >>"$DIR/walwatch.log" 2>&1 &
  WALWATCH_PID=$!
  for ((i = 0; i < BENCH_TIMEOUT * 20; i++)); do
    kill -0 "$WALWATCH_PID" 2>/dev/null || { tail -n 20 "$DIR/walwatch.log" >&2; bench_die "walwatch exited"; }
    [[ "$(readyz)" == 200 ]] && return 0
    sleep 0.05
  done
  bench_die "walwatch not ready after $BENCH_TIMEOUT s"
}

stop_walwatch() {
  local sig=${1:-TERM} pid=$WALWATCH_PID i
  WALWATCH_PID=""
  [[ -n "$pid" ]] || return 0
  kill "-$sig" "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# HTTP status of /readyz on walwatch's socket (000 if it does not answer).
readyz() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 2 --unix-socket "$SOCK" \
    http://walwatch/readyz 2>/dev/null || true
}

# walwatch's current resourceVersion at least as new as the database's WAL.
fresh_rv() {
  curl -sf --max-time 10 --unix-socket "$SOCK" http://walwatch/walwatch/v1/freshrv |
    sed -n 's/.*"resourceVersion":"\([0-9]*\)".*/\1/p'
}

# One gauge or counter of walwatch's /metrics (no labels), or empty.
metric() {
  curl -s --max-time 2 "http://$METRICS_ADDR/metrics" 2>/dev/null |
    awk -v m="$1" '$1 == m { printf "%.0f\n", $2 }'
}

# The sum of a metric's series over all its labels (0 if it has none yet).
metric_sum() {
  curl -s --max-time 2 "http://$METRICS_ADDR/metrics" 2>/dev/null |
    awk -v m="$1" '{ name = $1; sub(/\{.*/, "", name) } name == m { s += $2 } END { printf "%.0f\n", s }'
}

# CPU time (user + system, all threads) of a process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
CLK_TCK=$(getconf CLK_TCK)
# Resident set size in KiB, and open descriptors, of a process.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
# Busy CPU ticks of the whole machine (all but idle and iowait).
machine_busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

now_s() { date +%s.%N; }

# Median of numbers, one per line (the lower middle's mean for an even count).
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The value of KEY in a key=value file.
kv() { sed -n "s/^$2=//p" "$1" | head -n 1 | tr -d "'"; }

# Waits for a file to appear (a client's --ready-file); fails if `pid` dies.
wait_for_file() {
  local file=$1 pid=$2 i
  for ((i = 0; i < BENCH_TIMEOUT * 20; i++)); do
    [[ -e "$file" ]] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# CPU ticks of a list of processes (pids as words; gone ones count 0).
pids_cpu_ticks() {
  local pid sum=0
  for pid in "$@"; do sum=$((sum + $(cpu_ticks "$pid"))); done
  echo "$sum"
}
# CPU ticks of the sandbox's whole PostgreSQL: the postmaster, its live
# children, and (cutime + cstime) the children that have exited, such as
# the backends of connections closed meanwhile.
pg_cpu_ticks() {
  local pm
  pm=$(head -n 1 "$DIR/pg/data/postmaster.pid")
  # shellcheck disable=SC2046  # a list of pids
  echo $(($(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat") + $(pids_cpu_ticks $(pgrep -P "$pm"))))
}
# The pid of the walsender serving a slot.
walsender_pid() {
  psql -X -qAt -c "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$1'"
}
