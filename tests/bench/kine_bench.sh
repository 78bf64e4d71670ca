#!/usr/bin/env bash
# kine (github.com/k3s-io/kine: etcd's API over SQL, k3s's datastore), the
# SQL-watch peer a user would otherwise pick, against walwatch on the same
# PostgreSQL in one run. kine keeps every write as a row of its own table
# `kine` and serves watches from one global poll query (after the last
# revision it saw, with the old values, at most 500 rows), run every
# --datastore-poll-interval (1 s by default) and at once after each write
# that went through the same kine process.
#
#   tests/bench/kine_bench.sh
#
# One throwaway PostgreSQL 15 (bench_lib.sh): Clusterpedia's table in
# database `postgres` for walwatch, kine's table in database `kine`. With
# BENCH_DB=mysql, one MariaDB instead (walwatch --source mysql on its
# binlog, kine's mysql driver): Clusterpedia's table in `bench`, kine's in
# `kine`. The same objects at the same rate: bench_writer's (one UPDATE per
# write, 2 connections) for walwatch; for kine, the same JSON as etcd keys
# (/registry/GROUP/RESOURCE/CLUSTER/NS/NAME), written by kinebench write
# (tests/bench/kine/: kube-apiserver's update Txn through etcd's Go client,
# 2 connections), since kine has no JSON gateway for bench_writer --etcd.
# The same number of watchers, each on its own connection: walwatch's
# through fanout_client, kine's through kinebench watch (etcd's Go client,
# fanout_client's report). Only the side being measured runs: walwatch is
# started for each of its runs on a new slot (dropped after), kine for each
# of its runs.
#
# Cases: BENCH_KINE_CASES, words MODE:WATCHERS:RATE (default
# "spread:1000:200 one:100:200"):
#   spread  4,000 objects of 100 resources in 10 namespaces, written
#           round-robin; watcher i watches one resource in one namespace
#           (resource i % 100, namespace (i / 100) % 10: walwatch's
#           /apis/bench.walwatch.io/v1/namespaces/ns-X/widgetsYY, kine's key
#           prefix /registry/bench.walwatch.io/widgetsYY/c1/ns-X/), so both
#           deliver the same events (poll_bench.sh's workload, without its
#           label selectors, which etcd's API cannot express);
#   one     100 Deployments; every watcher watches all of them (etcd_bench.sh's
#           workload), with --check-seq.
# Sides: BENCH_KINE_SIDES (default "walwatch kine kine-100ms kine2
# kine2-100ms"):
#   walwatch     walwatch on a replication slot;
#   kine         one kine (poll every 1 s): the writer and the watchers on it,
#                so each write wakes its poll;
#   kine-100ms   the same with --datastore-poll-interval 100ms (Grafana's
#                poll interval);
#   kine2        two kine servers on the same database (k3s's HA shape,
#                and the case of a writer that is not kine: walwatch sees
#                any writer's commits): the writer on one, the watchers on
#                the other, which sees the writes at its next poll (1 s);
#   kine2-100ms  the same, polling every 100 ms.
# BENCH_KINE_REPS runs of each (side, case), the sides' order reversed on
# every other repetition.
# Reported (medians): commits/s done, deliveries/s, commit -> client
# p50/p99, the write's round trip p50 (the UPDATE, or kine's Txn), the
# database's CPU (PostgreSQL: all its processes; MariaDB: mariadbd; the
# writes included), the peer's CPU (walwatch, or the kine processes, which
# also carry the writes; and of those the kine serving the watchers, which
# in kine2 takes no writes), each in % of one core over the writer's run
# and the drain; kine's SQL statements/s (kine_sql_total: all but
# BEGIN/COMMIT) and of those its poll queries/s.
#
# Builds kine (the version tests/bench/kine/go.mod requires, from the Go
# module proxy) and kinebench next to WALWATCH_BIN if they are not there;
# without Go, says so and writes a report that says so.
#
# Environment: BENCH_KINE_CASES, BENCH_KINE_SIDES, BENCH_KINE_REPS (3),
# BENCH_KINE_SECONDS (6), BENCH_KINE_BIN, BENCH_KINEBENCH (built if unset),
# BENCH_OBJECT_BYTES (1024), BENCH_REPORT, BENCH_OUT, plus bench_lib.sh's.
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

CASES=${BENCH_KINE_CASES:-"spread:1000:200 one:100:200"}
SIDES=${BENCH_KINE_SIDES:-"walwatch kine kine-100ms kine2 kine2-100ms"}
REPS=${BENCH_KINE_REPS:-3}
RUN_SECONDS=${BENCH_KINE_SECONDS:-6}
OBJECT_BYTES=${BENCH_OBJECT_BYTES:-1024}

bench_init kine

# kine and kinebench: built from tests/bench/kine/ next to WALWATCH_BIN
# (kine once, kinebench every time: Go's cache makes that quick) unless
# given.
KINE_SRC=$ROOT/tests/bench/kine
BIN_DIR=$(cd "$(dirname "$WALWATCH_BIN")" && pwd)
KINE_BIN=${BENCH_KINE_BIN:-$BIN_DIR/kine}
KINEBENCH=${BENCH_KINEBENCH:-$BIN_DIR/kinebench}
GO=$(command -v go || echo /usr/local/go/bin/go)
if [[ ! -x "$KINE_BIN" || -z "${BENCH_KINEBENCH:-}" ]]; then
  if [[ ! -x "$GO" ]]; then
    echo "kine_bench: Go is missing (it builds kine); the kine peer is not measured" >&2
    printf '\nkine peer: **not measured, Go is not installed** (it builds kine).\n' | tee "${BENCH_REPORT:-/dev/null}"
    [[ -z "${BENCH_OUT:-}" ]] || echo "missing go" >"$BENCH_OUT"
    exit 0
  fi
  bench_say "building kine and kinebench into $BIN_DIR"
  (cd "$KINE_SRC" && export GOFLAGS=-mod=mod &&
    { [[ -x "$KINE_BIN" ]] || "$GO" build -o "$KINE_BIN" github.com/k3s-io/kine; } &&
    { [[ -n "${BENCH_KINEBENCH:-}" ]] || "$GO" build -o "$KINEBENCH" .; })
fi
KINE_VERSION=$(awk '$1 == "github.com/k3s-io/kine" { print $2; exit }' "$KINE_SRC/go.mod")
"$BENCH_WRITER" "${WRITER_DB[@]}" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null
"$BENCH_WRITER" "${WRITER_DB[@]}" --setup --mode spread --object-bytes "$OBJECT_BYTES" >/dev/null

# kine reaches the server as walwatch and bench_writer do: PostgreSQL over
# the sandbox's Unix socket, MariaDB over TCP (or its socket, with
# BENCH_MYSQL_TRANSPORT=socket); its database is `kine`.
if [[ "${BENCH_DB:-postgres}" == mysql ]]; then
  DB_NAME=MariaDB DB_CPU_OF="mariadbd"
  KINE_DSN="mysql://root@tcp(127.0.0.1:$MY_PORT)/kine"
  [[ "${BENCH_MYSQL_TRANSPORT:-tcp}" != socket ]] || KINE_DSN="mysql://root@unix($MY_SOCKET)/kine"
  # mariadbd is one process: its threads' CPU.
  db_cpu_ticks() { cpu_ticks "$(head -n 1 "$DIR/my/mariadbd.pid")"; }
else
  DB_NAME=PostgreSQL DB_CPU_OF="all its processes"
  KINE_DSN="postgres://postgres@/kine?host=$PGHOST&port=$PGPORT&sslmode=disable"
  db_cpu_ticks() { pg_cpu_ticks; }
fi
KINE_PIDS=()
KINE_ADDRS=()
KINE_METRICS=()
# shellcheck disable=SC2317  # called from the EXIT trap
kine_cleanup() {
  local rc=$?
  set +e
  stop_kine
  (exit "$rc")  # bench_cleanup exits with the status it finds
  bench_cleanup
}
trap kine_cleanup EXIT

# Starts one kine polling every $1; appends to KINE_PIDS, KINE_ADDRS,
# KINE_METRICS; returns once it answers. free_port's ports can be some
# connection's local port, which a listener cannot bind: then new ports.
start_kine() {
  local interval=$1 port metrics n=${#KINE_PIDS[@]} i try pid
  for ((try = 1; ; try++)); do
    port=$(free_port) metrics=$(free_port)
    [[ "$port" != "$metrics" ]] || continue
    : >"$DIR/kine.$n.log"
    "$KINE_BIN" --endpoint "$KINE_DSN" --listen-address "127.0.0.1:$port" \
      --metrics-bind-address "127.0.0.1:$metrics" --datastore-poll-interval "$interval" \
      >>"$DIR/kine.$n.log" 2>&1 &
    pid=$!
    for ((i = 0; i < BENCH_TIMEOUT * 20; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      if curl -sf --max-time 2 "http://127.0.0.1:$metrics/metrics" >/dev/null 2>&1 &&
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        KINE_PIDS+=("$pid")
        KINE_ADDRS+=("127.0.0.1:$port")
        KINE_METRICS+=("127.0.0.1:$metrics")
        return 0
      fi
      sleep 0.05
    done
    wait "$pid" 2>/dev/null || true
    if ((try < 5)) && grep -q 'address already in use' "$DIR/kine.$n.log"; then continue; fi
    tail -n 20 "$DIR/kine.$n.log" >&2
    bench_die "kine did not start"
  done
}

stop_kine() {
  local pid
  for pid in "${KINE_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${KINE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  KINE_PIDS=() KINE_ADDRS=() KINE_METRICS=()
}

# kine_sql_total over every kine running, of statements named $1 (all if
# empty).
kine_queries() {
  local m sum=0 n
  for m in "${KINE_METRICS[@]}"; do
    n=$(curl -s --max-time 2 "http://$m/metrics" 2>/dev/null |
      awk -v want="$1" '/^kine_sql_total\{/ { if (want == "" || index($0, "name=\"" want "\"")) s += $NF } END { printf "%.0f\n", s }')
    sum=$((sum + ${n:-0}))
  done
  echo "$sum"
}

# The objects as kine's keys, and each key's revision for kinebench's Txns.
start_kine 1s
for mode in one spread; do
  "$KINEBENCH" write --endpoint "${KINE_ADDRS[0]}" --setup --mode "$mode" \
    --object-bytes "$OBJECT_BYTES" --revs "$DIR/kine.revs" >/dev/null
done
stop_kine

# Watch targets of watcher i, per mode: walwatch paths (@RV@ filled per run)
# and kine key prefixes.
for ((i = 0; i < 1000; i++)); do
  printf '/apis/bench.walwatch.io/v1/namespaces/ns-%d/widgets%02d?watch=1&resourceVersion=@RV@\n' $(((i / 100) % 10)) $((i % 100))
done >"$DIR/spread.paths"
for ((i = 0; i < 1000; i++)); do
  printf '/registry/bench.walwatch.io/widgets%02d/c1/ns-%d/\n' $((i % 100)) $(((i / 100) % 10))
done >"$DIR/spread.prefixes"
echo '/apis/apps/v1/deployments?watch=1&resourceVersion=@RV@' >"$DIR/one.paths"
echo '/registry/apps/deployments/' >"$DIR/one.prefixes"

RESULTS=$DIR/results.txt
: >"$RESULTS"
RUN=0

# One run: side, mode, watchers, rate, rep; appends
# "SIDE/MODE REP key=value...".
run_case() {
  local side=$1 mode=$2 n=$3 rate=$4 rep=$5 tag="$1.$2.$5" slot="" interval=1s
  local -a check=()
  [[ "$mode" != one ]] || check=(--check-seq)
  RUN=$((RUN + 1))
  rm -f "$DIR/ready.$tag" "$DIR/done.$tag"
  if [[ "$side" == walwatch ]]; then
    slot=bench_kine_$RUN
    start_walwatch "$slot"
    sed "s/@RV@/$(fresh_rv)/" "$DIR/$mode.paths" >"$DIR/paths.$tag"
    "$FANOUT_CLIENT" --socket "$SOCK" --watchers "$n" --paths-file "$DIR/paths.$tag" "${check[@]}" \
      --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" --drain-timeout 10 \
      >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
  else
    [[ "$side" != *-100ms ]] || interval=100ms
    start_kine "$interval"
    [[ "$side" != kine2* ]] || start_kine "$interval"
    # The watchers on the last kine started; the writer on the first.
    "$KINEBENCH" watch --endpoint "${KINE_ADDRS[-1]}" --prefixes-file "$DIR/$mode.prefixes" \
      --watchers "$n" "${check[@]}" --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" \
      --drain-timeout 10 >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
  fi
  CLIENT_PID=$!
  wait_for_file "$DIR/ready.$tag" "$CLIENT_PID" ||
    { cat "$DIR/client.$tag.err" >&2; bench_die "the watchers did not start ($tag)"; }
  sleep 1  # past the start's own queries and allocations
  # The peer's processes, and of those the one serving the watchers.
  local peer_pids watch_pid q0=0 poll0=0 q1=0 poll1=0 s0 s1 p0 p1 w0 w1 t0 t1
  if [[ "$side" == walwatch ]]; then peer_pids=$WALWATCH_PID; else peer_pids="${KINE_PIDS[*]}"; fi
  watch_pid=${peer_pids##* }
  [[ "$side" == walwatch ]] || { q0=$(kine_queries ""); poll0=$(kine_queries AfterAllOldVal); }
  # shellcheck disable=SC2086  # pid lists
  s0=$(db_cpu_ticks) p0=$(pids_cpu_ticks $peer_pids) w0=$(cpu_ticks "$watch_pid") t0=$(now_s)
  if [[ "$side" == walwatch ]]; then
    "$BENCH_WRITER" "${WRITER_DB[@]}" --mode "$mode" --object-bytes "$OBJECT_BYTES" \
      --rate "$rate" --duration "$RUN_SECONDS" --writers 2 --out "$DIR/done.$tag" >"$DIR/writer.$tag"
  else
    "$KINEBENCH" write --endpoint "${KINE_ADDRS[0]}" --mode "$mode" --object-bytes "$OBJECT_BYTES" \
      --rate "$rate" --duration "$RUN_SECONDS" --writers 2 --revs "$DIR/kine.revs" \
      --out "$DIR/done.$tag" >"$DIR/writer.$tag"
  fi
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  # shellcheck disable=SC2086
  s1=$(db_cpu_ticks) p1=$(pids_cpu_ticks $peer_pids) w1=$(cpu_ticks "$watch_pid") t1=$(now_s)
  [[ "$side" == walwatch ]] || { q1=$(kine_queries ""); poll1=$(kine_queries AfterAllOldVal); }
  if [[ "$side" == walwatch ]]; then
    stop_walwatch
    for ((i = 0; i < 100; i++)); do
      [[ "${BENCH_DB:-postgres}" == postgres ]] || break
      psql -X -qAt -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null 2>&1 && break
      sleep 0.1
    done
  else
    stop_kine
  fi
  local c=$DIR/client.$tag line
  line=$(awk -v s=$((s1 - s0)) -v p=$((p1 - p0)) -v wp=$((w1 - w0)) -v q=$((q1 - q0)) -v poll=$((poll1 - poll0)) \
    -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" -v n="$n" -v rate="$rate" \
    -v events="$(kv "$c" events)" -v secs="$(kv "$DIR/writer.$tag" seconds)" \
    -v p50="$(kv "$c" latency_p50_us)" -v p99="$(kv "$c" latency_p99_us)" \
    -v wp50="$(kv "$DIR/writer.$tag" statement_p50_us)" \
    -v wrate="$(kv "$DIR/writer.$tag" rate)" -v short="$(kv "$c" short_at_end)" \
    -v errors="$(kv "$c" errors)" -v lost="$(kv "$c" lost)" \
    -v dups="$(kv "$c" duplicates)" -v ooo="$(kv "$c" out_of_order)" \
    'BEGIN { d = t1 - t0
      printf "watchers=%d rate_asked=%d writer_rate=%.0f deliveries_per_s=%.0f p50_ms=%.2f p99_ms=%.2f write_p50_ms=%.2f db_cpu=%.1f peer_cpu=%.1f watch_peer_cpu=%.1f queries_per_s=%.1f polls_per_s=%.1f errors=%d lost=%d duplicates=%d out_of_order=%d short=%d",
        n, rate, wrate, events / secs, p50 / 1e3, p99 / 1e3, wp50 / 1e3, 100 * s / hz / d, 100 * p / hz / d, 100 * wp / hz / d, q / d, poll / d, errors, lost, dups, ooo, short }')
  echo "$side/$mode $rep $line" >>"$RESULTS"
  bench_say "$side $mode watchers=$n rate=$rate run $rep: $line"
}

for ((rep = 1; rep <= REPS; rep++)); do
  order=$SIDES
  ((rep % 2)) || order=$(tr ' ' '\n' <<<"$SIDES" | tac | tr '\n' ' ')
  for c in $CASES; do
    IFS=: read -r mode n rate <<<"$c"
    for side in $order; do run_case "$side" "$mode" "$n" "$rate" "$rep"; done
  done
done

agg() {
  awk -v k="$1" -v key="$2" '$1 == k { for (i = 3; i <= NF; i++) { split($i, kvp, "="); if (kvp[1] == key) print kvp[2] } }' "$RESULTS" | median
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "-" }'; }
{
  echo
  echo "kine $KINE_VERSION against walwatch (\`$([[ "${BENCH_DB:-postgres}" == postgres ]] || echo "BENCH_DB=mysql ")tests/bench/kine_bench.sh\`), one $DB_NAME: the same ~$OBJECT_BYTES-byte objects written at the same rate for $RUN_SECONDS s on 2 connections (walwatch: an UPDATE of Clusterpedia's table; kine: kube-apiserver's update Txn, which kine turns into an INSERT into its log table), watched by the same number of watchers, each on its own connection; spread: watcher i on one resource of one namespace, one: every watcher on all 100 Deployments. kine: one server taking the writes and the watches (its poll, every 1 s or 100 ms, is also woken by each write it takes); kine2: the writes on one kine, the watches on a second (what a writer other than that kine sees), polling every 1 s or 100 ms. Medians of $REPS runs, order alternating; CPU in % of one core over the writes and the drain ($DB_NAME: $DB_CPU_OF, the writes included; peer: walwatch, or every kine, which also carries the writes, and of that the kine serving the watchers); queries: kine's SQL statements/s (kine_sql_total; BEGIN/COMMIT not counted) and of those its poll queries."
  echo
  echo "| case | side | commits/s done | deliveries/s | p50 ms | p99 ms | write p50 ms | $DB_NAME CPU % | peer CPU % | of which the watchers' server % | kine queries/s | of which polls/s |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for c in $CASES; do
    IFS=: read -r mode n rate <<<"$c"
    for side in $SIDES; do
      k=$side/$mode
      echo "| $mode, $n watchers, $rate/s | $side | $(agg "$k" writer_rate) | $(agg "$k" deliveries_per_s) | $(agg "$k" p50_ms) | $(agg "$k" p99_ms) | $(agg "$k" write_p50_ms) | $(agg "$k" db_cpu) | $(agg "$k" peer_cpu) | $(agg "$k" watch_peer_cpu) | $(agg "$k" queries_per_s) | $(agg "$k" polls_per_s) |"
    done
    for side in $SIDES; do
      [[ "$side" != walwatch && " $SIDES " == *" walwatch "* ]] || continue
      k=$side/$mode w=walwatch/$mode
      echo "| $mode | **$side / walwatch** | | | **$(ratio "$(agg "$k" p50_ms)" "$(agg "$w" p50_ms)")** | **$(ratio "$(agg "$k" p99_ms)" "$(agg "$w" p99_ms)")** | | **$(ratio "$(agg "$k" db_cpu)" "$(agg "$w" db_cpu)")** | **$(ratio "$(agg "$k" peer_cpu)" "$(agg "$w" peer_cpu)")** | **$(ratio "$(agg "$k" watch_peer_cpu)" "$(agg "$w" watch_peer_cpu)")** | | |"
    done
  done
} | tee "${BENCH_REPORT:-/dev/null}"
[[ -z "${BENCH_OUT:-}" ]] || cp "$RESULTS" "$BENCH_OUT"
