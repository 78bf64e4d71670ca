#!/usr/bin/env bash
# walwatch beside Debezium, the CDC engine users would otherwise pick (issue
# 40, item 3): both read the same PostgreSQL slot type through the same
# publication, and are compared like for like.
#
#   tests/bench/debezium_bench.sh
#
# Debezium: its embedded engine (io.debezium:debezium-embedded 3.6, the async
# engine) with its PostgreSQL connector, plugin.name=pgoutput,
# snapshot.mode=no_data (3.x's name for `never`), offsets in memory, on a slot
# and a publication made before the load; its consumer counts the change
# events of `resources` (tests/bench/debezium/, a Maven project this script
# builds into tests/bench/debezium/target/ when it is missing or older than
# its sources). walwatch: --plugin pgoutput on the same publication, and its
# default wal2json, each to one watcher.
#
# One throwaway PostgreSQL 15 (bench_lib.sh; autovacuum off, so that its CPU
# is the readers'), Clusterpedia's table, and the publication `ww_bench`
# (schema/publication.sql), used by both.
#
# (a) Backlog drain. The backlog of drain_bench.sh: BENCH_DEBEZIUM_ROWS
#     Kubernetes-like Pods of ~3.5 KB jsonb, one row per transaction, made by
#     drain_bench.sh's own SQL (bench_pod, bench_load; read from that file so
#     that the two cannot drift). A fresh slot per contender and repetition,
#     all created before the load. Per repetition, each contender drains the
#     whole backlog once, the contenders' order rotating from one repetition
#     to the next:
#       dbz          Debezium, the consumer gets Kafka Connect SourceRecords
#                    (nothing serialized: Debezium's cheapest output), its
#                    defaults otherwise
#       dbz_pollN    the same with poll.interval.ms=N: the connector's
#                    streaming thread sleeps that long (500 ms by default)
#                    whenever the walsender has had nothing for it 5 reads
#                    in a row, and a batch waits up to that long to fill
#       dbz_json     Debezium, each event serialized to JSON by the engine
#                    (JsonConverter with schemas, what Debezium Server and
#                    Kafka consumers get; walwatch's watchers get JSON too)
#       ww_pgoutput  walwatch --plugin pgoutput --publication ww_bench, one
#                    watcher (watch_count, as drain_bench.sh)
#       ww_wal2json  walwatch (wal2json), one watcher
#     Timed from the process's start (the JVM's, walwatch's) to the last
#     event; also from the first event to the last. CPU: the consumer's
#     process (the JVM: its own count, all threads, at the last event;
#     walwatch: /proc, at the watcher's last event), in s per 1,000 rows; the
#     JVM's also from its first event on (without its start: class loading,
#     connecting, the first JIT); the watcher's apart; all of PostgreSQL's
#     over the drain (pg_cpu_ticks: the walsender decoding, and the
#     consumers' other connections).
# (b) Commit -> consumer latency at a steady rate. bench_writer --mode one
#     (100 Deployments of ~BENCH_DEBEZIUM_OBJECT_BYTES, one-row UPDATE
#     commits at BENCH_DEBEZIUM_RATE over 2 connections, each object stamped
#     with the writer's clock), first BENCH_DEBEZIUM_WARMUP_SECONDS of
#     warm-up, then BENCH_DEBEZIUM_SECONDS measured, against a consumer
#     started fresh (a new JVM, a new walwatch) on a fresh slot:
#       dbz_default  Debezium, Connect records, its defaults: the connector
#                    hands over a batch when it has max.batch.size (2048)
#                    events or poll.interval.ms (500) has passed
#       dbz_pollN    the same with poll.interval.ms=N, for each N of
#                    BENCH_DEBEZIUM_POLL_MS: Debezium tuned for latency (its
#                    poll loop then wakes every N ms, busy or not)
#       ww_pgoutput  walwatch --plugin pgoutput, one watcher (fanout_client
#                    --check-seq, as fanout_bench.sh)
#     Latency is the same for both: the writer's clock just before the
#     UPDATE (the stamp in the object) to the consumer's clock when it has
#     the event (Debezium: its consumer callback, in the JVM; walwatch: the
#     watcher's read, in another process, over walwatch's Unix socket).
#     Reported apart for the warm-up and the measured part (the JVM's JIT
#     warms up in the first; walwatch starts warm). CPU over the measured
#     part: the consumer's process and the walsender, in µs per commit.
# Medians of the repetitions, with the spread (min - max).
#
# Environment:
#   BENCH_DEBEZIUM_ROWS (BENCH_ROWS, else 40000)  rows in the backlog
#   BENCH_DEBEZIUM_REPS (3)          repetitions of each drain and latency run
#   BENCH_DEBEZIUM_DRAIN ("dbz dbz_poll10 dbz_json ww_pgoutput ww_wal2json")
#                                    the drain's contenders (empty: no drain)
#   BENCH_DEBEZIUM_LATENCY ("dbz_default dbz_poll ww_pgoutput")  the latency
#                                    case's (empty: none); dbz_poll stands
#                                    for dbz_pollN for each N of
#   BENCH_DEBEZIUM_POLL_MS ("1 10")  poll.interval.ms values, words
#   BENCH_DEBEZIUM_RATE (500)        commits/s of the latency case
#   BENCH_DEBEZIUM_SECONDS (20)      its measured seconds
#   BENCH_DEBEZIUM_WARMUP_SECONDS (5)  its warm-up seconds before them
#   BENCH_DEBEZIUM_OBJECT_BYTES (1024)  its objects' size
#   BENCH_DEBEZIUM_JAVA_OPTS         JVM flags (words; default none: the
#                                    JVM's own choice, G1 on this machine)
#   BENCH_DEBEZIUM_PROPS             more Debezium properties for every
#                                    Debezium run (key=value words)
#   BENCH_WALWATCH_FLAGS             extra walwatch flags (words)
#   JAVA_HOME / MVN                  the JDK (17+) and Maven; without java or
#                                    Maven the part says so and is skipped
#   BENCH_REPORT (also write the Markdown section to this file),
#   BENCH_OUT (also write the per-run key=value lines to this file: "drain.C
#   REP ...", "latency.C REP ..." and one "meta 0 rows=... debezium=VERSION
#   ..."; or "missing WHY" when skipped), plus bench_lib.sh's (WALWATCH_BIN,
#   BENCH_KEEP, BENCH_TIMEOUT).
# Needs: PostgreSQL 15 + wal2json, the bench targets (walwatch, watch_count,
# bench_writer, fanout_client), a JDK 17 and Maven (Maven Central reachable
# the first time, for Debezium's jars).
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
BENCH_NAME=debezium_bench
HERE=$(cd "$(dirname "$0")" && pwd)

ROWS=${BENCH_DEBEZIUM_ROWS:-${BENCH_ROWS:-40000}}
REPS=${BENCH_DEBEZIUM_REPS:-3}
DRAIN_CASES=${BENCH_DEBEZIUM_DRAIN-"dbz dbz_poll10 dbz_json ww_pgoutput ww_wal2json"}
POLL_MS=${BENCH_DEBEZIUM_POLL_MS:-"1 10"}
LATENCY_CASES="" latency_asked=${BENCH_DEBEZIUM_LATENCY-"dbz_default dbz_poll ww_pgoutput"}
for c in $latency_asked; do
  if [[ "$c" == dbz_poll ]]; then
    for ms in $POLL_MS; do LATENCY_CASES+=" dbz_poll$ms"; done
  else
    LATENCY_CASES+=" $c"
  fi
done
LATENCY_CASES=${LATENCY_CASES# }
RATE=${BENCH_DEBEZIUM_RATE:-500}
SECONDS_MEASURED=${BENCH_DEBEZIUM_SECONDS:-20}
WARMUP_SECONDS=${BENCH_DEBEZIUM_WARMUP_SECONDS:-5}
OBJECT_BYTES=${BENCH_DEBEZIUM_OBJECT_BYTES:-1024}
WRITERS=2
PUB=ww_bench
read -r -a JAVA_OPTS <<<"${BENCH_DEBEZIUM_JAVA_OPTS:-}"
read -r -a DBZ_PROPS <<<"${BENCH_DEBEZIUM_PROPS:-}"
read -r -a EXTRA_FLAGS <<<"${BENCH_WALWATCH_FLAGS:-}"

[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || bench_die "BENCH_DEBEZIUM_ROWS must be a positive integer"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || bench_die "BENCH_DEBEZIUM_REPS must be a positive integer"
for ms in $POLL_MS; do
  [[ "$ms" =~ ^[1-9][0-9]*$ ]] || bench_die "BENCH_DEBEZIUM_POLL_MS: positive integers"
done
for c in $DRAIN_CASES; do
  [[ "$c" =~ ^(dbz|dbz_json|dbz_poll[1-9][0-9]*|ww_pgoutput|ww_wal2json)$ ]] || bench_die "BENCH_DEBEZIUM_DRAIN: unknown $c"
done
for c in $LATENCY_CASES; do
  [[ "$c" =~ ^(dbz_default|dbz_poll[0-9]+|ww_pgoutput)$ ]] || bench_die "BENCH_DEBEZIUM_LATENCY: unknown $c"
done
W_COUNT=$((RATE * WARMUP_SECONDS))
M_COUNT=$((RATE * SECONDS_MEASURED))
((W_COUNT > 0 && M_COUNT > 0)) || bench_die "BENCH_DEBEZIUM_RATE, _SECONDS and _WARMUP_SECONDS must be positive"

# --- Debezium's side: the JDK, Maven, the consumer's build ---------------------

JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
MVN=${MVN:-mvn}
DBZ_DIR=$HERE/debezium
skip() {
  echo "debezium_bench: $*; Debezium is not measured" >&2
  [[ -z "${BENCH_OUT:-}" ]] || echo "missing $*" >"$BENCH_OUT"
  # shellcheck disable=SC2016  # Markdown backquotes
  [[ -z "${BENCH_REPORT:-}" ]] || printf '\nDebezium beside walwatch (`tests/bench/debezium_bench.sh`): not measured: %s.\n' "$*" >"$BENCH_REPORT"
  exit 0
}
command -v "$JAVA" >/dev/null || skip "no java (a JDK 17 or later: apt-get install openjdk-17-jdk-headless)"
command -v "$MVN" >/dev/null || skip "no Maven (apt-get install maven)"
# Build when the classes or the copied jars are missing, or older than the
# pom or a source.
stamp=$DBZ_DIR/target/classes/io/walwatch/bench/DebeziumBench.class
if [[ ! -e "$stamp" || ! -d "$DBZ_DIR/target/lib" ]] ||
  [[ -n "$(find "$DBZ_DIR/pom.xml" "$DBZ_DIR/src" -newer "$stamp" -print -quit)" ]]; then
  bench_say "building tests/bench/debezium (Maven) ..."
  rm -rf "$DBZ_DIR/target/lib"
  "$MVN" -B -q -f "$DBZ_DIR/pom.xml" -DskipTests package >&2 ||
    skip "the Debezium consumer did not build (mvn package in tests/bench/debezium)"
fi
DBZ_CMD=("$JAVA" "${JAVA_OPTS[@]}" -cp "$DBZ_DIR/target/classes:$DBZ_DIR/target/lib/*" io.walwatch.bench.DebeziumBench)
DBZ_VERSION=$(find "$DBZ_DIR/target/lib" -name 'debezium-embedded-*.jar' -printf '%f\n' | sed 's/^debezium-embedded-//; s/\.jar$//')
JAVA_VERSION=$("$JAVA" -version 2>&1 | awk -F'"' '/version/ { print $2; exit }')

# Autovacuum off: PostgreSQL's CPU over a drain is then the readers' alone.
export WALWATCH_PG_SETTINGS="${WALWATCH_PG_SETTINGS:-} autovacuum=off"
bench_init debezium_bench
WATCH_COUNT_BIN=${WATCH_COUNT_BIN:-$(dirname "$WALWATCH_BIN")/watch_count}
[[ -x "$WATCH_COUNT_BIN" ]] || bench_die "no watch_count next to $WALWATCH_BIN; build the bench targets first"
psql_v() { psql -X -qAt -v ON_ERROR_STOP=1 "$@"; }
psql -X -q -v ON_ERROR_STOP=1 -v publication="$PUB" -f "$ROOT/schema/publication.sql" >/dev/null

now_ns() { date +%s%N; }
DBZ_PID=""
# The JVM is not bench_lib's to stop: stop it on the way out, then clean up.
# shellcheck disable=SC2317  # called from the EXIT trap
dbz_cleanup() {
  local rc=$?
  [[ -z "$DBZ_PID" ]] || { kill -KILL "$DBZ_PID" 2>/dev/null; wait "$DBZ_PID" 2>/dev/null; }
  DBZ_PID=""
  (exit "$rc")  # bench_cleanup exits with the status it finds
  bench_cleanup
}
trap dbz_cleanup EXIT

slot() { psql_v -c "SELECT pg_create_logical_replication_slot('$1', '$2')" >/dev/null; }
# Drops a slot once no one streams from it (its walsender may take a moment
# to go after its client).
drop_slot() {
  local i
  for ((i = 0; i < 100; i++)); do
    psql_v -c "SELECT pg_drop_replication_slot('$1') FROM pg_replication_slots
               WHERE slot_name = '$1' AND NOT active" >/dev/null 2>&1 &&
      [[ -z "$(psql_v -c "SELECT 1 FROM pg_replication_slots WHERE slot_name = '$1'")" ]] && return 0
    sleep 0.1
  done
  bench_say "slot $1 is still in use; left in place"
}
slot_floor() {
  psql_v -c "SELECT (confirmed_flush_lsn - '0/0'::pg_lsn)::numeric - 1 FROM pg_replication_slots WHERE slot_name = '$1'"
}
# The contenders of a list, rotated left by N (each repetition its own order).
rotate() {
  local n=$1
  shift
  local -a a=("$@")
  local k=${#a[@]} i
  for ((i = 0; i < k; i++)); do printf '%s ' "${a[(i + n) % k]}"; done
}
# A Debezium run: the JVM in the background, DBZ_PID; its key=value lines
# go to OUT once it has COUNT events.
start_dbz() {  # SLOT OUT ERR COUNT [FLAGS...]
  local slot=$1 out=$2 err=$3 count=$4
  shift 4
  local -a props=()
  local p
  for p in "${DBZ_PROPS[@]}"; do props+=(--prop "$p"); done
  "${DBZ_CMD[@]}" --host 127.0.0.1 --port "$PGPORT" --user postgres --dbname postgres \
    --slot "$slot" --publication "$PUB" --count "$count" --timeout "$BENCH_TIMEOUT" \
    --out "$out" --hold "${props[@]}" "$@" >/dev/null 2>"$err" &
  DBZ_PID=$!
}
# Ends the JVM (started with --hold: it streams on after its last event until
# SIGTERM, so that the walsender's CPU can be read first); dies with its log
# if it failed.
stop_dbz() {  # ERR WHAT
  local rc=0
  kill -TERM "$DBZ_PID" 2>/dev/null || true
  wait "$DBZ_PID" || rc=$?
  DBZ_PID=""
  ((rc == 0 || rc == 143)) || { tail -n 30 "$1" >&2; bench_die "Debezium failed ($2)"; }
}

RESULTS=$DIR/results.txt
: >"$RESULTS"
record() {  # NAME REP LINE
  echo "$1 $2 $3" >>"$RESULTS"
  bench_say "$1 run $2: $3"
}

# --- (a) the backlog drain -------------------------------------------------------

# drain_bench.sh's bench_pod() and bench_load(): its one quoted SQL here-doc.
load_drain_sql() {
  local sql
  sql=$(sed -n "/^psql_q <<'SQL'\$/,/^SQL\$/p" "$HERE/drain_bench.sh" | sed '1d;$d')
  [[ "$sql" == *"CREATE FUNCTION bench_pod"* && "$sql" == *"CREATE PROCEDURE bench_load"* ]] ||
    bench_die "did not find bench_pod and bench_load in drain_bench.sh"
  psql -X -q -v ON_ERROR_STOP=1 <<<"$sql"
}

drain_slot_of() {  # CONTENDER REP
  echo "bench_${1}_$2"
}

# One Debezium drain of the backlog; records its line.
drain_dbz() {  # CONTENDER REP FORMAT [FLAGS...]
  local c=$1 r=$2 format=$3 slot out err t0 pg0 pg1
  shift 3
  slot=$(drain_slot_of "$c" "$r") out=$DIR/drain.$c.$r.out err=$DIR/drain.$c.$r.err
  pg0=$(pg_cpu_ticks) t0=$(now_ns)
  start_dbz "$slot" "$out" "$err" "$ROWS" --format "$format" "$@"
  # PostgreSQL's CPU at the last event: the file appears then.
  wait_for_file "$out" "$DBZ_PID" || { tail -n 30 "$err" >&2; bench_die "Debezium failed ($c, repetition $r)"; }
  pg1=$(pg_cpu_ticks)
  stop_dbz "$err" "$c, repetition $r"
  [[ "$(kv "$out" events)" == "$ROWS" ]] || bench_die "$c got $(kv "$out" events) events, expected $ROWS"
  record "drain.$c" "$r" "$(awk -v n="$ROWS" -v t0="$t0" -v first="$(kv "$out" first_event_ns)" \
    -v half="$(kv "$out" half_event_ns)" -v last="$(kv "$out" last_event_ns)" \
    -v c0="$(kv "$out" cpu_first_ns)" -v ch="$(kv "$out" cpu_half_ns)" -v c1="$(kv "$out" cpu_last_ns)" \
    -v pg=$((pg1 - pg0)) -v hz="$CLK_TCK" -v gc="$(kv "$out" gc_ms)" -v jit="$(kv "$out" jit_ms)" \
    'BEGIN {
      # The second half: none when its events came in the same batch as the
      # last (a small backlog).
      h = int((n + 1) / 2); hr = "-"; hc = "-"
      if (last > half) { hr = sprintf("%.0f", (n - h) / ((last - half) / 1e9)); hc = sprintf("%.4f", (c1 - ch) / 1e9 / ((n - h) / 1000)) }
      printf "rows_per_s=%.0f stream_rows_per_s=%.0f second_half_rows_per_s=%s startup_s=%.2f cpu_s=%.2f cpu_s_per_1k=%.4f stream_cpu_s_per_1k=%.4f second_half_cpu_s_per_1k=%s pg_cpu_s=%.2f pg_cpu_s_per_1k=%.4f watcher_cpu_s=- gc_ms=%d jit_ms=%d",
      n / ((last - t0) / 1e9), (n - 1) / ((last - first) / 1e9), hr,
      (first - t0) / 1e9, c1 / 1e9, c1 / 1e9 / (n / 1000), (c1 - c0) / 1e9 / ((n - 1) / 1000),
      hc, pg / hz, pg / hz / (n / 1000), gc, jit }')"
  drop_slot "$slot"
}

# One walwatch drain (to one watcher, watch_count); records its line.
drain_ww() {  # CONTENDER REP
  local c=$1 r=$2 slot sock floor t0 pg0 pg1 ww1 i out count tfirst tlast wtime
  slot=$(drain_slot_of "$c" "$r") sock=$DIR/drain.$c.$r.sock
  local -a plugin=()
  [[ "$c" != ww_pgoutput ]] || plugin=(--plugin pgoutput --publication "$PUB")
  floor=$(slot_floor "$slot")
  pg0=$(pg_cpu_ticks) t0=$(now_ns)
  "$WALWATCH_BIN" --conninfo "$CONNINFO" --slot "$slot" "${plugin[@]}" --socket "$sock" \
    --metrics-address= --max-log-bytes 8Gi --max-watcher-backlog 8Gi --log-level warn \
    "${EXTRA_FLAGS[@]}" >"$DIR/drain.$c.$r.log" 2>&1 &
  WALWATCH_PID=$!
  for ((i = 0; i < BENCH_TIMEOUT * 100; i++)); do
    [[ -S "$sock" ]] && break
    kill -0 "$WALWATCH_PID" 2>/dev/null || { cat "$DIR/drain.$c.$r.log" >&2; bench_die "walwatch exited ($c)"; }
    sleep 0.01
  done
  [[ -S "$sock" ]] || bench_die "walwatch did not create its socket ($c)"
  # The watcher's own CPU (user and system), from bash's `time`.
  local TIMEFORMAT='%3U %3S'
  if ! { time "$WATCH_COUNT_BIN" --socket "$sock" --count "$ROWS" --timeout "$BENCH_TIMEOUT" \
    --path "/api/v1/pods?watch=1&resourceVersion=$floor" >"$DIR/drain.$c.$r.out" 2>"$DIR/drain.$c.$r.err"; } 2>"$DIR/drain.$c.$r.time"; then
    tail -n 20 "$DIR/drain.$c.$r.log" "$DIR/drain.$c.$r.err" >&2
    bench_die "the watcher did not get $ROWS ADDED events ($c, repetition $r)"
  fi
  pg1=$(pg_cpu_ticks) ww1=$(cpu_ticks "$WALWATCH_PID")
  stop_walwatch
  read -r count tfirst tlast <"$DIR/drain.$c.$r.out"
  [[ "$count" == "$ROWS" ]] || bench_die "the watcher got $count events, expected $ROWS ($c)"
  wtime=$(awk '{ print $1 + $2 }' "$DIR/drain.$c.$r.time")
  record "drain.$c" "$r" "$(awk -v n="$ROWS" -v t0="$t0" -v first="$tfirst" -v last="$tlast" \
    -v ww="$ww1" -v pg=$((pg1 - pg0)) -v hz="$CLK_TCK" -v wt="$wtime" \
    'BEGIN { printf "rows_per_s=%.0f stream_rows_per_s=%.0f second_half_rows_per_s=- startup_s=%.2f cpu_s=%.2f cpu_s_per_1k=%.4f stream_cpu_s_per_1k=- second_half_cpu_s_per_1k=- pg_cpu_s=%.2f pg_cpu_s_per_1k=%.4f watcher_cpu_s=%.2f gc_ms=- jit_ms=-",
      n / ((last - t0) / 1e9), (n - 1) / ((last - first) / 1e9), (first - t0) / 1e9,
      ww / hz, ww / hz / (n / 1000), pg / hz, pg / hz / (n / 1000), wt }')"
  drop_slot "$slot"
}

if [[ -n "$DRAIN_CASES" ]]; then
  load_drain_sql
  OBJ_BYTES=$(psql_v -c "SELECT avg(length(bench_pod(i)::text))::int FROM generate_series(1, 200) AS i")
  for ((r = 1; r <= REPS; r++)); do
    for c in $DRAIN_CASES; do
      if [[ "$c" == ww_wal2json ]]; then slot "$(drain_slot_of "$c" "$r")" wal2json; else slot "$(drain_slot_of "$c" "$r")" pgoutput; fi
    done
  done
  bench_say "loading $ROWS Pods of ~$OBJ_BYTES bytes of jsonb, one row per transaction ..."
  t0=$(now_ns)
  timeout "$BENCH_TIMEOUT" psql -X -q -v ON_ERROR_STOP=1 -c "CALL bench_load(1, $ROWS, 1)"
  LOAD_RPS=$(awk -v n="$ROWS" -v ns=$(($(now_ns) - t0)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
  WAL_BYTES=$(psql_v -c "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$(drain_slot_of "${DRAIN_CASES%% *}" 1)'")
  # Settle the load's aftermath (hint bits, dirty buffers) before the timing.
  psql -X -q -c "VACUUM (ANALYZE) resources" -c "CHECKPOINT"
  bench_say "loaded at $LOAD_RPS rows/s; a backlog of $WAL_BYTES bytes of WAL"
  read -r -a drain_list <<<"$DRAIN_CASES"
  for ((r = 1; r <= REPS; r++)); do
    for c in $(rotate $((r - 1)) "${drain_list[@]}"); do
      case $c in
        dbz) drain_dbz "$c" "$r" connect ;;
        dbz_json) drain_dbz "$c" "$r" json ;;
        dbz_poll*) drain_dbz "$c" "$r" connect --prop "poll.interval.ms=${c#dbz_poll}" ;;
        ww_*) drain_ww "$c" "$r" ;;
      esac
    done
  done
  psql -X -q -c "TRUNCATE resources"
fi

# --- (b) commit -> consumer latency at a steady rate ----------------------------

# The warm-up and the measured writes (bench_writer --count: exactly so many
# commits, at RATE over WRITERS connections).
write() {  # COUNT OUT
  "$BENCH_WRITER" "${WRITER_DB[@]}" --mode one --object-bytes "$OBJECT_BYTES" \
    --rate "$RATE" --count "$1" --writers "$WRITERS" --out "$2" >/dev/null
}
# Until the slot's walsender streams (the consumer has started replication).
wait_streaming() {  # SLOT PID
  local i
  for ((i = 0; i < BENCH_TIMEOUT * 20; i++)); do
    [[ "$(psql_v -c "SELECT active FROM pg_replication_slots WHERE slot_name = '$1'")" == t ]] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

latency_dbz() {  # CONTENDER REP
  local c=$1 r=$2 slot=bench_lat_${1}_$2 out err ws t0 pg0 ws0 pg1 ws1 t1
  out=$DIR/lat.$c.$r.out err=$DIR/lat.$c.$r.err
  local -a extra=(--latency --warmup "$W_COUNT")
  [[ "$c" == dbz_default ]] || extra+=(--prop "poll.interval.ms=${c#dbz_poll}")
  slot "$slot" pgoutput
  start_dbz "$slot" "$out" "$err" $((W_COUNT + M_COUNT)) "${extra[@]}"
  wait_streaming "$slot" "$DBZ_PID" || { tail -n 30 "$err" >&2; bench_die "Debezium did not start streaming ($c)"; }
  sleep 1  # the connector's start after START_REPLICATION
  ws=$(walsender_pid "$slot")
  write "$W_COUNT" "$DIR/lat.$c.$r.warm"
  sleep 1  # the warm-up's last batch (poll.interval.ms)
  pg0=$(pg_cpu_ticks) ws0=$(cpu_ticks "$ws") t0=$(now_s)
  write "$M_COUNT" "$DIR/lat.$c.$r.writer"
  wait_for_file "$out" "$DBZ_PID" || { tail -n 30 "$err" >&2; bench_die "Debezium failed ($c, repetition $r)"; }
  pg1=$(pg_cpu_ticks) ws1=$(cpu_ticks "$ws") t1=$(now_s)
  stop_dbz "$err" "$c, repetition $r"
  [[ "$(kv "$out" events)" == $((W_COUNT + M_COUNT)) ]] || bench_die "$c got $(kv "$out" events) events"
  # The JVM's CPU over the measured part: its own count at the warm-up's
  # last event and at the last event.
  record "latency.$c" "$r" "$(awk -v p50w="$(kv "$out" latency_warmup_p50_us)" -v p99w="$(kv "$out" latency_warmup_p99_us)" \
    -v p50="$(kv "$out" latency_steady_p50_us)" -v p99="$(kv "$out" latency_steady_p99_us)" -v max="$(kv "$out" latency_steady_max_us)" \
    -v c0="$(kv "$out" cpu_warmup_ns)" -v c1="$(kv "$out" cpu_last_ns)" -v n="$M_COUNT" \
    -v ws=$((ws1 - ws0)) -v pg=$((pg1 - pg0)) -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" \
    -v wrate="$(kv "$DIR/lat.$c.$r.writer" rate)" -v stmt="$(kv "$DIR/lat.$c.$r.writer" statement_p99_us)" \
    'BEGIN { printf "writer_rate=%.0f warmup_p50_ms=%.2f warmup_p99_ms=%.2f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f consumer_us_per_commit=%.1f watcher_us_per_commit=- walsender_us_per_commit=%.1f pg_cpu_pct=%.1f lost=0 stmt_p99_ms=%.2f",
      wrate, p50w / 1e3, p99w / 1e3, p50 / 1e3, p99 / 1e3, max / 1e3, (c1 - c0) / 1e3 / n,
      1e6 * ws / hz / n, 100 * pg / hz / (t1 - t0), stmt / 1e3 }')"
  drop_slot "$slot"
}

# One fanout_client watcher of the Deployments from walwatch's current RV,
# until the writer run that writes WRITER_OUT is done; its key=value lines in
# CLIENT_OUT. Sets CLIENT_PID once the watch is open.
watch_through_write() {  # WRITER_OUT CLIENT_OUT
  local rv
  rv=$(fresh_rv)
  [[ -n "$rv" ]] || bench_die "no fresh resourceVersion from walwatch"
  rm -f "$DIR/lat.ready"
  "$FANOUT_CLIENT" --socket "$SOCK" --watchers 1 --check-seq \
    --path "/apis/apps/v1/deployments?watch=1&resourceVersion=$rv" \
    --ready-file "$DIR/lat.ready" --done-file "$1" --drain-timeout 10 >"$2" 2>"$2.err" &
  CLIENT_PID=$!
  wait_for_file "$DIR/lat.ready" "$CLIENT_PID" || { cat "$2.err" >&2; bench_die "the watcher did not start"; }
}

latency_ww() {  # CONTENDER REP
  local c=$1 r=$2 slot=bench_lat_${1}_$2 ws pg0 ws0 ww0 cl0 t0 pg1 ws1 ww1 cl1 t1
  slot "$slot" pgoutput
  start_walwatch "$slot" --plugin pgoutput --publication "$PUB" "${EXTRA_FLAGS[@]}"
  ws=$(walsender_pid "$slot")
  watch_through_write "$DIR/lat.$c.$r.warm" "$DIR/lat.$c.$r.cwarm"
  write "$W_COUNT" "$DIR/lat.$c.$r.warm"
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  watch_through_write "$DIR/lat.$c.$r.writer" "$DIR/lat.$c.$r.client"
  pg0=$(pg_cpu_ticks) ws0=$(cpu_ticks "$ws") ww0=$(cpu_ticks "$WALWATCH_PID") cl0=$(cpu_ticks "$CLIENT_PID") t0=$(now_s)
  write "$M_COUNT" "$DIR/lat.$c.$r.writer"
  cl1=$(cpu_ticks "$CLIENT_PID")  # before it exits
  wait "$CLIENT_PID" || true
  CLIENT_PID=""
  pg1=$(pg_cpu_ticks) ws1=$(cpu_ticks "$ws") ww1=$(cpu_ticks "$WALWATCH_PID") t1=$(now_s)
  stop_walwatch
  local cw=$DIR/lat.$c.$r.cwarm cm=$DIR/lat.$c.$r.client
  [[ "$(kv "$cm" events)" == "$M_COUNT" ]] || bench_say "walwatch's watcher got $(kv "$cm" events) of $M_COUNT events ($c, repetition $r)"
  record "latency.$c" "$r" "$(awk -v p50w="$(kv "$cw" latency_p50_us)" -v p99w="$(kv "$cw" latency_p99_us)" \
    -v p50="$(kv "$cm" latency_p50_us)" -v p99="$(kv "$cm" latency_p99_us)" -v max="$(kv "$cm" latency_max_us)" \
    -v ww=$((ww1 - ww0)) -v cl=$((cl1 - cl0)) -v n="$M_COUNT" -v ws=$((ws1 - ws0)) -v pg=$((pg1 - pg0)) \
    -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" -v lost=$(($(kv "$cm" lost) + $(kv "$cm" short_at_end) + $(kv "$cw" lost) + 0)) \
    -v wrate="$(kv "$DIR/lat.$c.$r.writer" rate)" -v stmt="$(kv "$DIR/lat.$c.$r.writer" statement_p99_us)" \
    'BEGIN { printf "writer_rate=%.0f warmup_p50_ms=%.2f warmup_p99_ms=%.2f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f consumer_us_per_commit=%.1f watcher_us_per_commit=%.1f walsender_us_per_commit=%.1f pg_cpu_pct=%.1f lost=%d stmt_p99_ms=%.2f",
      wrate, p50w / 1e3, p99w / 1e3, p50 / 1e3, p99 / 1e3, max / 1e3, 1e6 * ww / hz / n, 1e6 * cl / hz / n,
      1e6 * ws / hz / n, 100 * pg / hz / (t1 - t0), lost, stmt / 1e3 }')"
  drop_slot "$slot"
}

if [[ -n "$LATENCY_CASES" ]]; then
  "$BENCH_WRITER" "${WRITER_DB[@]}" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null
  read -r -a latency_list <<<"$LATENCY_CASES"
  for ((r = 1; r <= REPS; r++)); do
    for c in $(rotate $((r - 1)) "${latency_list[@]}"); do
      case $c in
        dbz_*) latency_dbz "$c" "$r" ;;
        ww_*) latency_ww "$c" "$r" ;;
      esac
    done
  done
fi

# --- the report ------------------------------------------------------------------

# Median of KEY over CASE's runs, and "median (min - max)" with FMT.
# (a value of - is not there: skipped).
vals() { awk -v c="$1" -v key="$2" '$1 == c { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key && kv[2] != "-") print kv[2] } }' "$RESULTS"; }
med() { vals "$1" "$2" | median; }
spread() {  # CASE KEY FMT
  local fmt=${3:-%.0f}
  vals "$1" "$2" | sort -g | awk -v f="$fmt" '{ v[NR] = $1 } END {
    if (NR == 0) { print "-"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    if (NR == 1) printf f "\n", m; else printf f " (" f " – " f ")\n", m, v[1], v[NR] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
label() {
  case $1 in
    dbz) echo "Debezium $DBZ_VERSION embedded, Connect records, defaults" ;;
    dbz_json) echo "Debezium $DBZ_VERSION embedded, JSON-serialized events, defaults" ;;
    dbz_default) echo "Debezium $DBZ_VERSION embedded, Connect records, defaults (poll.interval.ms 500)" ;;
    dbz_poll*) echo "Debezium $DBZ_VERSION embedded, Connect records, poll.interval.ms ${1#dbz_poll}" ;;
    ww_pgoutput) echo "walwatch --plugin pgoutput → one watcher" ;;
    ww_wal2json) echo "walwatch (wal2json) → one watcher" ;;
  esac
}
{
  if [[ -n "$DRAIN_CASES" ]]; then
    echo
    echo "Debezium beside walwatch, backlog drain (\`tests/bench/debezium_bench.sh\`): drain_bench.sh's backlog, $ROWS Pods of ~$OBJ_BYTES bytes of jsonb, one row per transaction ($WAL_BYTES bytes of WAL), publication ww_bench for both pgoutput readers; a slot each, made before the load; Debezium $DBZ_VERSION (embedded engine, PostgreSQL connector, pgoutput, snapshot.mode=no_data, offsets in memory, its other settings default) on Java $JAVA_VERSION${JAVA_OPTS[*]:+ (${JAVA_OPTS[*]})}. Median (min – max) of $REPS runs, the order rotating. Rows/s from the process's start (JVM, walwatch) to the last event, from the first event, and over the second half of the events (the JVM's warm-up, its JIT, mostly behind it); CPU in s per 1,000 rows: the consumer's process (the JVM's own count, all threads, JIT and GC included; walwatch's from /proc) over the same three spans, and all of PostgreSQL's over the drain."
    echo
    echo "| consumer | rows/s (start → last event) | rows/s (first → last event) | rows/s (second half) | start → first event, s | consumer CPU s / 1,000 rows | same, after the first event | same, second half | PostgreSQL CPU s / 1,000 rows | watcher CPU s (walwatch's client) |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for c in $DRAIN_CASES; do
      k=drain.$c
      if [[ "$c" == ww_* ]]; then
        jvm_only="| - | - "  # no such points in walwatch's drain
        rest="$(spread "$k" pg_cpu_s_per_1k %.4f) | $(spread "$k" watcher_cpu_s %.2f)"
      else
        jvm_only="| $(spread "$k" stream_cpu_s_per_1k %.4f) | $(spread "$k" second_half_cpu_s_per_1k %.4f) "
        rest="$(spread "$k" pg_cpu_s_per_1k %.4f) | -"
      fi
      half=$(spread "$k" second_half_rows_per_s)
      [[ "$c" != ww_* ]] || half="-"
      echo "| $(label "$c") | $(spread "$k" rows_per_s) | $(spread "$k" stream_rows_per_s) | $half | $(spread "$k" startup_s %.2f) | $(spread "$k" cpu_s_per_1k %.4f) ${jvm_only}| $rest |"
    done
    if [[ " $DRAIN_CASES " == *" dbz "* && " $DRAIN_CASES " == *" ww_pgoutput "* ]]; then
      echo
      echo "walwatch (pgoutput) / Debezium (Connect records): rows/s $(ratio "$(med drain.ww_pgoutput rows_per_s)" "$(med drain.dbz rows_per_s)") × (first → last event $(ratio "$(med drain.ww_pgoutput stream_rows_per_s)" "$(med drain.dbz stream_rows_per_s)") ×); consumer CPU per row: Debezium / walwatch $(ratio "$(med drain.dbz cpu_s_per_1k)" "$(med drain.ww_pgoutput cpu_s_per_1k)") × (after Debezium's first event $(ratio "$(med drain.dbz stream_cpu_s_per_1k)" "$(med drain.ww_pgoutput cpu_s_per_1k)") ×)."
    fi
  fi
  if [[ -n "$LATENCY_CASES" ]]; then
    echo
    echo "Debezium beside walwatch, commit → consumer latency (\`tests/bench/debezium_bench.sh\`): bench_writer UPDATEs of ~$OBJECT_BYTES-byte objects (100 Deployments) at $RATE commits/s from $WRITERS connections, ${WARMUP_SECONDS} s of warm-up then ${SECONDS_MEASURED} s measured, each run with a fresh consumer on a fresh slot; latency = the writer's clock before the UPDATE to Debezium's consumer callback (in the JVM) or walwatch's watcher's read (another process, over the Unix socket). Median (min – max) of $REPS runs, the order rotating. CPU over the measured part, µs per commit: the consumer's process (the JVM; walwatch), walwatch's watcher apart, the slot's walsender; all of PostgreSQL (the writes included) in % of a core."
    echo
    echo "| consumer | warm-up p50 / p99 ms | p50 ms | p99 ms | max ms | consumer CPU µs / commit | watcher CPU µs / commit | walsender CPU µs / commit | PostgreSQL CPU % | lost |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for c in $LATENCY_CASES; do
      k=latency.$c
      echo "| $(label "$c") | $(spread "$k" warmup_p50_ms %.2f | sed 's/ (.*//') / $(spread "$k" warmup_p99_ms %.2f | sed 's/ (.*//') | $(spread "$k" p50_ms %.2f) | $(spread "$k" p99_ms %.2f) | $(spread "$k" max_ms %.1f) | $(spread "$k" consumer_us_per_commit %.1f) | $( [[ "$c" == ww_* ]] && spread "$k" watcher_us_per_commit %.1f || echo "-") | $(spread "$k" walsender_us_per_commit %.1f) | $(spread "$k" pg_cpu_pct %.1f) | $(vals "$k" lost | awk '{ s += $1 } END { print s + 0 }') |"
    done
  fi
} | tee "${BENCH_REPORT:-/dev/null}"
# What the runs were, for the summary: one "meta" line.
echo "meta 0 rows=$ROWS object_bytes=${OBJ_BYTES:-0} reps=$REPS rate=$RATE seconds=$SECONDS_MEASURED warmup_seconds=$WARMUP_SECONDS debezium=$DBZ_VERSION java=$JAVA_VERSION" >>"$RESULTS"
[[ -z "${BENCH_OUT:-}" ]] || cp "$RESULTS" "$BENCH_OUT"
