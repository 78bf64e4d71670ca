#!/usr/bin/env bash
# etcd, the store Kubernetes' watches run on, against walwatch on the same
# workload in one run: the same objects (bench_writer's `one` Deployments,
# ~BENCH_OBJECT_BYTES each) written at the same rate, as etcd keys
# (/registry/apps/deployments/c1/bench/NAME, put through etcd's JSON gateway
# by bench_writer --etcd) and as rows of Clusterpedia's table; the same
# number of watchers. walwatch's watchers are fanout_client's, one Unix-socket
# connection each, as before. etcd's are etcdwatch's (tests/bench/etcdwatch,
# go.etcd.io/etcd/client/v3: gRPC and protobuf, as kube-apiserver watches
# etcd), watching the key prefix in two modes, each a case of its own:
#   etcd-per-stream   one client, so one connection and one gRPC watch
#                     stream, per watcher (walwatch's shape);
#   etcd-multiplexed  the watchers over BENCH_ETCD_CONNS clients, their
#                     watches sharing each client's one gRPC stream (as the
#                     watches of one kube-apiserver etcd client do). "auto"
#                     (the default): ceil(N / 100) clients, at most 100
#                     watchers a stream. etcd queues a stream's responses in
#                     one channel of 128 (mvcc chanBufLen) that one goroutine
#                     sends; when a revision's responses overflow it, the
#                     watchers left over become "victims", retried later: 200
#                     watchers on one stream at 5 commits/s had p99 ~80 ms,
#                     on 4 streams ~10 ms, and 100 on one at 200 commits/s
#                     ~93 ms. BENCH_ETCD_CONNS=1 (or any K) measures that.
# The JSON gateway (fanout_client --etcd: an HTTP/1.1 stream per watcher,
# re-encoded by jsonpb) is not a default case: no Kubernetes component
# watches etcd that way, and etcd spent its CPU there (issue 40). It stays
# as an extra, BENCH_ETCD_MODES="... gateway" (reported as etcd-gateway),
# to compare with older runs. etcd's data directory is on /dev/shm (fsync is
# then free, as the PostgreSQL sandbox runs with fsync=off).
#
#   tests/bench/etcd_bench.sh
#
# Every run starts fresh server processes (walwatch on a new slot, dropped
# after; etcd on a new data directory with the objects put again), lets them
# settle BENCH_ETCD_SETTLE seconds, opens the watchers, settles again, then
# writes for BENCH_ETCD_SECONDS; each side the same. Cases: BENCH_ETCD_CASES,
# words WATCHERS:RATE (default "100:200 1000:20"), BENCH_ETCD_REPS runs each,
# the servers' order rotating from run to run. Measured over the writer's
# run: commit -> client p50/p99 (bench_writer's stamp in each object),
# deliveries/s, the server's CPU (walwatch plus all of PostgreSQL, against
# etcd, each with its writes) and per delivered event, the client's CPU (% of
# one core) and the whole machine's (/proc/stat, % of all cores); after it,
# with the watchers still open for etcdwatch: the server's RSS, and etcd's
# heap and goroutine stacks in use after a forced GC (etcd runs with
# --enable-pprof; GET /debug/pprof/heap?gc=1&debug=1 collects, then prints
# runtime.MemStats). A run whose client used half a core or more, or whose
# machine was 90 % busy or more, is flagged: its latency may be the
# client's or the machine's. Reported: medians, each etcd mode / walwatch.
# Then idle memory: per repetition, fresh servers, BENCH_ETCD_IDLE (1000)
# idle watchers, growth per watcher of RSS (walwatch, etcd) and of etcd's
# heap + stacks after GC.
# If etcd is not installed (Debian's etcd-server), says so and writes a
# report that says so.
#
# BENCH_OUT (the figures): "SERVER N RATE REP key=value..." per run (SERVER
# walwatch, etcd-per-stream, etcd-multiplexed, etcd-gateway), then one line
# "idle N walwatch_kib=W etcd_kib=E MODE_kib=... MODE_go_kib=..." of
# medians, where etcd_kib is etcd's lowest per-watcher figure of any mode
# and measure (the one most in etcd's favour).
#
# Environment: BENCH_ETCD_CASES, BENCH_ETCD_REPS (3), BENCH_ETCD_SECONDS (5),
# BENCH_ETCD_SETTLE (2), BENCH_ETCD_IDLE (1000), BENCH_ETCD_MODES
# ("per-stream multiplexed"; add "gateway" for the extra), BENCH_ETCD_CONNS
# (auto: the multiplexed mode's connections), BENCH_ETCD_BIN (etcd),
# ETCDWATCH (default: built by go into the bench build directory, beside
# walwatch), BENCH_OBJECT_BYTES (1024), BENCH_REPORT, BENCH_OUT, plus
# bench_lib.sh's.
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

CASES=${BENCH_ETCD_CASES:-"100:200 1000:20"}
REPS=${BENCH_ETCD_REPS:-3}
RUN_SECONDS=${BENCH_ETCD_SECONDS:-5}
SETTLE=${BENCH_ETCD_SETTLE:-2}
IDLE=${BENCH_ETCD_IDLE:-1000}
MODES=${BENCH_ETCD_MODES:-"per-stream multiplexed"}
CONNS=${BENCH_ETCD_CONNS:-auto}
OBJECT_BYTES=${BENCH_OBJECT_BYTES:-1024}
ETCD_BIN=${BENCH_ETCD_BIN:-etcd}

if ! command -v "$ETCD_BIN" >/dev/null; then
  echo "etcd_bench: etcd is missing (Debian: apt-get install etcd-server); the etcd peer is not measured" >&2
  msg="etcd peer: **not measured, etcd is not installed** (Debian: \`apt-get install etcd-server\`)."
  printf '\n%s\n' "$msg" | tee "${BENCH_REPORT:-/dev/null}"
  [[ -z "${BENCH_OUT:-}" ]] || echo "missing etcd" >"$BENCH_OUT"
  exit 0
fi
SERVERS=(walwatch)
for mode in $MODES; do
  case $mode in
    per-stream | multiplexed | gateway) SERVERS+=("etcd-$mode") ;;
    *) echo "etcd_bench: BENCH_ETCD_MODES: $mode is not per-stream, multiplexed or gateway" >&2; exit 2 ;;
  esac
done

bench_init etcd
NPROC=$(nproc)

# etcdwatch, built with the Go tests/tools/install-go.sh finds (or fetches).
ETCDWATCH=${ETCDWATCH:-}
if [[ " $MODES " == *" per-stream "* || " $MODES " == *" multiplexed "* ]]; then
  if [[ -z "$ETCDWATCH" ]]; then
    ETCDWATCH=$(dirname "$WALWATCH_BIN")/etcdwatch
    GO=$("$ROOT/tests/tools/install-go.sh")
    (cd "$ROOT/tests/bench/etcdwatch" &&
      GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" \
        "$GO" build -trimpath -o "$ETCDWATCH" .) || bench_die "go build of tests/bench/etcdwatch failed"
  fi
  [[ -x "$ETCDWATCH" ]] || bench_die "no $ETCDWATCH"
fi

"$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null

# --- the servers, fresh for every run -----------------------------------------
ETCD_PID="" ETCD_DIR="" SLOT=""
start_etcd() {
  local i try
  ETCD_DIR=$(mktemp -d /dev/shm/ww-etcd.XXXXXX)
  # free_port's ports can be taken before etcd binds them (the ephemeral
  # ports of the runs' own thousands of connections, other work on the
  # machine): a few tries, on new ports.
  for ((try = 1; try <= 5; try++)); do
    ETCD_PORT=$(free_port)
    ETCD_PEER=$(free_port)
    [[ "$ETCD_PEER" != "$ETCD_PORT" ]] || continue
    ETCD=127.0.0.1:$ETCD_PORT
    rm -rf -- "$ETCD_DIR/data"
    "$ETCD_BIN" --data-dir "$ETCD_DIR/data" --listen-client-urls "http://$ETCD" \
      --advertise-client-urls "http://$ETCD" --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" \
      --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
      --initial-cluster "default=http://127.0.0.1:$ETCD_PEER" --enable-pprof \
      --quota-backend-bytes $((8 * 1024 * 1024 * 1024)) --log-level error >"$DIR/etcd.log" 2>&1 &
    ETCD_PID=$!
    for ((i = 0; i < BENCH_TIMEOUT * 20; i++)); do
      if [[ "$(curl -s --max-time 2 "http://$ETCD/health" 2>/dev/null)" == *'"health":"true"'* ]]; then
        "$BENCH_WRITER" --etcd "$ETCD" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null
        return 0
      fi
      kill -0 "$ETCD_PID" 2>/dev/null || break
      sleep 0.05
    done
    kill -TERM "$ETCD_PID" 2>/dev/null || true
    wait "$ETCD_PID" 2>/dev/null || true
    ETCD_PID=""
    bench_say "etcd did not start on ports $ETCD_PORT, $ETCD_PEER (try $try): $(grep -m 1 -E 'address already in use|etcdmain' "$DIR/etcd.log" || tail -n 1 "$DIR/etcd.log")"
  done
  tail -n 20 "$DIR/etcd.log" >&2
  bench_die "etcd did not start"
}
stop_etcd() {
  local pid=$ETCD_PID
  ETCD_PID=""
  if [[ -n "$pid" ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  [[ -z "$ETCD_DIR" ]] || rm -rf -- "$ETCD_DIR"
  ETCD_DIR=""
  return 0
}
start_server() {  # SERVER TAG
  if [[ "$1" == walwatch ]]; then
    SLOT=bench_etcd_${2//[^a-z0-9]/_}
    start_walwatch "$SLOT"
    SERVER_PID=$WALWATCH_PID
  else
    start_etcd
    SERVER_PID=$ETCD_PID
  fi
  sleep "$SETTLE"
}
stop_server() {
  if [[ "$1" == walwatch ]]; then
    stop_walwatch
    psql -X -q -c "SELECT pg_drop_replication_slot('$SLOT')" >/dev/null 2>&1 || true
  else
    stop_etcd
  fi
}
# shellcheck disable=SC2317  # called from the EXIT trap
etcd_cleanup() {
  local rc=$?
  set +e
  stop_etcd
  (exit "$rc")  # bench_cleanup exits with the status it finds
  bench_cleanup
}
trap etcd_cleanup EXIT

# CPU ticks of the server: walwatch with all of PostgreSQL, or etcd.
server_ticks() {
  if [[ "$1" == walwatch ]]; then
    echo $(($(cpu_ticks "$WALWATCH_PID") + $(pg_cpu_ticks)))
  else
    cpu_ticks "$ETCD_PID"
  fi
}
# etcd's heap and goroutine stacks in use, bytes, after a GC that the same
# request forces (net/http/pprof: ?gc=1 runs runtime.GC, debug=1 appends
# runtime.MemStats, read after it).
etcd_go_bytes() {
  curl -s --max-time 30 "http://$ETCD/debug/pprof/heap?gc=1&debug=1" |
    awk '/^# HeapInuse = / { h = $4 } /^# Stack = / { s = $4 } END { if (h == "") exit 1; print h + s }' ||
    bench_die "no heap profile from etcd's /debug/pprof (was it started with --enable-pprof?)"
}

# The multiplexed mode's connections for N watchers.
mux_conns() { if [[ "$CONNS" == auto ]]; then echo $((($1 + 99) / 100)); else echo "$CONNS"; fi; }
# The client command for N watchers of SERVER, in CLIENT.
client_cmd() {  # SERVER N
  case $1 in
    walwatch)
      CLIENT=("$FANOUT_CLIENT" --socket "$SOCK" --watchers "$2"
        --path "/apis/apps/v1/deployments?watch=1&resourceVersion=$(fresh_rv)") ;;
    etcd-gateway)
      CLIENT=("$FANOUT_CLIENT" --etcd "$ETCD" --path /registry/apps/deployments/ --watchers "$2") ;;
    etcd-per-stream | etcd-multiplexed)
      CLIENT=("$ETCDWATCH" --endpoint "$ETCD" --prefix /registry/apps/deployments/
        --watchers "$2" --mode "${1#etcd-}" --conns "$(mux_conns "$2")") ;;
  esac
}

RESULTS=$DIR/results.txt IDLE_RUNS=$DIR/idle.txt
: >"$RESULTS"
: >"$IDLE_RUNS"

# One run: SERVER N RATE REP; appends "SERVER N RATE REP key=value...".
run_case() {
  local server=$1 n=$2 rate=$3 rep=$4 tag="$1.$2.$3.$4"
  local -a store=(--conninfo "$CONNINFO") linger=()
  start_server "$server" "$tag"
  [[ "$server" == walwatch ]] || store=(--etcd "$ETCD")
  client_cmd "$server" "$n"
  # etcdwatch keeps its watches open after its report, so that etcd's
  # memory is read with them (fanout_client closes them as it reports).
  [[ "${CLIENT[0]}" != "$ETCDWATCH" ]] || linger=(--linger-file "$DIR/linger.$tag")
  "${CLIENT[@]}" --check-seq --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" \
    --drain-timeout 10 "${linger[@]}" >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
  CLIENT_PID=$!
  wait_for_file "$DIR/ready.$tag" "$CLIENT_PID" ||
    { cat "$DIR/client.$tag.err" >&2; bench_die "the watchers did not start ($tag)"; }
  sleep "$SETTLE"
  local s0 s1 c0 c1 m0 m1 t0 t1 rss go=""
  s0=$(server_ticks "$server") c0=$(cpu_ticks "$CLIENT_PID") m0=$(machine_busy_ticks) t0=$(now_s)
  "$BENCH_WRITER" "${store[@]}" --mode one --object-bytes "$OBJECT_BYTES" --rate "$rate" \
    --duration "$RUN_SECONDS" --writers 2 --out "$DIR/done.$tag" >"$DIR/writer.$tag"
  if ((${#linger[@]})); then
    wait_for_file "$DIR/linger.$tag" "$CLIENT_PID" || true
  else
    wait "$CLIENT_PID" || true
  fi
  s1=$(server_ticks "$server") c1=$(cpu_ticks "$CLIENT_PID") m1=$(machine_busy_ticks) t1=$(now_s)
  # fanout_client has exited: its CPU at the end is in its report.
  ((${#linger[@]})) ||
    c1=$(awk -v s="$(kv "$DIR/client.$tag" client_cpu_s)" -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", s * hz }')
  rss=$(rss_kb "$SERVER_PID")
  [[ "$server" == walwatch ]] || go=$(etcd_go_bytes)
  kill -TERM "$CLIENT_PID" 2>/dev/null || true
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  stop_server "$server"
  local c=$DIR/client.$tag line conns=$n
  [[ "$server" != etcd-multiplexed ]] || conns=$(mux_conns "$n")
  line=$(awk -v s=$((s1 - s0)) -v cl=$((c1 - c0)) -v m=$((m1 - m0)) -v hz="$CLK_TCK" -v ncpu="$NPROC" \
    -v t0="$t0" -v t1="$t1" -v rss="$rss" -v go="$go" -v conns="$conns" \
    -v events="$(kv "$c" events)" -v secs="$(kv "$DIR/writer.$tag" seconds)" \
    -v p50="$(kv "$c" latency_p50_us)" -v p99="$(kv "$c" latency_p99_us)" \
    -v wrate="$(kv "$DIR/writer.$tag" rate)" -v short="$(kv "$c" short_at_end)" \
    -v errors="$(kv "$c" errors)" -v lost="$(kv "$c" lost)" \
    'BEGIN { d = t1 - t0
      printf "conns=%d writer_rate=%.0f deliveries_per_s=%.0f p50_ms=%.2f p99_ms=%.2f server_cpu=%.0f cpu_us_per_delivery=%.2f errors=%d lost=%d short=%d client_cpu=%.1f client_us_per_delivery=%.2f machine_cpu=%.0f rss_mib=%.1f",
        conns, wrate, events / secs, p50 / 1e3, p99 / 1e3, 100 * s / hz / d, (events > 0 ? 1e6 * s / hz / events : 0),
        errors, lost, short, 100 * cl / hz / d, (events > 0 ? 1e6 * cl / hz / events : 0),
        100 * m / hz / d / ncpu, rss / 1024
      if (go != "") printf " go_mib=%.1f", go / 1048576 }')
  echo "$server $n $rate $rep $line" >>"$RESULTS"
  bench_say "$server watchers=$n rate=$rate run $rep: $line"
  awk '{ for (i = 5; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    END { if (v["client_cpu"] >= 50 || v["machine_cpu"] >= 90)
      printf "WARNING: client %s %% of a core, machine %s %% busy: this run may measure the client or the machine\n", v["client_cpu"], v["machine_cpu"] }' \
    <<<"$server $n $rate $rep $line" | while read -r w; do bench_say "$w"; done
}

SETS=("${SERVERS[@]}")
for ((rep = 1; rep <= REPS; rep++)); do
  for c in $CASES; do
    for server in "${SETS[@]}"; do run_case "$server" "${c%%:*}" "${c##*:}" "$rep"; done
  done
  SETS=("${SETS[@]:1}" "${SETS[0]}")  # the next repetition starts with the next server
done

# Idle watchers: RSS growth per watcher of fresh servers (and etcd's heap +
# stacks after GC), BENCH_ETCD_REPS times, the same settle times.
idle_run() {  # SERVER REP; appends "SERVER REP rss_kib go_kib" (per watcher)
  local server=$1 rep=$2 rss0 rss1 go0="" go1=""
  start_server "$server" "idle.$server.$rep"
  rss0=$(rss_kb "$SERVER_PID")
  [[ "$server" == walwatch ]] || go0=$(etcd_go_bytes)
  client_cmd "$server" "$IDLE"
  rm -f "$DIR/ready.idle"
  "${CLIENT[@]}" --ready-file "$DIR/ready.idle" --duration $((SETTLE * 2 + 60)) \
    >"$DIR/idle.client" 2>&1 &
  CLIENT_PID=$!
  wait_for_file "$DIR/ready.idle" "$CLIENT_PID" || { cat "$DIR/idle.client" >&2; bench_die "idle $server watchers did not start"; }
  sleep "$SETTLE"
  rss1=$(rss_kb "$SERVER_PID")
  [[ "$server" == walwatch ]] || go1=$(etcd_go_bytes)
  kill -TERM "$CLIENT_PID" 2>/dev/null || true
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  stop_server "$server"
  local line
  line=$(awk -v a="$rss0" -v b="$rss1" -v g0="$go0" -v g1="$go1" -v n="$IDLE" \
    'BEGIN { printf "%.2f %s", (b - a) / n, (g0 == "" ? "-" : sprintf("%.2f", (g1 - g0) / 1024 / n)) }')
  echo "$server $rep $line" >>"$IDLE_RUNS"
  bench_say "idle watchers ($IDLE), $server run $rep: KiB each, RSS and (etcd) heap + stacks after GC: $line"
}
SETS=("${SERVERS[@]}")
for ((rep = 1; rep <= REPS; rep++)); do
  for server in "${SETS[@]}"; do idle_run "$server" "$rep"; done
  SETS=("${SETS[@]:1}" "${SETS[0]}")
done
idle_med() { awk -v s="$1" -v f="$2" '$1 == s && $f != "-" { print $f }' "$IDLE_RUNS" | median; }
ww_idle=$(idle_med walwatch 3)
idle_line="idle $IDLE walwatch_kib=$ww_idle etcd_kib=$(
  for server in "${SERVERS[@]:1}"; do idle_med "$server" 3; idle_med "$server" 4; done | sort -g | head -n 1)"
for server in "${SERVERS[@]:1}"; do
  idle_line+=" ${server#etcd-}_kib=$(idle_med "$server" 3) ${server#etcd-}_go_kib=$(idle_med "$server" 4)"
done
echo "$idle_line" >>"$RESULTS"

# --- the report ---------------------------------------------------------------
agg() {
  awk -v s="$1" -v n="$2" -v r="$3" -v key="$4" \
    '$1 == s && $2 == n && $3 == r { for (i = 5; i <= NF; i++) { split($i, kvp, "="); if (kvp[1] == key) print kvp[2] } }' "$RESULTS" | median
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
# The busiest client and machine of all runs, and whether either could
# have been the bottleneck.
busiest() { awk -v key="$1" '$1 != "idle" { for (i = 5; i <= NF; i++) { split($i, kvp, "="); if (kvp[1] == key && kvp[2] + 0 > m) m = kvp[2] + 0 } } END { print m + 0 }' "$RESULTS"; }
max_client=$(busiest client_cpu) max_machine=$(busiest machine_cpu)
if awk -v c="$max_client" -v m="$max_machine" 'BEGIN { exit !(c < 50 && m < 90) }'; then
  bottleneck="The clients are not the bottleneck: the busiest used $max_client % of one core, and the machine was at most $max_machine % busy (of $NPROC cores)."
else
  bottleneck="**Warning**: a client used up to $max_client % of one core, or the machine was up to $max_machine % busy (of $NPROC cores, other work included): some latencies may be the client's or the machine's, not the server's."
fi
bench_say "$bottleneck"
etcd_version=$("$ETCD_BIN" --version | awk '/^etcd Version/ { print $3 }')
client_version=$(awk '$1 == "go.etcd.io/etcd/client/v3" { print $2 }' "$ROOT/tests/bench/etcdwatch/go.mod")
{
  echo
  echo "etcd against walwatch (\`tests/bench/etcd_bench.sh\`, etcd $etcd_version, data on /dev/shm, --enable-pprof): the same ~$OBJECT_BYTES-byte Deployments written as keys (etcd's JSON gateway) and as rows by bench_writer (2 connections, $RUN_SECONDS s); walwatch watched by fanout_client, a Unix-socket connection per watcher; etcd by etcdwatch (clientv3 $client_version, gRPC), per-stream = a connection and gRPC stream per watcher, multiplexed = the watchers on $([[ "$CONNS" == auto ]] && echo "one connection per 100 (one gRPC stream each)" || echo "$CONNS connection(s), one gRPC stream each")$([[ " $MODES " != *" gateway "* ]] || echo ", gateway = fanout_client on etcd's JSON gateway, an HTTP/1.1 stream per watcher (an extra: not how Kubernetes watches etcd)"). Measured over the writer's run: on the server, CPU (walwatch + all of PostgreSQL, or etcd, writes included, % of one core) and, after it, RSS (etcd: also heap + stacks in use after a forced GC, watchers open); on the client, commit → client latency, deliveries, CPU (% of one core); the machine's CPU (% of all $NPROC cores, other work included). Fresh servers every run, settled $SETTLE s; medians of $REPS runs, the order rotating."
  echo
  echo "| watchers | commits/s asked | server | commits/s done | deliveries/s | p50 ms | p99 ms | server CPU % | CPU per delivered event, µs | server RSS MiB | etcd heap + stacks after GC, MiB | client CPU % | machine CPU % |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for c in $CASES; do
    n=${c%%:*} r=${c##*:}
    for server in "${SERVERS[@]}"; do
      go_mib=$(agg "$server" "$n" "$r" go_mib)
      echo "| $n | $r | $server | $(agg "$server" "$n" "$r" writer_rate) | $(agg "$server" "$n" "$r" deliveries_per_s) | $(agg "$server" "$n" "$r" p50_ms) | $(agg "$server" "$n" "$r" p99_ms) | $(agg "$server" "$n" "$r" server_cpu) | $(agg "$server" "$n" "$r" cpu_us_per_delivery) | $(agg "$server" "$n" "$r" rss_mib) | ${go_mib:--} | $(agg "$server" "$n" "$r" client_cpu) | $(agg "$server" "$n" "$r" machine_cpu) |"
    done
    for server in "${SERVERS[@]:1}"; do
      echo "| $n | $r | **$server / walwatch** | | | **$(ratio "$(agg "$server" "$n" "$r" p50_ms)" "$(agg walwatch "$n" "$r" p50_ms)")** | **$(ratio "$(agg "$server" "$n" "$r" p99_ms)" "$(agg walwatch "$n" "$r" p99_ms)")** | | **$(ratio "$(agg "$server" "$n" "$r" cpu_us_per_delivery)" "$(agg walwatch "$n" "$r" cpu_us_per_delivery)")** | | | | |"
    done
  done
  echo
  echo "$bottleneck"
  echo
  echo "Idle watchers ($IDLE, fresh servers settled $SETTLE s, median of $REPS; growth per watcher): walwatch RSS $ww_idle KiB; $(
    for server in "${SERVERS[@]:1}"; do
      printf '%s%s RSS %s KiB, heap + stacks after GC %s KiB' "${sep:-}" "$server" "$(idle_med "$server" 3)" "$(idle_med "$server" 4)"
      sep="; "
    done). etcd's lowest / walwatch: **$(ratio "$(awk '$1 == "idle" { sub(/.*=/, "", $4); print $4 }' "$RESULTS")" "$ww_idle")**."
} | tee "${BENCH_REPORT:-/dev/null}"
[[ -z "${BENCH_OUT:-}" ]] || cp "$RESULTS" "$BENCH_OUT"
