#!/usr/bin/env bash
# Memory: what an idle watcher costs walwatch, and what the event log costs
# per byte of events it retains.
#
#   tests/bench/memory_bench.sh
#
# Idle watchers: for N in BENCH_MEMORY_WATCHERS, a fresh walwatch (nothing
# written since its start), its RSS (VmRSS) with no watcher, then with N
# watches of /apis/apps/v1/deployments open and idle (fanout_client, one
# process) after BENCH_MEMORY_SETTLE seconds: (RSS_N - RSS_0) / N. The
# kernel's socket buffers are not in walwatch's RSS and not counted. Median of
# BENCH_MEMORY_REPS runs.
#
# Event log: a fresh walwatch (--max-log-bytes 4Gi, so nothing is evicted)
# and one watcher; bench_writer writes BENCH_MEMORY_ROWS UPDATEs, the watcher
# receives them all, then RSS1 and the log's bytes (walwatch_event_log_bytes)
# are read; again BENCH_MEMORY_ROWS, then RSS2. The second batch's event
# lines as the watcher received them are the wire bytes W (without chunk
# framing). RSS per wire byte = (RSS2 - RSS1) / W: the fixed costs (buffers,
# the first batch's allocator growth) cancel out. Also reported: the log's
# own accounting (Event::MemoryBytes) per wire byte. For each object size in
# BENCH_MEMORY_OBJECT_BYTES.
#
# Targets: an idle watcher costs at most 16 KB; the event log uses at most
# 1.1x its wire bytes.
#
# Environment: BENCH_MEMORY_WATCHERS ("1000 5000"), BENCH_MEMORY_REPS (3),
# BENCH_MEMORY_SETTLE (2), BENCH_MEMORY_ROWS (40000),
# BENCH_MEMORY_OBJECT_BYTES ("1024 3072 4096"), BENCH_REPORT (also write the
# Markdown section there), BENCH_OUT (the figures: "idle N RSS0 RSS1
# KIB_PER_WATCHER FDS" and "log BYTES EVENTS LINE RSS/WIRE LOG/WIRE
# OVERHEAD" lines), plus bench_lib.sh's.
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

WATCHER_COUNTS=${BENCH_MEMORY_WATCHERS:-"1000 5000"}
REPS=${BENCH_MEMORY_REPS:-3}
SETTLE=${BENCH_MEMORY_SETTLE:-2}
ROWS=${BENCH_MEMORY_ROWS:-40000}
OBJECT_SIZES=${BENCH_MEMORY_OBJECT_BYTES:-"1024 3072 4096"}

bench_init memory
"$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode one >/dev/null
IDLE=$DIR/idle.txt LOG=$DIR/log.txt
: >"$IDLE"
: >"$LOG"

# --- idle watchers ------------------------------------------------------------
for n in $WATCHER_COUNTS; do
  for ((rep = 1; rep <= REPS; rep++)); do
    start_walwatch "bench_mem_idle_${n}_$rep"
    sleep "$SETTLE"
    rss0=$(rss_kb "$WALWATCH_PID")
    rv=$(fresh_rv)
    rm -f "$DIR/ready"
    "$FANOUT_CLIENT" --socket "$SOCK" --watchers "$n" \
      --path "/apis/apps/v1/deployments?watch=1&resourceVersion=$rv" \
      --ready-file "$DIR/ready" --duration $((SETTLE * 2 + 5)) >"$DIR/idle.client" 2>&1 &
    CLIENT_PID=$!
    wait_for_file "$DIR/ready" "$CLIENT_PID" || { cat "$DIR/idle.client" >&2; bench_die "idle watchers did not start"; }
    sleep "$SETTLE"
    rss1=$(rss_kb "$WALWATCH_PID")
    fds=$(fd_count "$WALWATCH_PID")
    kill -TERM "$CLIENT_PID" 2>/dev/null || true
    wait "$CLIENT_PID" || true
    CLIENT_PID=""
    stop_walwatch
    per=$(awk -v a="$rss0" -v b="$rss1" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n }')
    echo "$n $rss0 $rss1 $per $fds" >>"$IDLE"
    bench_say "idle watchers: $n: RSS $rss0 -> $rss1 KiB, $per KiB each ($fds fds)"
  done
done

# --- event log ----------------------------------------------------------------
# One batch of ROWS writes received by one watcher; prints its event bytes.
log_batch() {
  local size=$1 rv
  rv=$(fresh_rv)
  rm -f "$DIR/ready" "$DIR/done"
  "$FANOUT_CLIENT" --socket "$SOCK" --watchers 1 --check-seq \
    --path "/apis/apps/v1/deployments?watch=1&resourceVersion=$rv" \
    --ready-file "$DIR/ready" --done-file "$DIR/done" >"$DIR/log.client" 2>&1 &
  CLIENT_PID=$!
  wait_for_file "$DIR/ready" "$CLIENT_PID" || bench_die "the log watcher did not start"
  "$BENCH_WRITER" --conninfo "$CONNINFO" --mode one --object-bytes "$size" \
    --rate 0 --count "$ROWS" --writers 2 --out "$DIR/done" >/dev/null
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  [[ "$(kv "$DIR/log.client" short_at_end)" == 0 && "$(kv "$DIR/log.client" lost)" == 0 ]] ||
    bench_die "the log watcher missed events: $(tr '\n' ' ' <"$DIR/log.client")"
  kv "$DIR/log.client" event_bytes
}

for size in $OBJECT_SIZES; do
  "$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode one --object-bytes "$size" >/dev/null
  start_walwatch "bench_mem_log_$size" --max-log-bytes 4Gi --max-watcher-backlog 4Gi
  log_batch "$size" >/dev/null
  sleep 1
  rss1=$(rss_kb "$WALWATCH_PID") log1=$(metric walwatch_event_log_bytes) ev1=$(metric walwatch_event_log_events)
  wire=$(log_batch "$size")
  sleep 1
  rss2=$(rss_kb "$WALWATCH_PID") log2=$(metric walwatch_event_log_bytes) ev2=$(metric walwatch_event_log_events)
  stop_walwatch
  line=$(awk -v r1="$rss1" -v r2="$rss2" -v l1="$log1" -v l2="$log2" -v e1="$ev1" -v e2="$ev2" -v w="$wire" -v s="$size" \
    'BEGIN { printf "%s %d %.0f %.3f %.3f %.0f", s, e2 - e1, w / (e2 - e1), (r2 - r1) * 1024 / w, (l2 - l1) / w, (r2 - r1) * 1024 / (e2 - e1) - w / (e2 - e1) }')
  echo "$line" >>"$LOG"
  bench_say "event log, $size-byte objects: events, line bytes, RSS/wire, log/wire, overhead per event: $line"
done

# --- the report ---------------------------------------------------------------
report() {
  echo
  echo "Memory (\`tests/bench/memory_bench.sh\`; RSS = VmRSS of walwatch; median of $REPS runs):"
  echo
  echo "| idle watchers N | RSS with none, KiB | RSS with N, KiB | per watcher, KiB | per watcher, KB (10^3) | target ≤ 16 KB |"
  echo "|---|---|---|---|---|---|"
  local n
  for n in $WATCHER_COUNTS; do
    local r0 r1 per
    r0=$(awk -v n="$n" '$1 == n { print $2 }' "$IDLE" | median)
    r1=$(awk -v n="$n" '$1 == n { print $3 }' "$IDLE" | median)
    per=$(awk -v n="$n" '$1 == n { print $4 }' "$IDLE" | median)
    awk -v n="$n" -v r0="$r0" -v r1="$r1" -v per="$per" 'BEGIN {
      kb = per * 1.024
      printf "| %d | %.0f | %.0f | %.2f | %.1f | %s |\n", n, r0, r1, per, kb,
        kb <= 16 ? "met" : sprintf("missed by %.0f%%", 100 * (kb - 16) / 16) }'
  done
  echo
  echo "Event log: $ROWS one-row UPDATEs after $ROWS more (the fixed costs cancel out); wire = the event lines the watcher received:"
  echo
  echo "| object JSON bytes | events | event line bytes | RSS growth / wire bytes | log accounting / wire bytes | RSS beyond the wire, per event | target ≤ 1.1 |"
  echo "|---|---|---|---|---|---|---|"
  awk '{ printf "| %d | %d | %d | %.3f | %.3f | %d B | %s |\n", $1, $2, $3, $4, $5, $6,
         $4 <= 1.1 ? "met" : sprintf("missed by %.0f%%", 100 * ($4 - 1.1) / 1.1) }' "$LOG"
}

report | tee "$DIR/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$DIR/report.md" "$BENCH_REPORT"
if [[ -n "${BENCH_OUT:-}" ]]; then
  { sed 's/^/idle /' "$IDLE"; sed 's/^/log /' "$LOG"; } >"$BENCH_OUT"
fi
