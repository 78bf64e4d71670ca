#!/usr/bin/env bash
# Relist storm (issue 40, item 5): N informers of one resource start their
# WatchLists at once, as after an APIServer rollout with client-go v0.35+
# (GET ...?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan
# &allowWatchBookmarks=true), against the same bytes written from memory to
# the same N readers by an ideal server: the machine's limit.
#
#   tests/bench/relist_storm_bench.sh
#
# Steps: a throwaway PostgreSQL 15 (bench_lib.sh) with pg_stat_statements;
# BENCH_STORM_ROWS Pods of ~3.5 KB of jsonb in one resource (pods, core/v1),
# made by drain_bench.sh's bench_pod(), 1,000 rows per transaction, then
# VACUUM ANALYZE; walwatch started on a fresh slot after the load (nothing to
# decode) and settled. One WatchList is read first, to warm the caches and
# to save its response body (chunk framing included, up to the end of the
# chunk holding the end bookmark) to a file. Then, for N in BENCH_STORM_NS,
# BENCH_STORM_REPS times, interleaved:
#   walwatch  N reader processes (storm_ceiling read, tests/bench/
#             storm_ceiling.cc) connect to walwatch, wait on one go file
#             (inotify), send the WatchList and read it, counting event lines
#             without parsing them, until the BOOKMARK annotated
#             "k8s.io/initial-events-end" (watchserver/PROTOCOL.md, "Where a
#             watch starts"). Each is its own process, so its own client to
#             walwatch's per-client share of --state-workers. A 429 or 504
#             (a WatchList that waited 60 s for a state worker) is retried
#             after the wait it asks for, as client-go does, and counted;
#             the wall time includes it.
#   limit     the same N readers against storm_ceiling serve, which writes
#             the saved body from memory to all N sockets at once (--threads
#             BENCH_STORM_CEILING_THREADS, writev; sendfile with
#             BENCH_STORM_CEILING_WRITE=sendfile).
# Measured per storm: wall time from the first request sent to the last
# reader's end bookmark (the readers' clocks); the slowest wait for a 200
# header (walwatch's queue for a state worker and its snapshot); state reads (pg_stat_statements:
# walwatch's DECLARE walwatch_state cursors, and the rows its FETCHes
# returned); CPU of PostgreSQL (all its processes), walwatch, the readers,
# the ideal server and the whole machine; walwatch's peak RSS during the
# storm (VmHWM after resetting it through /proc/PID/clear_refs just before).
# Every reader of every storm must end with as many ADDED events as SQL
# counts rows of the resource (rows do not change during the storms) and at
# an end bookmark; any other outcome stops the benchmark with a message.
# Goal: the storm within 1.5x of the limit (walwatch wall / limit wall).
#
# Environment:
#   BENCH_STORM_ROWS (100000)          Pods in the resource
#   BENCH_STORM_NS ("1 10 50 100")     concurrent WatchLists per storm
#   BENCH_STORM_REPS (1)               storms per N (medians are reported)
#   BENCH_STORM_CEILING_THREADS (2)    the ideal server's writing threads
#   BENCH_STORM_CEILING_WRITE (copy)   copy (writev from memory) or sendfile
#   BENCH_STORM_WALWATCH_FLAGS         extra walwatch flags (words)
#   BENCH_STORM_SETTLE (2)             seconds of quiet before each storm
#   BENCH_PERF_DIR                     record a system-wide CPU profile of
#                                      each storm (perf record -a -g -e
#                                      cpu-clock): walwatch.N.R.data,
#                                      limit.N.R.data
#   BENCH_REPORT   also write the Markdown section to this file
#   BENCH_OUT      the figures: a "setup key=value..." line, then one
#                  "walwatch|limit N REP key=value..." line per storm and one
#                  "storm N key=value..." line of medians per N
#   STORM_CEILING_BIN  default storm_ceiling next to WALWATCH_BIN
# plus bench_lib.sh's (WALWATCH_BIN, BENCH_KEEP, BENCH_TIMEOUT).
# Needs: PostgreSQL 15 with pg_stat_statements (postgresql-contrib).
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

ROWS=${BENCH_STORM_ROWS:-100000}
NS=${BENCH_STORM_NS:-"1 10 50 100"}
REPS=${BENCH_STORM_REPS:-1}
CEILING_THREADS=${BENCH_STORM_CEILING_THREADS:-2}
CEILING_WRITE=${BENCH_STORM_CEILING_WRITE:-copy}
SETTLE=${BENCH_STORM_SETTLE:-2}
GOAL=1.5
WATCHLIST="/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"

[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || bench_die "BENCH_STORM_ROWS must be a positive integer"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || bench_die "BENCH_STORM_REPS must be a positive integer"
for n in $NS; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || bench_die "BENCH_STORM_NS: $n is not a positive integer"; done
case $CEILING_WRITE in
  copy) CEILING_FLAGS=() ;;
  sendfile) CEILING_FLAGS=(--sendfile) ;;
  *) bench_die "BENCH_STORM_CEILING_WRITE must be copy or sendfile" ;;
esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -z "${WALWATCH_BIN:-}" ]]; then
  WALWATCH_BIN=$ROOT/build-bench/walwatch
  [[ -x "$WALWATCH_BIN" ]] || WALWATCH_BIN=$ROOT/build/walwatch
fi
STORM=${STORM_CEILING_BIN:-$(dirname "$WALWATCH_BIN")/storm_ceiling}
[[ -x "$STORM" ]] || bench_die "no $STORM; build the bench targets first (make bench builds them)"
# bench_init checks for the fan-out benchmarks' writer and client; this
# benchmark uses neither.
BENCH_WRITER=${BENCH_WRITER:-$STORM} FANOUT_CLIENT=${FANOUT_CLIENT:-$STORM}
# The state reads are counted by pg_stat_statements.
export WALWATCH_PG_SETTINGS="${WALWATCH_PG_SETTINGS:-} shared_preload_libraries=pg_stat_statements"

bench_init relist_storm
READER_PIDS=() SERVER_PID="" PERF_PID=""
# shellcheck disable=SC2317  # called from the EXIT trap
storm_cleanup() {
  local rc=$? pid
  set +e
  for pid in "${READER_PIDS[@]}" $SERVER_PID $PERF_PID; do
    kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  (exit "$rc")
  bench_cleanup
}
trap storm_cleanup EXIT

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
psql_v() { psql -X -qAt -v ON_ERROR_STOP=1 "$@"; }
psql_q -c "CREATE EXTENSION pg_stat_statements"

# drain_bench.sh's Pod (keep the two alike): a Kubernetes-like Pod of ~3 KB
# of jsonb text for row i, with labels, annotations, ownerReferences,
# managedFields, one container and a status; md5 makes names, uids and
# hashes vary, so TOAST compresses it as it would a real one.
psql_q <<'SQL'
CREATE FUNCTION bench_pod(i int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
SELECT jsonb_build_object(
  'apiVersion', 'v1', 'kind', 'Pod',
  'metadata', jsonb_build_object(
    'name', 'web-' || h || '-' || i,
    'generateName', 'web-' || h || '-',
    'namespace', 'team-' || (i % 7),
    'uid', md5('uid' || i)::uuid::text,
    'resourceVersion', (1000000 + i)::text,
    'creationTimestamp', '2026-12-02T13:21:36Z',
    'labels', jsonb_build_object('app', 'web', 'pod-template-hash', h,
                                 'app.kubernetes.io/part-of', 'shop',
                                 'app.kubernetes.io/version', '1.24.' || (i % 10)),
    'annotations', jsonb_build_object(
      'shadow.clusterpedia.io/cluster-name', 'c1',
      'prometheus.io/scrape', 'true', 'prometheus.io/port', '8080'),
    'ownerReferences', jsonb_build_array(jsonb_build_object(
      'apiVersion', 'apps/v1', 'kind', 'ReplicaSet', 'name', 'web-' || h,
      'uid', md5('rs' || i)::uuid::text, 'controller', true,
      'blockOwnerDeletion', true)),
    'managedFields', jsonb_build_array(
      jsonb_build_object('manager', 'kube-controller-manager',
        'operation', 'Update', 'apiVersion', 'v1',
        'time', '2026-12-02T13:21:36Z', 'fieldsType', 'FieldsV1',
        'fieldsV1', jsonb_build_object(
          'f:metadata', jsonb_build_object(
            'f:generateName', '{}'::jsonb,
            'f:labels', '{".": {}, "f:app": {}, "f:pod-template-hash": {}}'::jsonb,
            'f:ownerReferences', jsonb_build_object(
              '.', '{}'::jsonb,
              'k:{"uid":"' || md5('rs' || i)::uuid::text || '"}', '{}'::jsonb)),
          'f:spec', '{"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:env": {}, "f:image": {}, "f:name": {}, "f:ports": {}, "f:resources": {}}}, "f:dnsPolicy": {}, "f:restartPolicy": {}}'::jsonb)),
      jsonb_build_object('manager', 'kubelet', 'operation', 'Update',
        'apiVersion', 'v1', 'time', '2026-12-02T13:21:40Z',
        'fieldsType', 'FieldsV1', 'subresource', 'status',
        'fieldsV1', '{"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}}'::jsonb))),
  'spec', jsonb_build_object(
    'containers', jsonb_build_array(jsonb_build_object(
      'name', 'web',
      'image', 'registry.example.com/shop/web:1.24.' || (i % 10),
      'ports', '[{"name": "http", "protocol": "TCP", "containerPort": 8080}]'::jsonb,
      'env', jsonb_build_array(
        jsonb_build_object('name', 'POD_SEED', 'value', md5('env' || i)),
        jsonb_build_object('name', 'LOG_LEVEL', 'value', 'info'),
        jsonb_build_object('name', 'UPSTREAM', 'value', 'http://api.team-' || (i % 7) || '.svc:8080')),
      'resources', '{"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}'::jsonb,
      'readinessProbe', '{"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3, "successThreshold": 1}'::jsonb,
      'terminationMessagePath', '/dev/termination-log',
      'terminationMessagePolicy', 'File', 'imagePullPolicy', 'IfNotPresent')),
    'restartPolicy', 'Always', 'terminationGracePeriodSeconds', 30,
    'dnsPolicy', 'ClusterFirst', 'serviceAccountName', 'default',
    'nodeName', 'node-' || (i % 500) || '.example.internal',
    'schedulerName', 'default-scheduler', 'priority', 0,
    'tolerations', '[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "operator": "Exists", "tolerationSeconds": 300}]'::jsonb),
  'status', jsonb_build_object(
    'phase', 'Running',
    'conditions', '[{"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-12-02T13:21:36Z"}, {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-12-02T13:21:40Z"}, {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-12-02T13:21:36Z"}]'::jsonb,
    'hostIP', '192.168.7.' || (i % 250),
    'podIP', '10.244.' || (i % 250) || '.' || ((i / 250) % 250),
    'startTime', '2026-12-02T13:21:36Z',
    'containerStatuses', jsonb_build_array(jsonb_build_object(
      'name', 'web', 'ready', true, 'restartCount', 0, 'started', true,
      'state', jsonb_build_object('running', jsonb_build_object('startedAt', '2026-12-02T13:21:39Z')),
      'image', 'registry.example.com/shop/web:1.24.' || (i % 10),
      'imageID', 'registry.example.com/shop/web@sha256:' || md5('img' || i) || md5('img2' || i),
      'containerID', 'containerd://' || md5('c' || i) || md5('c2' || i))),
    'qosClass', 'Burstable'))
FROM (SELECT substr(md5(i::text), 1, 10) AS h) AS x
$$;
SQL

bench_say "loading $ROWS Pods, 1,000 rows per transaction ..."
t0=$(now_s)
timeout "$BENCH_TIMEOUT" psql -X -q -v ON_ERROR_STOP=1 <<SQL
DO \$\$
BEGIN
  FOR b IN 0..($ROWS - 1) / 1000 LOOP
    INSERT INTO resources ("group", version, resource, kind, cluster,
                           namespace, name, owner_uid, uid, resource_version,
                           object, created_at, synced_at)
    SELECT '', 'v1', 'pods', 'Pod', 'c1', o->'metadata'->>'namespace',
           o->'metadata'->>'name', md5('rs' || i)::uuid::text,
           o->'metadata'->>'uid', o->'metadata'->>'resourceVersion', o,
           now(), now()
    FROM generate_series(b * 1000 + 1, least((b + 1) * 1000, $ROWS)) AS i,
         bench_pod(i) AS o;
    COMMIT;
  END LOOP;
END \$\$;
VACUUM ANALYZE resources;
CHECKPOINT;
SQL
t1=$(now_s)
SQL_COUNT=$(psql_v -c "SELECT count(*) FROM resources WHERE \"group\" = '' AND version = 'v1' AND resource = 'pods'")
[[ "$SQL_COUNT" == "$ROWS" ]] || bench_die "loaded $SQL_COUNT rows, expected $ROWS"
JSONB_BYTES=$(psql_v -c "SELECT sum(pg_column_size(object)) FROM resources")
TEXT_BYTES=$(psql_v -c "SELECT avg(length(object::text))::int FROM resources")
TABLE_BYTES=$(psql_v -c "SELECT pg_total_relation_size('resources')")
bench_say "loaded in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }') s: $SQL_COUNT rows, $((JSONB_BYTES / 1000000)) MB of jsonb (~$TEXT_BYTES bytes of text each), table $((TABLE_BYTES / 1000000)) MB"

# shellcheck disable=SC2086  # words
start_walwatch bench_storm ${BENCH_STORM_WALWATCH_FLAGS:-}
[[ -n "$(fresh_rv)" ]] || bench_die "walwatch gives no fresh RV"
sleep "$SETTLE"

# The state reads walwatch has made so far: "cursors rows" (each state is
# one DECLARE walwatch_state and FETCHes from it).
state_reads() {
  psql_v -F' ' -c "SELECT coalesce(sum(calls) FILTER (WHERE query LIKE 'DECLARE walwatch_state%'), 0),
                          coalesce(sum(rows) FILTER (WHERE query LIKE 'FETCH % FROM walwatch_state'), 0)
                   FROM pg_stat_statements"
}
vm_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
perf_start() {
  [[ -n "${BENCH_PERF_DIR:-}" ]] || return 0
  mkdir -p "$BENCH_PERF_DIR"
  perf record -a -g -e cpu-clock -o "$BENCH_PERF_DIR/$1.data" >"$BENCH_PERF_DIR/$1.log" 2>&1 &
  PERF_PID=$!
  sleep 0.5
}
perf_stop() {
  [[ -n "$PERF_PID" ]] || return 0
  kill -INT "$PERF_PID" 2>/dev/null || true
  wait "$PERF_PID" 2>/dev/null || true
  PERF_PID=""
}

# N readers on socket $2, started and connected; sets READER_PIDS. The
# storm begins when $3/go is created.
start_readers() {
  local n=$1 sock=$2 dir=$3 i
  mkdir -p "$dir"
  READER_PIDS=()
  for ((i = 1; i <= n; i++)); do
    "$STORM" read --socket "$sock" --path "$WATCHLIST" --ready-file "$dir/ready.$i" \
      --go-file "$dir/go" --timeout "$BENCH_TIMEOUT" >"$dir/out.$i" 2>"$dir/err.$i" &
    READER_PIDS+=($!)
  done
  for ((i = 0; i < BENCH_TIMEOUT * 50; i++)); do
    (($(find "$dir" -name 'ready.*' | wc -l) == n)) && return 0
    for pid in "${READER_PIDS[@]}"; do
      kill -0 "$pid" 2>/dev/null || { cat "$dir"/err.* >&2; bench_die "a reader exited before the storm ($dir)"; }
    done
    sleep 0.02
  done
  bench_die "the readers did not connect ($dir)"
}
# Waits for the readers (each must exit 0) and sets READERS to "wall_s
# objects_min objects_max distinct_rvs reader_cpu_s readers_without_SQL_COUNT
# header_max_s retries" (header_max_s: the longest wait for a 200 header, for
# walwatch the queue for a state worker, the snapshot and the handoff;
# retries: 429s and 504s the readers retried).
finish_readers() {
  local dir=$1 i failed=0
  for ((i = 0; i < ${#READER_PIDS[@]}; i++)); do
    wait "${READER_PIDS[i]}" || { failed=1; bench_say "reader $((i + 1)) failed: $(cat "$dir/err.$((i + 1))")"; }
  done
  READER_PIDS=()
  ((failed == 0)) || bench_die "readers failed ($dir); walwatch's log: $(tail -n 5 "$DIR/walwatch.log")"
  READERS=$(cat "$dir"/out.* | awk -v want="$SQL_COUNT" '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      if (v["objects"] != want) bad++
      if (min == "" || v["objects"] < min) min = v["objects"]; if (v["objects"] > max) max = v["objects"]
      if (s0 == "" || v["start_ns"] < s0) s0 = v["start_ns"]; if (v["end_ns"] > e1) e1 = v["end_ns"]
      rvs[v["rv"]] = 1; cpu += v["cpu_s"]
      h = (v["header_ns"] - v["start_ns"]) / 1e9; if (h > hmax) hmax = h; retries += v["retries"] }
    END { n = 0; for (r in rvs) n++
          printf "%.3f %d %d %d %.2f %d %.3f %d\n", (e1 - s0) / 1e9, min, max, n, cpu, bad, hmax, retries }')
}

# The warm-up WatchList, whose body the ideal server will send.
bench_say "one WatchList to warm up and to save its body ..."
mkdir -p "$DIR/capture"
"$STORM" read --socket "$SOCK" --path "$WATCHLIST" --save "$DIR/body" --timeout "$BENCH_TIMEOUT" \
  >"$DIR/capture/out" 2>"$DIR/capture/err" || bench_die "the warm-up WatchList failed: $(cat "$DIR/capture/err")"
BODY_BYTES=$(stat -c %s "$DIR/body")
read -r cap_objects cap_rv <<<"$(sed 's/objects=\([0-9]*\) rv=\([0-9]*\).*/\1 \2/' "$DIR/capture/out")"
[[ "$cap_objects" == "$SQL_COUNT" ]] || bench_die "the warm-up WatchList had $cap_objects objects, SQL counts $SQL_COUNT"
bench_say "body: $BODY_BYTES bytes, $cap_objects objects, end bookmark at RV $cap_rv"

RESULTS=$DIR/results.txt
echo "setup rows=$SQL_COUNT jsonb_bytes=$JSONB_BYTES text_bytes_per_object=$TEXT_BYTES table_bytes=$TABLE_BYTES body_bytes=$BODY_BYTES ceiling_threads=$CEILING_THREADS ceiling_write=$CEILING_WRITE" >"$RESULTS"

# One storm of N WatchLists from walwatch.
storm_walwatch() {
  local n=$1 rep=$2 dir=$DIR/ww.$1.$2
  sleep "$SETTLE"
  start_readers "$n" "$SOCK" "$dir"
  local r0 pg0 ww0 m0 rss0 r1 pg1 ww1 m1 t0 t1 hwm
  r0=$(state_reads) pg0=$(pg_cpu_ticks) ww0=$(cpu_ticks "$WALWATCH_PID")
  rss0=$(vm_kb "$WALWATCH_PID" VmRSS)
  # VmHWM from here on is the storm's peak (5: reset the peak RSS).
  { echo 5 >"/proc/$WALWATCH_PID/clear_refs"; } 2>/dev/null || bench_say "cannot reset walwatch's VmHWM: the peak is since its start"
  perf_start "walwatch.$n.$rep"
  m0=$(machine_busy_ticks) t0=$(now_s)
  touch "$dir/go"
  finish_readers "$dir"
  m1=$(machine_busy_ticks) t1=$(now_s)
  hwm=$(vm_kb "$WALWATCH_PID" VmHWM)
  pg1=$(pg_cpu_ticks) ww1=$(cpu_ticks "$WALWATCH_PID") r1=$(state_reads)
  perf_stop
  local wall omin omax nrv rcpu bad hmax retries
  read -r wall omin omax nrv rcpu bad hmax retries <<<"$READERS"
  ((bad == 0)) || bench_die "walwatch, N=$n: $bad reader(s) did not get $SQL_COUNT objects (min $omin, max $omax)"
  local line
  line=$(awk -v r0="$r0" -v r1="$r1" -v pg=$((pg1 - pg0)) -v ww=$((ww1 - ww0)) -v m=$((m1 - m0)) \
    -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" -v wall="$wall" -v rss0="$rss0" -v hwm="$hwm" \
    -v rcpu="$rcpu" -v o="$omin" -v nrv="$nrv" -v rows="$SQL_COUNT" -v hmax="$hmax" -v retries="$retries" 'BEGIN {
      split(r0, a, " "); split(r1, b, " ")
      printf "wall_s=%.3f header_max_s=%.3f retries=%d state_reads=%d rows_read=%d table_reads=%.2f pg_cpu_s=%.2f ww_cpu_s=%.2f reader_cpu_s=%.2f machine_cpu_pct=%.0f ww_rss_before_kb=%d ww_rss_peak_kb=%d objects=%d rvs=%d",
        wall, hmax, retries, b[1] - a[1], b[2] - a[2], (b[2] - a[2]) / rows, pg / hz, ww / hz, rcpu, 100 * m / hz / (t1 - t0), rss0, hwm, o, nrv }')
  echo "walwatch $n $rep $line" >>"$RESULTS"
  bench_say "walwatch N=$n run $rep: $line"
}

# The same N readers against the ideal server.
storm_limit() {
  local n=$1 rep=$2 dir=$DIR/limit.$1.$2 sock=$DIR/ceiling.sock i
  sleep "$SETTLE"
  rm -f "$sock"
  "$STORM" serve --socket "$sock" --body "$DIR/body" --watchers "$n" \
    --threads "$CEILING_THREADS" "${CEILING_FLAGS[@]}" >"$dir.server" 2>"$dir.server.err" &
  SERVER_PID=$!
  for ((i = 0; i < BENCH_TIMEOUT * 50; i++)); do
    [[ -S "$sock" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || bench_die "storm_ceiling serve exited: $(cat "$dir.server.err")"
    sleep 0.02
  done
  start_readers "$n" "$sock" "$dir"
  local m0 m1 t0 t1
  perf_start "limit.$n.$rep"
  m0=$(machine_busy_ticks) t0=$(now_s)
  touch "$dir/go"
  finish_readers "$dir"
  m1=$(machine_busy_ticks) t1=$(now_s)
  perf_stop
  wait "$SERVER_PID" || bench_die "storm_ceiling serve failed: $(cat "$dir.server.err")"
  SERVER_PID=""
  local wall omin omax nrv rcpu bad hmax retries
  read -r wall omin omax nrv rcpu bad hmax retries <<<"$READERS"
  ((bad == 0)) || bench_die "limit, N=$n: $bad reader(s) did not get $SQL_COUNT objects"
  local line
  line=$(awk -v m=$((m1 - m0)) -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" -v wall="$wall" -v rcpu="$rcpu" \
    -v scpu="$(kv "$dir.server" server_cpu_s)" -v writes="$(kv "$dir.server" writes)" \
    -v full="$(kv "$dir.server" full_socket_waits)" -v o="$omin" 'BEGIN {
      printf "wall_s=%.3f server_cpu_s=%.2f reader_cpu_s=%.2f machine_cpu_pct=%.0f server_writes=%d server_full_socket_waits=%d objects=%d",
        wall, scpu, rcpu, 100 * m / hz / (t1 - t0), writes, full, o }')
  echo "limit $n $rep $line" >>"$RESULTS"
  bench_say "limit N=$n run $rep: $line"
}

for ((rep = 1; rep <= REPS; rep++)); do
  for n in $NS; do
    storm_walwatch "$n" "$rep"
    storm_limit "$n" "$rep"
  done
done

# --- the report ---------------------------------------------------------------

# Median of key $3 over the "$1 $2 REP ..." lines.
med() {
  awk -v who="$1" -v n="$2" -v key="$3" '$1 == who && $2 == n {
      for (i = 4; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) print kv[2] } }' "$RESULTS" | median
}
for n in $NS; do
  ww=$(med walwatch "$n" wall_s) lim=$(med limit "$n" wall_s)
  awk -v n="$n" -v ww="$ww" -v lim="$lim" -v goal="$GOAL" -v reads="$(med walwatch "$n" state_reads)" \
    -v tr="$(med walwatch "$n" table_reads)" -v pg="$(med walwatch "$n" pg_cpu_s)" \
    -v wwc="$(med walwatch "$n" ww_cpu_s)" -v rss="$(med walwatch "$n" ww_rss_peak_kb)" \
    -v rss0="$(med walwatch "$n" ww_rss_before_kb)" -v wm="$(med walwatch "$n" machine_cpu_pct)" \
    -v wr="$(med walwatch "$n" reader_cpu_s)" -v lr="$(med limit "$n" reader_cpu_s)" \
    -v ls="$(med limit "$n" server_cpu_s)" -v lm="$(med limit "$n" machine_cpu_pct)" \
    -v hdr="$(med walwatch "$n" header_max_s)" -v retries="$(med walwatch "$n" retries)" 'BEGIN {
      r = ww / lim
      printf "storm %s ww_wall_s=%.3f limit_wall_s=%.3f ratio=%.2f goal_met=%s ww_header_max_s=%.3f ww_retries=%d state_reads=%d table_reads=%.2f pg_cpu_s=%.2f ww_cpu_s=%.2f ww_rss_before_kb=%d ww_rss_peak_kb=%d ww_reader_cpu_s=%.2f ww_machine_cpu_pct=%.0f limit_server_cpu_s=%.2f limit_reader_cpu_s=%.2f limit_machine_cpu_pct=%.0f\n",
        n, ww, lim, r, (r <= goal ? "yes" : "no"), hdr, retries, reads, tr, pg, wwc, rss0, rss, wr, wm, ls, lr, lm }' >>"$RESULTS"
done

report() {
  local mb
  mb=$(awk -v b="$BODY_BYTES" 'BEGIN { printf "%.0f", b / 1e6 }')
  echo
  echo "Relist storm (\`tests/bench/relist_storm_bench.sh\`, issue 40 item 5): N WatchLists (sendInitialEvents=true) of one resource of $SQL_COUNT Pods ($((JSONB_BYTES / 1000000)) MB of jsonb, ~$TEXT_BYTES bytes of JSON each; one WatchList's body $mb MB) started at once, each read to its end bookmark by its own process (storm_ceiling read: counts event lines, no JSON parsing), against the same readers reading the same body from an ideal server (storm_ceiling serve: the body from memory to all N sockets, $CEILING_THREADS threads, $CEILING_WRITE). Wall: first request to the last end bookmark. State reads: walwatch's cursors (pg_stat_statements); table reads: rows its FETCHes returned / rows of the resource. Peak RSS: VmHWM during the storm. Median of $REPS run(s); every reader got all $SQL_COUNT objects. Goal: the storm within ${GOAL}× of the limit."
  echo
  echo "| N | walwatch wall s | limit wall s | **ratio** | goal ≤ ${GOAL}× | walwatch's slowest 200 header s | 504s retried | state reads | table reads | PostgreSQL CPU s | walwatch CPU s | walwatch RSS MiB (before → peak) | readers' CPU s (walwatch / limit) | limit server CPU s | machine CPU % (walwatch / limit) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  awk '$1 == "storm" { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      printf "| %s | %.2f | %.3f | **%.2f** | %s | %.2f | %d | %d | %.1f | %.1f | %.1f | %.0f → %.0f | %.1f / %.1f | %.1f | %s / %s |\n",
        $2, v["ww_wall_s"], v["limit_wall_s"], v["ratio"], (v["goal_met"] == "yes" ? "met" : "missed"),
        v["ww_header_max_s"], v["ww_retries"], v["state_reads"], v["table_reads"], v["pg_cpu_s"], v["ww_cpu_s"], v["ww_rss_before_kb"] / 1024,
        v["ww_rss_peak_kb"] / 1024, v["ww_reader_cpu_s"], v["limit_reader_cpu_s"], v["limit_server_cpu_s"],
        v["ww_machine_cpu_pct"], v["limit_machine_cpu_pct"] }' "$RESULTS"
}

stop_walwatch
report | tee "$DIR/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$DIR/report.md" "$BENCH_REPORT"
[[ -z "${BENCH_OUT:-}" ]] || cp "$RESULTS" "$BENCH_OUT"
