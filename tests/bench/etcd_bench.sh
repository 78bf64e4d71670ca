#!/usr/bin/env bash
# etcd, the store Kubernetes' watches run on, against walwatch on the same
# workload in one run: the same objects (bench_writer's `one` Deployments,
# ~BENCH_OBJECT_BYTES each) written at the same rate, as etcd keys
# (/registry/apps/deployments/c1/bench/NAME, through etcd's JSON gateway) and
# as rows of Clusterpedia's table; the same number of watchers, each on its
# own connection (fanout_client; --etcd watches the key prefix through the
# gateway's POST /v3/watch). etcd's data directory is on /dev/shm (fsync is
# then free, as the PostgreSQL sandbox runs with fsync=off).
#
#   tests/bench/etcd_bench.sh
#
# Cases: BENCH_ETCD_CASES, words WATCHERS:RATE (default "100:200 1000:20"),
# BENCH_ETCD_REPS runs each, walwatch and etcd alternating. Reported
# (medians): commit -> client p50/p99, deliveries/s, CPU per delivered event
# (the server's CPU: walwatch plus all of PostgreSQL, against etcd, each
# with its writes, over the writer's run), and each as etcd / walwatch. Then
# idle memory: RSS growth per watcher with BENCH_ETCD_IDLE (1000) idle
# watchers, walwatch's against etcd's.
# If etcd is not installed (Debian's etcd-server), says so and writes a
# report that says so.
#
# Environment: BENCH_ETCD_CASES, BENCH_ETCD_REPS (2), BENCH_ETCD_SECONDS (5),
# BENCH_ETCD_IDLE (1000), BENCH_ETCD_BIN (etcd), BENCH_OBJECT_BYTES (1024),
# BENCH_REPORT, BENCH_OUT, plus bench_lib.sh's.
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

CASES=${BENCH_ETCD_CASES:-"100:200 1000:20"}
REPS=${BENCH_ETCD_REPS:-2}
RUN_SECONDS=${BENCH_ETCD_SECONDS:-5}
IDLE=${BENCH_ETCD_IDLE:-1000}
OBJECT_BYTES=${BENCH_OBJECT_BYTES:-1024}
ETCD_BIN=${BENCH_ETCD_BIN:-etcd}

if ! command -v "$ETCD_BIN" >/dev/null; then
  echo "etcd_bench: etcd is missing (Debian: apt-get install etcd-server); the etcd peer is not measured" >&2
  msg="etcd peer: **not measured, etcd is not installed** (Debian: \`apt-get install etcd-server\`)."
  printf '\n%s\n' "$msg" | tee "${BENCH_REPORT:-/dev/null}"
  [[ -z "${BENCH_OUT:-}" ]] || echo "missing etcd" >"$BENCH_OUT"
  exit 0
fi

bench_init etcd
"$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null
start_walwatch bench_etcd

ETCD_DIR=$(mktemp -d /dev/shm/ww-etcd.XXXXXX)
ETCD_PORT=$(free_port) ETCD_PEER=$(free_port)
ETCD=127.0.0.1:$ETCD_PORT
"$ETCD_BIN" --data-dir "$ETCD_DIR/data" --listen-client-urls "http://$ETCD" \
  --advertise-client-urls "http://$ETCD" --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
  --initial-cluster "default=http://127.0.0.1:$ETCD_PEER" \
  --quota-backend-bytes $((8 * 1024 * 1024 * 1024)) --log-level error >"$DIR/etcd.log" 2>&1 &
ETCD_PID=$!
# shellcheck disable=SC2317  # called from the EXIT trap
etcd_cleanup() {
  local rc=$?
  set +e
  kill -TERM "$ETCD_PID" 2>/dev/null && wait "$ETCD_PID" 2>/dev/null
  rm -rf -- "$ETCD_DIR"
  (exit "$rc")  # bench_cleanup exits with the status it finds
  bench_cleanup
}
trap etcd_cleanup EXIT
for ((i = 0; i < 200; i++)); do
  curl -sf -X POST "http://$ETCD/v3/kv/range" -d '{"key":"AA=="}' >/dev/null 2>&1 && break
  kill -0 "$ETCD_PID" 2>/dev/null || { cat "$DIR/etcd.log" >&2; bench_die "etcd exited"; }
  sleep 0.05
done
"$BENCH_WRITER" --etcd "$ETCD" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null

RESULTS=$DIR/results.txt
: >"$RESULTS"

# One run: server walwatch|etcd, N watchers, rate; appends
# "server N rate rep key=value...".
run_case() {
  local server=$1 n=$2 rate=$3 rep=$4 tag="$1.$2.$3.$4"
  local -a watch store
  if [[ "$server" == walwatch ]]; then
    watch=(--socket "$SOCK" --path "/apis/apps/v1/deployments?watch=1&resourceVersion=$(fresh_rv)")
    store=(--conninfo "$CONNINFO")
  else
    watch=(--etcd "$ETCD" --path /registry/apps/deployments/)
    store=(--etcd "$ETCD")
  fi
  "$FANOUT_CLIENT" "${watch[@]}" --watchers "$n" --check-seq \
    --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" --drain-timeout 10 \
    >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
  CLIENT_PID=$!
  wait_for_file "$DIR/ready.$tag" "$CLIENT_PID" ||
    { cat "$DIR/client.$tag.err" >&2; bench_die "the watchers did not start ($tag)"; }
  local s0 s1 t0 t1
  if [[ "$server" == walwatch ]]; then
    s0=$(($(cpu_ticks "$WALWATCH_PID") + $(pg_cpu_ticks)))
  else
    s0=$(cpu_ticks "$ETCD_PID")
  fi
  t0=$(now_s)
  "$BENCH_WRITER" "${store[@]}" --mode one --object-bytes "$OBJECT_BYTES" --rate "$rate" \
    --duration "$RUN_SECONDS" --writers 2 --out "$DIR/done.$tag" >"$DIR/writer.$tag"
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  t1=$(now_s)
  if [[ "$server" == walwatch ]]; then
    s1=$(($(cpu_ticks "$WALWATCH_PID") + $(pg_cpu_ticks)))
  else
    s1=$(cpu_ticks "$ETCD_PID")
  fi
  local c=$DIR/client.$tag line
  line=$(awk -v s=$((s1 - s0)) -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" \
    -v events="$(kv "$c" events)" -v secs="$(kv "$DIR/writer.$tag" seconds)" \
    -v p50="$(kv "$c" latency_p50_us)" -v p99="$(kv "$c" latency_p99_us)" \
    -v wrate="$(kv "$DIR/writer.$tag" rate)" -v short="$(kv "$c" short_at_end)" \
    -v errors="$(kv "$c" errors)" -v lost="$(kv "$c" lost)" \
    'BEGIN { printf "writer_rate=%.0f deliveries_per_s=%.0f p50_ms=%.2f p99_ms=%.2f server_cpu=%.0f cpu_us_per_delivery=%.2f errors=%d lost=%d short=%d",
      wrate, events / secs, p50 / 1e3, p99 / 1e3, 100 * s / hz / (t1 - t0), (events > 0 ? 1e6 * s / hz / events : 0), errors, lost, short }')
  echo "$server $n $rate $rep $line" >>"$RESULTS"
  bench_say "$server watchers=$n rate=$rate run $rep: $line"
}

for ((rep = 1; rep <= REPS; rep++)); do
  for c in $CASES; do
    if ((rep % 2)); then order="walwatch etcd"; else order="etcd walwatch"; fi
    for server in $order; do run_case "$server" "${c%%:*}" "${c##*:}" "$rep"; done
  done
done

# Idle watchers: RSS growth per watcher of each server.
idle_per_watcher() {
  local server=$1 pid rss0 rss1
  local -a watch
  if [[ "$server" == walwatch ]]; then
    pid=$WALWATCH_PID
    watch=(--socket "$SOCK" --path "/apis/apps/v1/deployments?watch=1&resourceVersion=$(fresh_rv)")
  else
    pid=$ETCD_PID
    watch=(--etcd "$ETCD" --path /registry/apps/deployments/)
  fi
  sleep 2
  rss0=$(rss_kb "$pid")
  rm -f "$DIR/ready.idle"
  "$FANOUT_CLIENT" "${watch[@]}" --watchers "$IDLE" --ready-file "$DIR/ready.idle" \
    --duration 30 >/dev/null 2>&1 &
  CLIENT_PID=$!
  wait_for_file "$DIR/ready.idle" "$CLIENT_PID" || bench_die "idle $server watchers did not start"
  sleep 3
  rss1=$(rss_kb "$pid")
  kill -TERM "$CLIENT_PID" 2>/dev/null || true
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  awk -v a="$rss0" -v b="$rss1" -v n="$IDLE" 'BEGIN { printf "%.2f", (b - a) / n }'
}
ww_idle=$(idle_per_watcher walwatch)
etcd_idle=$(idle_per_watcher etcd)
echo "idle $IDLE walwatch_kib=$ww_idle etcd_kib=$etcd_idle" >>"$RESULTS"
bench_say "idle watchers ($IDLE): walwatch $ww_idle KiB, etcd $etcd_idle KiB each"
stop_walwatch

agg() {
  awk -v s="$1" -v n="$2" -v r="$3" -v key="$4" \
    '$1 == s && $2 == n && $3 == r { for (i = 5; i <= NF; i++) { split($i, kvp, "="); if (kvp[1] == key) print kvp[2] } }' "$RESULTS" | median
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
{
  echo
  echo "etcd against walwatch (\`tests/bench/etcd_bench.sh\`, etcd $("$ETCD_BIN" --version | awk '/^etcd Version/ { print $3 }') through its JSON gateway, data on /dev/shm): the same ~$OBJECT_BYTES-byte Deployments written as keys and as rows by bench_writer (2 connections, $RUN_SECONDS s), watched by N watchers on their own connections (fanout_client); medians of $REPS runs, alternating. Server CPU: walwatch + all of PostgreSQL, or etcd, writes included, in % of one core."
  echo
  echo "| watchers | commits/s asked | server | commits/s done | deliveries/s | p50 ms | p99 ms | server CPU % | CPU per delivered event, µs |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for c in $CASES; do
    n=${c%%:*} r=${c##*:}
    for server in walwatch etcd; do
      echo "| $n | $r | $server | $(agg "$server" "$n" "$r" writer_rate) | $(agg "$server" "$n" "$r" deliveries_per_s) | $(agg "$server" "$n" "$r" p50_ms) | $(agg "$server" "$n" "$r" p99_ms) | $(agg "$server" "$n" "$r" server_cpu) | $(agg "$server" "$n" "$r" cpu_us_per_delivery) |"
    done
    echo "| $n | $r | **etcd / walwatch** | | | **$(ratio "$(agg etcd "$n" "$r" p50_ms)" "$(agg walwatch "$n" "$r" p50_ms)")** | **$(ratio "$(agg etcd "$n" "$r" p99_ms)" "$(agg walwatch "$n" "$r" p99_ms)")** | | **$(ratio "$(agg etcd "$n" "$r" cpu_us_per_delivery)" "$(agg walwatch "$n" "$r" cpu_us_per_delivery)")** |"
  done
  echo
  echo "Idle watchers ($IDLE, RSS growth per watcher): walwatch $ww_idle KiB, etcd $etcd_idle KiB; etcd / walwatch **$(ratio "$etcd_idle" "$ww_idle")**."
} | tee "${BENCH_REPORT:-/dev/null}"
[[ -z "${BENCH_OUT:-}" ]] || cp "$RESULTS" "$BENCH_OUT"
