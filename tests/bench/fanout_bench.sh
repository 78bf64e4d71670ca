#!/usr/bin/env bash
# Fan-out: how long a commit takes to reach many watchers, and what walwatch
# spends on it.
#
#   tests/bench/fanout_bench.sh
#
# One throwaway PostgreSQL 15 + wal2json (with BENCH_DB=mysql: a MariaDB,
# walwatch --source mysql; mfanout_bench.sh) and one walwatch for all cases. Each
# case: fanout_client opens N watches (one process, one connection each, on
# epoll) from walwatch's current RV and waits for every 200 header; then
# bench_writer runs BENCH_FANOUT_SECONDS at a fixed rate of one-row UPDATE
# commits (BENCH_FANOUT_WRITERS connections), each object stamped with the
# writer's clock; the client takes commit -> receive from each event it reads
# and, once the writer is done, waits until every watcher has the last
# write (or no byte came for a second, or BENCH_FANOUT_DRAIN seconds passed).
# Cases:
#   one     N watchers of /apis/apps/v1/deployments (every write is for each
#           of them; every watcher must see every write, in order, once), for
#           N in BENCH_FANOUT_WATCHERS x rate in BENCH_FANOUT_RATES, plus
#           BENCH_FANOUT_EXTRA (N:rate pairs; the target case 1000:2000);
#   spread  1,000 watchers over 100 resources x 10 namespaces (watcher i:
#           widgets(i%100) in ns-(i/100%10), one watcher per stream), each with
#           a label selector (shard in (s0,s1) / shard=s2 / app=bench,shard!=s3
#           by i%3; objects carry shard s0..s3), at BENCH_FANOUT_SPREAD_RATES;
#           writes go round-robin over all 4,000 objects, so a write reaches
#           one watcher half of the time;
#   mixed   Clusterpedia's shape (bench_writer --mode mixed): 4 clusters, one
#           hot resource (pods, every other write) and 99 quiet ones; N in
#           BENCH_FANOUT_MIXED watchers, each of one cluster, 3 in 10 of
#           pods, two thirds in one namespace, each with a label selector;
#           at BENCH_FANOUT_MIXED_RATE commits/s.
# Reported per case, medians of BENCH_FANOUT_REPS runs: the writer's commit
# rate, deliveries/s (events received by all watchers per second, from the
# writer's start to its end, or to the last event if that came later),
# commit -> client latency p50/p99 (max: the largest of all runs), walwatch's
# CPU (utime+stime from /proc/PID/stat, % of one core, from the writer's
# start to the client's end; per run also in µs per delivered event and per
# commit: ww_us_per_event, ww_us_per_commit), the client's CPU, the machine's busy CPU (of
# 200 %), and every error, 410, lost, duplicate or missing event summed over
# the runs. A case that does not keep up (a watcher short of the last write,
# an error, or the last event more than 1 s after the writer stopped) is run
# once only and marked saturated.
#
# Environment:
#   BENCH_FANOUT_WATCHERS ("1 100 1000 5000"; empty: none), BENCH_FANOUT_RATES
#   ("100 1000 5000"), BENCH_FANOUT_EXTRA ("1000:2000"),
#   BENCH_FANOUT_SPREAD_RATES ("100 1000 5000"), BENCH_FANOUT_MIXED
#   ("1000 5000"), BENCH_FANOUT_MIXED_RATE (2000), BENCH_FANOUT_SECONDS (5),
#   BENCH_FANOUT_REPS (3), BENCH_FANOUT_GOAL_REPS (BENCH_FANOUT_REPS: the
#   runs of the goals' cases, one 1000 x 2000 and mixed 5000),
#   BENCH_FANOUT_WRITERS (2), BENCH_FANOUT_DRAIN (15),
#   BENCH_OBJECT_BYTES (1024: object JSON text; events are ~1.27 KB),
#   BENCH_WALWATCH_FLAGS (extra walwatch flags, words),
#   BENCH_DB (postgres; mysql: MariaDB's binlog, see bench_lib.sh),
#   BENCH_REPORT (also write the Markdown section to this file),
#   BENCH_FANOUT_OUT (also write key=value results per case to this file),
#   plus bench_lib.sh's (WALWATCH_BIN, BENCH_KEEP, BENCH_TIMEOUT).
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

WATCHERS=${BENCH_FANOUT_WATCHERS-"1 100 1000 5000"}
RATES=${BENCH_FANOUT_RATES:-"100 1000 5000"}
EXTRA=${BENCH_FANOUT_EXTRA-"1000:2000"}
SPREAD_RATES=${BENCH_FANOUT_SPREAD_RATES-"100 1000 5000"}
MIXED=${BENCH_FANOUT_MIXED-"1000 5000"}
MIXED_RATE=${BENCH_FANOUT_MIXED_RATE:-2000}
RUN_SECONDS=${BENCH_FANOUT_SECONDS:-5}
REPS=${BENCH_FANOUT_REPS:-3}
GOAL_REPS=${BENCH_FANOUT_GOAL_REPS:-$REPS}
WRITERS=${BENCH_FANOUT_WRITERS:-2}
DRAIN=${BENCH_FANOUT_DRAIN:-15}
OBJECT_BYTES=${BENCH_OBJECT_BYTES:-1024}
read -r -a EXTRA_FLAGS <<<"${BENCH_WALWATCH_FLAGS:-}"

bench_init fanout
"$BENCH_WRITER" "${WRITER_DB[@]}" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null
[[ -z "$SPREAD_RATES" ]] || "$BENCH_WRITER" "${WRITER_DB[@]}" --setup --mode spread --object-bytes "$OBJECT_BYTES" >/dev/null
[[ -z "$MIXED" ]] || "$BENCH_WRITER" "${WRITER_DB[@]}" --setup --mode mixed --object-bytes "$OBJECT_BYTES" >/dev/null
start_walwatch bench_fanout "${EXTRA_FLAGS[@]}"
if [[ "${BENCH_DB:-postgres}" == mysql ]]; then
  DB_NAME="MariaDB $("${WALWATCH_MARIADBD:-/usr/sbin/mariadbd}" --version 2>/dev/null | awk '{ print $3 }' || true)"
  WALWATCH_CMD="walwatch --source mysql --server-id-from bench-bench_fanout --socket ... --metrics-address ... --log-level warn ${BENCH_WALWATCH_FLAGS:-}"
else
  DB_NAME="PostgreSQL"
  WALWATCH_CMD="walwatch --slot bench_fanout --socket ... --metrics-address ... --log-level warn ${BENCH_WALWATCH_FLAGS:-}"
fi

# The spread case's 1,000 watch paths; @RV@ is replaced per run.
SELECTORS=("shard%20in%20(s0%2Cs1)" "shard%3Ds2" "app%3Dbench%2Cshard!%3Ds3")
for ((i = 0; i < 1000; i++)); do
  printf '/apis/bench.walwatch.io/v1/namespaces/ns-%d/widgets%02d?watch=1&resourceVersion=@RV@&labelSelector=%s\n' \
    $(((i / 100) % 10)) $((i % 100)) "${SELECTORS[i % 3]}"
done >"$DIR/spread.paths"

# The mixed case's 5,000 watch paths (bench_writer --mode mixed: clusters
# c1..c4; pods, hot, in ns-0..9; widgets00..98, quiet, in ns-0..4): watcher
# i watches, in cluster c(i%4+1), pods (3 in 10) or widgets((i/10)%99); in
# one namespace for two thirds of them; with one of SELECTORS by i%3.
for ((i = 0; i < 5000; i++)); do
  c=$((i % 4 + 1)) ns=""
  if ((i % 3 != 0)); then
    if ((i % 10 < 3)); then ns="namespaces/ns-$((i / 7 % 10))/"; else ns="namespaces/ns-$((i / 7 % 5))/"; fi
  fi
  if ((i % 10 < 3)); then
    printf '/clusters/c%d/api/v1/%spods' "$c" "$ns"
  else
    printf '/clusters/c%d/apis/bench.walwatch.io/v1/%swidgets%02d' "$c" "$ns" $((i / 10 % 99))
  fi
  printf '?watch=1&resourceVersion=@RV@&labelSelector=%s\n' "${SELECTORS[i % 3]}"
done >"$DIR/mixed.paths"

RESULTS=$DIR/results.txt
: >"$RESULTS"

# One run; appends "mode watchers rate rep key=value..." to $RESULTS and
# sets SATURATED=1 when the watchers did not keep up.
run_case() {
  local mode=$1 n=$2 rate=$3 rep=$4
  local tag="$mode.$n.$rate.$rep" rv
  rv=$(fresh_rv)
  [[ -n "$rv" ]] || bench_die "no fresh resourceVersion from walwatch"
  local -a watch
  if [[ "$mode" == one ]]; then
    watch=(--path "/apis/apps/v1/deployments?watch=1&resourceVersion=$rv" --check-seq)
  else
    sed "s/@RV@/$rv/" "$DIR/$mode.paths" >"$DIR/paths.$tag"
    watch=(--paths-file "$DIR/paths.$tag")
  fi
  "$FANOUT_CLIENT" --socket "$SOCK" --watchers "$n" "${watch[@]}" \
    --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" \
    --drain-timeout "$DRAIN" >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
  CLIENT_PID=$!
  wait_for_file "$DIR/ready.$tag" "$CLIENT_PID" ||
    { cat "$DIR/client.$tag.err" >&2; bench_die "the watchers did not start ($tag)"; }
  local ww0 cl0 m0 t0 ww1 cl1 m1 t1 t0_ns
  # walwatch's own count of its event writes (one commit-to-write
  # observation per write) and of the events they carried.
  local wr0 ev0 wr1 ev1
  wr0=$(metric_sum walwatch_commit_to_write_seconds_count) ev0=$(metric_sum walwatch_events_sent_total)
  ww0=$(cpu_ticks "$WALWATCH_PID") cl0=$(cpu_ticks "$CLIENT_PID") m0=$(machine_busy_ticks) t0=$(now_s)
  t0_ns=$(date +%s%N)
  "$BENCH_WRITER" "${WRITER_DB[@]}" --mode "$mode" --object-bytes "$OBJECT_BYTES" \
    --rate "$rate" --duration "$RUN_SECONDS" --writers "$WRITERS" \
    --out "$DIR/done.$tag" >"$DIR/writer.$tag"
  cl1=$(cpu_ticks "$CLIENT_PID")  # before it exits
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  ww1=$(cpu_ticks "$WALWATCH_PID") m1=$(machine_busy_ticks) t1=$(now_s)
  wr1=$(metric_sum walwatch_commit_to_write_seconds_count) ev1=$(metric_sum walwatch_events_sent_total)
  kill -0 "$WALWATCH_PID" 2>/dev/null || { tail -n 20 "$DIR/walwatch.log" >&2; bench_die "walwatch died ($tag)"; }
  local c=$DIR/client.$tag w=$DIR/writer.$tag
  local line
  line=$(awk -v ww=$((ww1 - ww0)) -v cl=$((cl1 - cl0)) -v m=$((m1 - m0)) -v t0="$t0" -v t1="$t1" -v hz="$CLK_TCK" \
    -v writes="$(kv "$w" writes)" -v wsec="$(kv "$w" seconds)" -v wrate="$(kv "$w" rate)" \
    -v events="$(kv "$c" events)" -v ebytes="$(kv "$c" event_bytes)" -v p50="$(kv "$c" latency_p50_us)" -v p99="$(kv "$c" latency_p99_us)" \
    -v max="$(kv "$c" latency_max_us)" -v errors="$(kv "$c" errors)" -v e410="$(kv "$c" errors_410)" \
    -v lost="$(kv "$c" lost)" -v dup="$(kv "$c" duplicates)" -v ooo="$(kv "$c" out_of_order)" \
    -v short="$(kv "$c" short_at_end)" -v ended="$(kv "$c" ended)" -v stmt="$(kv "$w" statement_p99_us)" \
    -v last_ns="$(kv "$c" last_event_ns)" -v t0_ns="$t0_ns" -v wwrites=$((wr1 - wr0)) -v wevents=$((ev1 - ev0)) \
    'BEGIN { wall = t1 - t0
      # Deliveries over the writing time, or until the last event arrived
      # if the watchers were still catching up after the writer stopped.
      span = (last_ns - t0_ns) / 1e9; if (span < wsec) span = wsec
      lag = span - wsec
      printf "writes=%d writer_rate=%.0f deliveries_per_s=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.1f ww_cpu=%.0f client_cpu=%.0f machine_cpu=%.0f errors=%d e410=%d lost=%d dup=%d ooo=%d short=%d ended=%d stmt_p99_ms=%.2f event_bytes=%.0f writes_per_delivery=%.3f tail_s=%.2f ww_us_per_event=%.2f ww_us_per_commit=%.2f",
        writes, wrate, events / span, p50 / 1e3, p99 / 1e3, max / 1e3,
        100 * ww / hz / wall, 100 * cl / hz / wall, 100 * m / hz / wall,
        errors, e410, lost, dup, ooo, short, ended, stmt / 1e3, (events > 0 ? ebytes / events : 0), (wevents > 0 ? wwrites / wevents : 0), lag,
        (events > 0 ? 1e6 * ww / hz / events : 0), (writes > 0 ? 1e6 * ww / hz / writes : 0) }')
  echo "$mode $n $rate $rep $line" >>"$RESULTS"
  bench_say "$mode watchers=$n rate=$rate run $rep: $line"
  SATURATED=0
  # Not keeping up: an error, a watcher short of the last write, the writer
  # below 90 % of its rate, or the last event more than a second after the
  # writer stopped (the watchers were working off a backlog).
  if [[ "$(kv "$c" errors)" != 0 || "$(kv "$c" short_at_end)" != 0 ]] ||
    awk -v l="${line##*tail_s=}" 'BEGIN { exit !(l > 1) }' ||
    awk -v r="$(kv "$w" rate)" -v want="$rate" 'BEGIN { exit !(r < 0.9 * want) }'; then
    SATURATED=1
  fi
  [[ "$mode" == one ]] || [[ "$(kv "$c" ended)" == 0 ]] || SATURATED=1
  rm -f "$DIR/paths.$tag"
}

run_cases() {
  local mode=$1 n=$2 rate=$3 rep reps=$REPS
  # The goals' cases: "every run" is only as good as the runs there are.
  [[ "$mode $n $rate" != "one 1000 2000" && "$mode $n" != "mixed 5000" ]] || reps=$GOAL_REPS
  for ((rep = 1; rep <= reps; rep++)); do
    run_case "$mode" "$n" "$rate" "$rep"
    if ((SATURATED)); then
      bench_say "$mode watchers=$n rate=$rate did not keep up: not repeated"
      break
    fi
  done
}

for n in $WATCHERS; do
  for rate in $RATES; do run_cases one "$n" "$rate"; done
done
for pair in $EXTRA; do run_cases one "${pair%%:*}" "${pair##*:}"; done
for rate in $SPREAD_RATES; do run_cases spread 1000 "$rate"; done
for n in $MIXED; do run_cases mixed "$n" "$MIXED_RATE"; done
stop_walwatch

# --- the report ---------------------------------------------------------------

# One key over a case's runs: their median, sum or largest.
agg() {
  local how=$1 key=$2 mode=$3 n=$4 rate=$5
  awk -v mode="$mode" -v n="$n" -v rate="$rate" -v key="$key" \
    '$1 == mode && $2 == n && $3 == rate { for (i = 5; i <= NF; i++) { split($i, kvp, "="); if (kvp[1] == key) print kvp[2] } }' \
    "$RESULTS" | {
    case $how in
      median) median ;;
      sum) awk '{ s += $1 } END { print s + 0 }' ;;
      max) sort -g | tail -n 1 ;;
    esac
  }
}

# The median event line over all runs, in bytes.
event_size() {
  awk '{ for (i = 5; i <= NF; i++) if ($i ~ /^event_bytes=/ && $i != "event_bytes=0") { sub(/.*=/, "", $i); print $i } }' "$RESULTS" | median
}

report() {
  echo
  echo "Fan-out on $DB_NAME (\`tests/bench/fanout_bench.sh\`): bench_writer UPDATEs of ~$OBJECT_BYTES-byte objects (event lines of $(event_size) bytes) from $WRITERS connections for ${RUN_SECONDS} s per run; latency = the writer's clock before the statement to the client's read; medians of up to $REPS runs (max: of all runs). CPU in % of one core (machine: of $(($(nproc) * 100)) %)."
  echo
  echo "walwatch: \`$WALWATCH_CMD\`"
  echo
  echo "| case | watchers | commits/s asked | commits/s done | deliveries/s | p50 ms | p99 ms | max ms | last event after the writer, s | walwatch CPU % | client CPU % | machine CPU % | runs | errors / 410 / lost / dup / short |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  local mode n rate
  while read -r mode n rate; do
    local runs sat=""
    runs=$(awk -v m="$mode" -v n="$n" -v r="$rate" '$1 == m && $2 == n && $3 == r' "$RESULTS" | wc -l)
    if (($(agg sum errors "$mode" "$n" "$rate") + $(agg sum short "$mode" "$n" "$rate") > 0)) ||
      awk -v l="$(agg max tail_s "$mode" "$n" "$rate")" 'BEGIN { exit !(l > 1) }'; then
      sat=" (saturated)"
    fi
    printf '| %s%s | %s | %s | %.0f | %.0f | %.2f | %.2f | %.1f | %s | %s | %s | %s | %s | %s / %s / %s / %s / %s |\n' \
      "$mode" "$sat" "$n" "$rate" "$(agg median writer_rate "$mode" "$n" "$rate")" \
      "$(agg median deliveries_per_s "$mode" "$n" "$rate")" "$(agg median p50_ms "$mode" "$n" "$rate")" \
      "$(agg median p99_ms "$mode" "$n" "$rate")" "$(agg max max_ms "$mode" "$n" "$rate")" \
      "$(agg max tail_s "$mode" "$n" "$rate")" \
      "$(agg median ww_cpu "$mode" "$n" "$rate")" "$(agg median client_cpu "$mode" "$n" "$rate")" \
      "$(agg median machine_cpu "$mode" "$n" "$rate")" "$runs" \
      "$(agg sum errors "$mode" "$n" "$rate")" "$(agg sum e410 "$mode" "$n" "$rate")" \
      "$(agg sum lost "$mode" "$n" "$rate")" "$(( $(agg sum dup "$mode" "$n" "$rate") + $(agg sum ooo "$mode" "$n" "$rate") ))" \
      "$(agg sum short "$mode" "$n" "$rate")"
  done < <(awk '!seen[$1 " " $2 " " $3]++ { print $1, $2, $3 }' "$RESULTS")
  local target_p99
  target_p99=$(agg median p99_ms one 1000 2000)
  if [[ -n "$target_p99" ]]; then
    echo
    awk -v p="$target_p99" 'BEGIN {
      printf "Target: 1,000 watchers of one resource at 2,000 commits/s, commit to client p99 %.1f ms — target < 50 ms: ", p
      if (p < 50) print "met."; else printf "missed by %.0f%% (%.1f× the target).\n", 100 * (p - 50) / 50, p / 50 }'
  fi
}

report | tee "$DIR/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$DIR/report.md" "$BENCH_REPORT"
[[ -z "${BENCH_FANOUT_OUT:-}" ]] || cp "$RESULTS" "$BENCH_FANOUT_OUT"
