#!/usr/bin/env bash
# Replay: how long walwatch takes, after a restart, to rebuild its retained
# window from the slot.
#
#   tests/bench/replay_bench.sh
#
# walwatch (--replay-window 10m, --max-log-bytes 4Gi) streams while
# bench_writer writes BENCH_REPLAY_ROWS one-row UPDATEs (~1 KB objects) as
# fast as it goes, all inside the window; once the log holds them all
# (walwatch_event_log_events), walwatch is stopped with SIGTERM (its last
# status update confirms the window's oldest commit), then started again on
# the same slot. Timed from the restart: /readyz answering 200 (replication
# streaming, less than --ready-max-lag behind), and the log holding every
# event of the window again (walwatch_event_log_events back to its count
# before the restart: from then on a watcher can resume from any RV of the
# window). Polled every 50 ms. Median of BENCH_REPLAY_REPS restarts.
#
# Environment: BENCH_REPLAY_ROWS (50000), BENCH_REPLAY_REPS (3),
# BENCH_OBJECT_BYTES (1024), BENCH_REPORT (also write the Markdown section
# there), BENCH_OUT (a line "events=N READY_S FULL_S EVENTS_PER_S" per
# restart), plus bench_lib.sh's.
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

ROWS=${BENCH_REPLAY_ROWS:-50000}
REPS=${BENCH_REPLAY_REPS:-3}
OBJECT_BYTES=${BENCH_OBJECT_BYTES:-1024}
FLAGS=(--replay-window 10m --max-log-bytes 4Gi --max-watcher-backlog 4Gi)

bench_init replay
"$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null
start_walwatch bench_replay "${FLAGS[@]}"
before=$(metric walwatch_event_log_events)
t0=$(now_s)
"$BENCH_WRITER" --conninfo "$CONNINFO" --mode one --object-bytes "$OBJECT_BYTES" \
  --rate 0 --count "$ROWS" --writers 2 >"$DIR/writer.out"
want=$((before + ROWS))
for ((i = 0; i < BENCH_TIMEOUT * 20; i++)); do
  [[ "$(metric walwatch_event_log_events)" -ge "$want" ]] && break
  sleep 0.05
done
t1=$(now_s)
events=$(metric walwatch_event_log_events)
log_bytes=$(metric walwatch_event_log_bytes)
wal_bytes=$(psql -X -qAt -c "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'bench_replay'")
[[ "$events" -ge "$want" ]] || bench_die "the log holds $events events, expected $want"
live_rps=$(awk -v n="$ROWS" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
bench_say "window: $events events, $log_bytes bytes in the log, $wal_bytes bytes of WAL held by the slot; written and streamed at $live_rps rows/s"

: >"$DIR/restarts.txt"
for ((rep = 1; rep <= REPS; rep++)); do
  stop_walwatch TERM
  t_start=$(now_s)
  start_walwatch bench_replay "${FLAGS[@]}"  # returns at /readyz 200
  t_ready=$(now_s)
  n=0
  for ((i = 0; i < BENCH_TIMEOUT * 20; i++)); do
    n=$(metric walwatch_event_log_events)
    [[ -n "$n" && "$n" -ge "$events" ]] && break
    sleep 0.05
  done
  t_full=$(now_s)
  [[ "$n" -ge "$events" ]] || bench_die "after the restart the log holds $n events, expected $events"
  line=$(awk -v s="$t_start" -v r="$t_ready" -v f="$t_full" -v n="$events" \
    'BEGIN { printf "%.2f %.2f %.0f", r - s, f - s, n / (f - s) }')
  echo "$line" >>"$DIR/restarts.txt"
  bench_say "restart $rep: ready after, full after (s), events/s: $line"
done
stop_walwatch

report() {
  echo
  echo "Replay (\`tests/bench/replay_bench.sh\`): a window of $events events ($ROWS one-row UPDATEs of ~$OBJECT_BYTES-byte objects; $log_bytes bytes in the event log, $wal_bytes bytes of WAL held by the slot), walwatch restarted with SIGTERM; median of $REPS restarts (all: $(awk '{ printf "%s%s", sep, $2; sep = ", " }' "$DIR/restarts.txt") s):"
  echo
  echo "| /readyz 200 after | window rebuilt after | rebuild rate | live rate (writer + stream, before the restart) |"
  echo "|---|---|---|---|"
  printf '| %s s | %s s | %s events/s | %s rows/s |\n' \
    "$(awk '{ print $1 }' "$DIR/restarts.txt" | median)" \
    "$(awk '{ print $2 }' "$DIR/restarts.txt" | median)" \
    "$(awk '{ print $3 }' "$DIR/restarts.txt" | median)" "$live_rps"
}

report | tee "$DIR/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$DIR/report.md" "$BENCH_REPORT"
[[ -z "${BENCH_OUT:-}" ]] || sed "s/^/events=$events /" "$DIR/restarts.txt" >"$BENCH_OUT"
