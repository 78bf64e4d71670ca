#!/usr/bin/env bash
# Quiet watchers end to end (issue 18 §2): what a hot resource's churn costs
# walwatch when 1,000 watchers of quiet resources sit in the same log, and
# whether any of them is ended with 410 while nothing of theirs was evicted.
#
#   tests/bench/quiet_e2e_bench.sh
#
# One throwaway PostgreSQL 15 + wal2json and one walwatch with a small
# --max-log-bytes (BENCH_QUIET_E2E_LOG), which the hot churn overruns several
# times per run. The quiet resources are bench_writer's spread objects
# (widgets00..99, 4,000 rows), written once at setup and never again; the
# hot one is bench_writer's `one` deployments, updated at BENCH_QUIET_E2E_RATE
# commits/s for BENCH_QUIET_E2E_SECONDS. Runs alternate between no watcher at all
# and 1,000 watchers (fanout_client, one connection each) of 30 of the quiet
# resources (watcher i: widgets(i%30), every other one in namespace
# ns-(i%10)), opened from walwatch's current RV before the writer starts.
# Reported, medians of BENCH_QUIET_E2E_REPS runs each: walwatch's CPU
# (utime+stime, /proc/PID/stat) per hot commit from the writer's start to
# its end, its ratio with / without the watchers, and summed over the runs
# the quiet watchers' events, errors and 410s (all must be 0) and the hot
# commits evicted (the log's walwatch_event_log_evicted_transactions_total).
#
# Before the runs, BENCH_QUIET_E2E_FILL (30000) commits fill the log.
# Environment: BENCH_QUIET_E2E_RATE (2000), BENCH_QUIET_E2E_SECONDS (15),
# BENCH_QUIET_E2E_REPS (3), BENCH_QUIET_E2E_LOG (16Mi),
# BENCH_QUIET_E2E_WATCHERS (1000), BENCH_QUIET_E2E_FILL (30000),
# BENCH_OBJECT_BYTES (1024), BENCH_REPORT (also write the Markdown section
# to this file), BENCH_OUT (its key=value lines per run), plus bench_lib.sh's (WALWATCH_BIN, BENCH_KEEP, ...).
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

RATE=${BENCH_QUIET_E2E_RATE:-2000}
RUN_SECONDS=${BENCH_QUIET_E2E_SECONDS:-15}
REPS=${BENCH_QUIET_E2E_REPS:-3}
LOG=${BENCH_QUIET_E2E_LOG:-16Mi}
QUIET_WATCHERS=${BENCH_QUIET_E2E_WATCHERS:-1000}
OBJECT_BYTES=${BENCH_OBJECT_BYTES:-1024}

bench_init quiet
"$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null
"$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode spread --object-bytes "$OBJECT_BYTES" >/dev/null
start_walwatch bench_quiet --max-log-bytes "$LOG"
# Fill the log first, so that every run evicts (no run finds room free).
"$BENCH_WRITER" --conninfo "$CONNINFO" --mode one --object-bytes "$OBJECT_BYTES" \
  --rate 0 --count "${BENCH_QUIET_E2E_FILL:-30000}" --writers 2 >/dev/null
fresh_rv >/dev/null

for ((i = 0; i < QUIET_WATCHERS; i++)); do
  if ((i % 2 == 0)); then
    printf '/apis/bench.walwatch.io/v1/widgets%02d?watch=1&resourceVersion=@RV@\n' $((i % 30))
  else
    printf '/apis/bench.walwatch.io/v1/namespaces/ns-%d/widgets%02d?watch=1&resourceVersion=@RV@\n' \
      $((i % 10)) $((i % 30))
  fi
done >"$DIR/quiet.paths"

RESULTS=$DIR/results.txt
: >"$RESULTS"

# One run with `n` quiet watchers; appends "n rep key=value..." to $RESULTS.
run_case() {
  local n=$1 rep=$2 tag="$1.$2" rv
  rv=$(fresh_rv)
  [[ -n "$rv" ]] || bench_die "no fresh resourceVersion from walwatch"
  if ((n > 0)); then
    sed "s/@RV@/$rv/" "$DIR/quiet.paths" >"$DIR/paths.$tag"
    "$FANOUT_CLIENT" --socket "$SOCK" --watchers "$n" --paths-file "$DIR/paths.$tag" \
      --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" \
      >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
    CLIENT_PID=$!
    wait_for_file "$DIR/ready.$tag" "$CLIENT_PID" ||
      { cat "$DIR/client.$tag.err" >&2; bench_die "the watchers did not start ($tag)"; }
  fi
  local ww0 ww1 t0 t1 ev0 ev1
  ev0=$(metric walwatch_event_log_evicted_transactions_total)
  ww0=$(cpu_ticks "$WALWATCH_PID") t0=$(now_s)
  "$BENCH_WRITER" --conninfo "$CONNINFO" --mode one --object-bytes "$OBJECT_BYTES" \
    --rate "$RATE" --duration "$RUN_SECONDS" --writers 2 \
    --out "$DIR/done.$tag" >"$DIR/writer.$tag"
  # Until walwatch has the last commit: its current RV reaches the WAL's.
  fresh_rv >/dev/null
  ww1=$(cpu_ticks "$WALWATCH_PID") t1=$(now_s)
  ev1=$(metric walwatch_event_log_evicted_transactions_total)
  local c=$DIR/client.$tag
  if ((n > 0)); then
    wait "$CLIENT_PID" || true
    CLIENT_PID=""
  else
    printf 'events=0\nerrors=0\nerrors_410=0\nended=0\nconnected=0\n' >"$c"
  fi
  kill -0 "$WALWATCH_PID" 2>/dev/null || { tail -n 20 "$DIR/walwatch.log" >&2; bench_die "walwatch died ($tag)"; }
  local line
  line=$(awk -v ww=$((ww1 - ww0)) -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" \
    -v writes="$(kv "$DIR/writer.$tag" writes)" -v wrate="$(kv "$DIR/writer.$tag" rate)" \
    -v evicted=$((${ev1:-0} - ${ev0:-0})) -v connected="$(kv "$c" connected)" \
    -v events="$(kv "$c" events)" -v errors="$(kv "$c" errors)" -v e410="$(kv "$c" errors_410)" \
    -v ended="$(kv "$c" ended)" \
    'BEGIN { printf "writes=%d writer_rate=%.0f ww_cpu_pct=%.1f ww_us_per_commit=%.2f evicted=%d connected=%d quiet_events=%d errors=%d e410=%d ended=%d",
      writes, wrate, 100 * ww / hz / (t1 - t0), 1e6 * ww / hz / writes, evicted, connected, events, errors, e410, ended }')
  echo "$n $rep $line" >>"$RESULTS"
  bench_say "quiet watchers=$n run $rep: $line"
  rm -f "$DIR/paths.$tag"
}

for ((rep = 1; rep <= REPS; rep++)); do
  # ABBA: neither case always runs first.
  if ((rep % 2)); then
    run_case 0 "$rep"
    run_case "$QUIET_WATCHERS" "$rep"
  else
    run_case "$QUIET_WATCHERS" "$rep"
    run_case 0 "$rep"
  fi
done
stop_walwatch

# --- the report ---------------------------------------------------------------

# One key over a case's runs: their median, or their sum.
agg() {
  local how=$1 n=$2 key=$3
  awk -v n="$n" -v k="$key" '$1 == n { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$RESULTS" |
    if [[ "$how" == sum ]]; then awk '{ s += $1 } END { print s + 0 }'; else median; fi
}
base=$(agg median 0 ww_us_per_commit)
with=$(agg median "$QUIET_WATCHERS" ww_us_per_commit)
{
  echo
  echo "Quiet watchers end to end (issue 18 §2; tests/bench/quiet_e2e_bench.sh): walwatch --max-log-bytes $LOG, hot deployments updated at $RATE commits/s for $RUN_SECONDS s (one row per commit, objects of $OBJECT_BYTES bytes), median of $REPS runs each, alternating:"
  echo
  echo "| quiet watchers | hot commits | commits evicted from the log | walwatch CPU, % of a core | walwatch CPU per hot commit, µs | quiet watchers connected | events they received | errors | 410s |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for n in 0 "$QUIET_WATCHERS"; do
    echo "| $n | $(agg median "$n" writes) | $(agg median "$n" evicted) | $(agg median "$n" ww_cpu_pct) | $(agg median "$n" ww_us_per_commit) | $(agg median "$n" connected) | $(agg sum "$n" quiet_events) | $(agg sum "$n" errors) | **$(agg sum "$n" e410)** |"
  done
  echo
  awk -v a="$base" -v b="$with" -v n="$QUIET_WATCHERS" 'BEGIN { printf "walwatch CPU per hot commit with %d quiet watchers / without: **%.2f**. Quiet watchers ended with 410 (all runs): must be 0.\n", n, (a > 0 ? b / a : 0) }'
} | tee "${BENCH_REPORT:-/dev/null}"
[[ -z "${BENCH_OUT:-}" ]] || cp "$RESULTS" "$BENCH_OUT"
