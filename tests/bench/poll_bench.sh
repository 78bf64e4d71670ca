#!/usr/bin/env bash
# Polling, the peer a Clusterpedia user would otherwise write (kine's 1 s,
# Grafana unified storage's 100 ms), against walwatch, on one workload in one
# run: what a watcher waits for a commit, and what it costs PostgreSQL.
#
#   tests/bench/poll_bench.sh
#
# One throwaway PostgreSQL 15 + wal2json. The table gets what polling needs
# and walwatch does not: a column `poll_rv` that a trigger sets from a
# sequence on every write, and an index on ("group", resource, poll_rv); it
# is there for every case, so the writes cost the same in all. The workload
# is fanout_bench.sh's spread: bench_writer UPDATEs round-robin over 4,000
# objects of 100 resources at BENCH_POLL_RATE commits/s for
# BENCH_POLL_SECONDS. Cases, alternating, BENCH_POLL_REPS runs each:
#   walwatch  1,000 watchers (fanout_client, fanout_bench.sh's spread
#             paths), one replication stream;
#   poll-1000ms, poll-100ms  poll_client: each of the 100 resources polled
#             on its own every interval (Grafana's way), on 4 connections.
# Reported per case (medians): commit -> client p50/p99, queries/s, the CPU
# of the PostgreSQL processes that serve the reader (walwatch's walsender;
# the pollers' backends), and of the whole server (the writes included), in
# % of one core.
#
# Environment: BENCH_POLL_RATE (200), BENCH_POLL_SECONDS (6),
# BENCH_POLL_REPS (2), BENCH_POLL_INTERVALS ("1000 100"), BENCH_OBJECT_BYTES
# (1024), BENCH_REPORT (the Markdown section), BENCH_OUT (key=value lines
# per run), plus bench_lib.sh's.
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

RATE=${BENCH_POLL_RATE:-200}
RUN_SECONDS=${BENCH_POLL_SECONDS:-6}
REPS=${BENCH_POLL_REPS:-2}
INTERVALS=${BENCH_POLL_INTERVALS:-"1000 100"}
OBJECT_BYTES=${BENCH_OBJECT_BYTES:-1024}

bench_init poll
POLL_CLIENT=$(dirname "$BENCH_WRITER")/poll_client
[[ -x "$POLL_CLIENT" ]] || bench_die "no $POLL_CLIENT; build the bench targets first"
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE SEQUENCE resources_poll_rv;
ALTER TABLE resources ADD COLUMN poll_rv bigint;
CREATE FUNCTION resources_set_poll_rv() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.poll_rv := nextval('resources_poll_rv'); RETURN NEW; END $$;
CREATE TRIGGER resources_poll_rv BEFORE INSERT OR UPDATE ON resources
  FOR EACH ROW EXECUTE FUNCTION resources_set_poll_rv();
CREATE INDEX resources_poll_rv_idx ON resources ("group", resource, poll_rv);
SQL
"$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode spread --object-bytes "$OBJECT_BYTES" >/dev/null
start_walwatch bench_poll
SLOT=bench_poll

# fanout_bench.sh's spread paths (1,000 watchers over 100 resources).
SELECTORS=("shard%20in%20(s0%2Cs1)" "shard%3Ds2" "app%3Dbench%2Cshard!%3Ds3")
for ((i = 0; i < 1000; i++)); do
  printf '/apis/bench.walwatch.io/v1/namespaces/ns-%d/widgets%02d?watch=1&resourceVersion=@RV@&labelSelector=%s\n' \
    $(((i / 100) % 10)) $((i % 100)) "${SELECTORS[i % 3]}"
done >"$DIR/spread.paths"

RESULTS=$DIR/results.txt
: >"$RESULTS"

# One run of a case (walwatch, or poll-MS); appends "case rep key=value...".
run_case() {
  local kase=$1 rep=$2 tag="$1.$2" reader_pids pid
  rm -f "$DIR/ready.$tag" "$DIR/done.$tag"
  if [[ "$kase" == walwatch ]]; then
    sed "s/@RV@/$(fresh_rv)/" "$DIR/spread.paths" >"$DIR/paths.$tag"
    "$FANOUT_CLIENT" --socket "$SOCK" --watchers 1000 --paths-file "$DIR/paths.$tag" \
      --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" \
      >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
    CLIENT_PID=$!
    reader_pids=$(walsender_pid "$SLOT")
  else
    "$POLL_CLIENT" --conninfo "$CONNINFO" --mode spread --interval-ms "${kase#poll-}" \
      --ready-file "$DIR/ready.$tag" --done-file "$DIR/done.$tag" \
      >"$DIR/client.$tag" 2>"$DIR/client.$tag.err" &
    CLIENT_PID=$!
  fi
  wait_for_file "$DIR/ready.$tag" "$CLIENT_PID" ||
    { cat "$DIR/client.$tag.err" >&2; bench_die "the $kase client did not start"; }
  local r0=0 p0 t0 r1=0 p1 t1
  # shellcheck disable=SC2086  # pid lists
  r0=$(pids_cpu_ticks $reader_pids) p0=$(pg_cpu_ticks) t0=$(now_s)
  "$BENCH_WRITER" --conninfo "$CONNINFO" --mode spread --object-bytes "$OBJECT_BYTES" \
    --rate "$RATE" --duration "$RUN_SECONDS" --writers 2 --out "$DIR/done.$tag" >"$DIR/writer.$tag"
  # shellcheck disable=SC2086
  r1=$(pids_cpu_ticks $reader_pids) p1=$(pg_cpu_ticks) t1=$(now_s)
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  local c=$DIR/client.$tag queries reader
  queries=$(kv "$c" queries_per_s)
  # The pollers' backends: as poll_client measured them over its own run.
  reader=$(kv "$c" backends_cpu_pct)
  [[ -n "$reader" ]] || reader=$(awk -v r=$((r1 - r0)) -v t0="$t0" -v t1="$t1" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", 100 * r / hz / (t1 - t0) }')
  line=$(awk -v reader="$reader" -v p=$((p1 - p0)) -v t0="$t0" -v t1="$t1" -v hz="$CLK_TCK" \
    -v p50="$(kv "$c" latency_p50_us)" -v p99="$(kv "$c" latency_p99_us)" -v q="${queries:-0}" \
    -v short="$(kv "$c" short_at_end)" -v wrate="$(kv "$DIR/writer.$tag" rate)" \
    'BEGIN { printf "writer_rate=%.0f p50_ms=%.2f p99_ms=%.2f queries_per_s=%.1f reader_cpu=%.1f pg_cpu=%.1f short=%d",
      wrate, p50 / 1e3, p99 / 1e3, q, reader, 100 * p / hz / (t1 - t0), short }')
  echo "$kase $rep $line" >>"$RESULTS"
  bench_say "$kase run $rep: $line"
}

CASES="walwatch"
for ms in $INTERVALS; do CASES+=" poll-$ms"; done
for ((rep = 1; rep <= REPS; rep++)); do
  for kase in $CASES; do run_case "$kase" "$rep"; done
done
stop_walwatch

agg() {
  awk -v k="$1" -v key="$2" '$1 == k { for (i = 3; i <= NF; i++) { split($i, kvp, "="); if (kvp[1] == key) print kvp[2] } }' "$RESULTS" | median
}
{
  echo
  echo "Polling against walwatch (\`tests/bench/poll_bench.sh\`): the spread workload (UPDATEs round-robin over 4,000 objects of 100 resources) at $RATE commits/s for $RUN_SECONDS s; walwatch with 1,000 selective watchers on one replication stream; polling each of the 100 resources every interval on 4 connections (\`SELECT poll_rv, object ... WHERE \"group\" = ? AND resource = ? AND poll_rv > ? ORDER BY poll_rv LIMIT 500\`, a trigger-set column and its index added for it). Medians of $REPS runs, alternating; CPU in % of one core."
  echo
  echo "| reader | p50 ms | p99 ms | queries/s | CPU of PostgreSQL's reader processes (walsender / poll backends) % | CPU of all of PostgreSQL % |"
  echo "|---|---|---|---|---|---|"
  for kase in $CASES; do
    echo "| $kase | $(agg "$kase" p50_ms) | $(agg "$kase" p99_ms) | $(agg "$kase" queries_per_s) | $(agg "$kase" reader_cpu) | $(agg "$kase" pg_cpu) |"
  done
} | tee "${BENCH_REPORT:-/dev/null}"
[[ -z "${BENCH_OUT:-}" ]] || cp "$RESULTS" "$BENCH_OUT"
