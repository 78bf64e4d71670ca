#!/usr/bin/env bash
# The fan-out ceiling: what this machine allows at all, with walwatch and
# PostgreSQL taken out.
#
#   tests/bench/ceiling_bench.sh
#
# fanout_ceiling (tests/bench/fanout_ceiling.cc) serves N watch streams on a
# Unix socket the way walwatch does (chunked HTTP/1.1, one JSON event line
# per event, each event's bytes built once and written to every watcher) and
# makes its own events from a timer: no database, no decoding, no event log.
# fanout_client, the fan-out benchmark's client, reads and measures them as
# it does walwatch's (--check-seq: every watcher must get every event, in
# order, once). So the figures compare with fanout_bench.sh's one-resource
# cases: what walwatch adds is the difference, and a target this ideal server
# misses here cannot be met by walwatch here either.
#
# Cases: BENCH_CEILING_CASES, words WATCHERS:RATE:BATCH_MS:THREADS[:WRITE]
# (default "1000:1000:0:1 1000:2000:0:1 1000:2000:5:1 1000:2000:0:2
# 1000:2000:0:1:sendfile 1000:2000:5:1:sendfile"; BATCH_MS 0 writes as soon
# as an event is due, as walwatch does, > 0 holds events back and writes at
# most every BATCH_MS; THREADS writing threads; WRITE "copy" (the default:
# writev from memory) or "sendfile" (from a memfd, so that the socket takes
# references to its pages instead of a copy). Each case runs
# BENCH_CEILING_SECONDS (5) per run, BENCH_CEILING_REPS (3) runs; medians are
# reported, max of all runs. BENCH_CEILING_EVENT_BYTES (1265: the fan-out
# benchmark's event lines of ~1 KB objects). BENCH_REPORT: also write the
# Markdown section to this file. BENCH_OUT: its key=value lines per run.
# Binaries from WALWATCH_BIN's directory
# (default build-bench/).
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
# shellcheck disable=SC2034
BENCH_NAME=ceiling  # bench_say's prefix

CASES=${BENCH_CEILING_CASES:-"1000:1000:0:1 1000:2000:0:1 1000:2000:5:1 1000:2000:0:2 1000:2000:0:1:sendfile 1000:2000:5:1:sendfile"}
RUN_SECONDS=${BENCH_CEILING_SECONDS:-5}
REPS=${BENCH_CEILING_REPS:-3}
EVENT_BYTES=${BENCH_CEILING_EVENT_BYTES:-1265}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-600}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN_DIR=$(dirname "${WALWATCH_BIN:-$ROOT/build-bench/walwatch}")
CEILING=$BIN_DIR/fanout_ceiling
FANOUT_CLIENT=$BIN_DIR/fanout_client
for b in "$CEILING" "$FANOUT_CLIENT"; do
  [[ -x "$b" ]] || bench_die "no $b; build the bench targets first (make bench builds them)"
done
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
DIR=$(mktemp -d /tmp/ww-ceiling.XXXXXX)
SERVER_PID="" CLIENT_PID=""
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  local rc=$?
  set +e
  for pid in $CLIENT_PID $SERVER_PID; do kill -TERM "$pid" 2>/dev/null && { wait "$pid" 2>/dev/null || true; }; done
  if [[ "${BENCH_KEEP:-}" == 1 ]]; then bench_say "kept $DIR"; else rm -rf -- "$DIR"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

RESULTS=$DIR/results.txt
: >"$RESULTS"

# One run of a case word; appends "word rep key=value..." to $RESULTS.
run_case() {
  local spec=$1 rep=$2 n rate batch threads write
  IFS=: read -r n rate batch threads write <<<"$spec"
  local tag="${spec//:/.}.$rep" sock=$DIR/s.sock i
  local -a write_flag=()
  case ${write:-copy} in
    copy) ;;
    sendfile) write_flag=(--sendfile) ;;
    *) bench_die "case $spec: WRITE must be copy or sendfile" ;;
  esac
  rm -f "$sock"
  "$CEILING" --socket "$sock" --watchers "$n" --rate "$rate" --duration "$RUN_SECONDS" \
    --batch-ms "$batch" --threads "$threads" --event-bytes "$EVENT_BYTES" "${write_flag[@]}" \
    --start-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" \
    >"$DIR/server.$tag" 2>"$DIR/server.$tag.err" &
  SERVER_PID=$!
  for ((i = 0; i < BENCH_TIMEOUT * 20; i++)); do
    [[ -S "$sock" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$DIR/server.$tag.err" >&2; bench_die "fanout_ceiling exited ($tag)"; }
    sleep 0.05
  done
  "$FANOUT_CLIENT" --socket "$sock" --watchers "$n" --path "/apis/apps/v1/deployments?watch=1" \
    --check-seq --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" \
    >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
  CLIENT_PID=$!
  wait_for_file "$DIR/ready.$tag" "$CLIENT_PID" ||
    { cat "$DIR/client.$tag.err" >&2; bench_die "the watchers did not start ($tag)"; }
  local sv0 cl0 m0 t0 sv1 cl1 m1 t1
  sv0=$(cpu_ticks "$SERVER_PID") cl0=$(cpu_ticks "$CLIENT_PID") m0=$(machine_busy_ticks) t0=$(now_s)
  sv1=$sv0 cl1=$cl0 m1=$m0 t1=$t0
  wait_for_file "$DIR/done.$tag" "$SERVER_PID" || bench_die "fanout_ceiling did not finish ($tag)"
  # Until every watcher has the last event: the client then exits, and the
  # server once its watches are closed.
  # (A sample taken as a process exits reads 0: only larger ones count.)
  local sv cl
  while kill -0 "$CLIENT_PID" 2>/dev/null; do
    sv=$(cpu_ticks "$SERVER_PID") cl=$(cpu_ticks "$CLIENT_PID")
    if ((sv >= sv1 && cl >= cl1)); then
      sv1=$sv cl1=$cl m1=$(machine_busy_ticks) t1=$(now_s)
    fi
    sleep 0.05
  done
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  wait "$SERVER_PID" || bench_die "fanout_ceiling failed ($tag): $(cat "$DIR/server.$tag.err")"
  SERVER_PID=""
  local c=$DIR/client.$tag s=$DIR/server.$tag line
  line=$(awk -v sv=$((sv1 - sv0)) -v cl=$((cl1 - cl0)) -v m=$((m1 - m0)) -v t0="$t0" -v t1="$t1" -v hz="$CLK_TCK" \
    -v events="$(kv "$c" events)" -v secs="$(kv "$c" seconds)" -v p50="$(kv "$c" latency_p50_us)" \
    -v p99="$(kv "$c" latency_p99_us)" -v max="$(kv "$c" latency_max_us)" \
    -v lost="$(kv "$c" lost)" -v dup="$(kv "$c" duplicates)" -v short="$(kv "$c" short_at_end)" \
    -v wpd="$(kv "$s" writes_per_delivery)" -v behind="$(kv "$s" behind_ms_max)" -v ebytes="$(kv "$c" event_bytes)" \
    'BEGIN { wall = t1 - t0
      printf "deliveries_per_s=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.1f server_cpu=%.0f client_cpu=%.0f machine_cpu=%.0f writes_per_delivery=%s behind_ms=%s lost=%d dup=%d short=%d event_bytes=%.0f",
        events / secs, p50 / 1e3, p99 / 1e3, max / 1e3, 100 * sv / hz / wall, 100 * cl / hz / wall,
        100 * m / hz / wall, wpd, behind, lost, dup, short, (events > 0 ? ebytes / events : 0) }')
  echo "$spec $rep $line" >>"$RESULTS"
  bench_say "watchers=$n rate=$rate batch_ms=$batch threads=$threads write=${write:-copy} run $rep: $line"
}

# Runs interleaved (every case once, then again), so that the machine's drift
# falls on all cases alike.
for ((rep = 1; rep <= REPS; rep++)); do
  for c in $CASES; do run_case "$c" "$rep"; done
done

# --- the report ---------------------------------------------------------------

agg() {
  local how=$1 key=$2 spec=$3
  awk -v spec="$spec" -v key="$key" \
    '$1 == spec { for (i = 3; i <= NF; i++) { split($i, kvp, "="); if (kvp[1] == key) print kvp[2] } }' \
    "$RESULTS" | {
    case $how in
      median) median ;;
      sum) awk '{ s += $1 } END { print s + 0 }' ;;
      max) sort -g | tail -n 1 ;;
      all) sort -g | tr '\n' ' ' | sed 's/ $//; s/ /, /g' ;;
    esac
  }
}

report() {
  echo
  echo "Fan-out ceiling (\`tests/bench/ceiling_bench.sh\`): fanout_ceiling, an ideal server with no database, no decoding and no event log, writes event lines of $EVENT_BYTES bytes from a timer to N watchers of one stream, each event's bytes built once; fanout_client reads and checks them as in the fan-out benchmark. ${RUN_SECONDS} s per run, runs of all cases interleaved; medians of $REPS runs (max: of all runs). CPU in % of one core (machine: of $(($(nproc) * 100)) %)."
  echo
  echo "| watchers | events/s | write batching | writing threads | write | deliveries/s | p50 ms | p99 ms (all runs) | max ms | server CPU % | client CPU % | machine CPU % | writes per delivery | lost / dup / short |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  local c n rate batch threads write
  for c in $CASES; do
    IFS=: read -r n rate batch threads write <<<"$c"
    local batching="none"
    [[ "$batch" == 0 ]] || batching="every $batch ms"
    printf '| %s | %s | %s | %s | %s | %.0f | %.2f | %.2f (%s) | %.1f | %s | %s | %s | %s | %s / %s / %s |\n' \
      "$n" "$rate" "$batching" "$threads" "${write:-copy}" \
      "$(agg median deliveries_per_s "$c")" \
      "$(agg median p50_ms "$c")" \
      "$(agg median p99_ms "$c")" \
      "$(agg all p99_ms "$c")" \
      "$(agg max max_ms "$c")" \
      "$(agg median server_cpu "$c")" \
      "$(agg median client_cpu "$c")" \
      "$(agg median machine_cpu "$c")" \
      "$(agg median writes_per_delivery "$c")" \
      "$(agg sum lost "$c")" \
      "$(agg sum dup "$c")" \
      "$(agg sum short "$c")"
  done
}

report | tee "$DIR/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$DIR/report.md" "$BENCH_REPORT"
[[ -z "${BENCH_OUT:-}" ]] || cp "$RESULTS" "$BENCH_OUT"
