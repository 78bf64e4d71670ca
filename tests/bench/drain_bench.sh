#!/usr/bin/env bash
# Backlog drain: how fast walwatch turns a backlog of wal2json changes into
# watch events delivered to a watcher, next to pg_recvlogical draining the same
# backlog with the same wal2json options into /dev/null (the walsender's own
# speed: the ceiling for any wal2json consumer).
#
#   tests/bench/drain_bench.sh
#
# Steps: a throwaway PostgreSQL 15 + wal2json (tests/tools/pg-sandbox.sh);
# Clusterpedia's table (schema/clusterpedia.sql, REPLICA IDENTITY FULL); one
# pair of fresh logical slots per repetition (bench_recv_R for pg_recvlogical,
# bench_ww_R for walwatch), created before the load so each sees the whole
# backlog; BENCH_ROWS Kubernetes-like Pods of ~3 KB jsonb inserted (one row
# per transaction, as Clusterpedia writes, or batches); then per repetition:
#   pg_recvlogical  --start --endpos=<WAL position after the load> -f /dev/null
#                   timed from its start to its exit;
#   walwatch        started on the loaded backlog, with one watcher
#                   (tests/bench/watch_count.cc: reads and counts, like
#                   pg_recvlogical's -f /dev/null does no more than write)
#                   GET /api/v1/pods?watch=1&resourceVersion=<slot start - 1>
#                   (the stream's floor: every backlog row arrives as ADDED),
#                   timed from walwatch's start to the watcher's Nth event.
# Prints the median rows/s of each and the ratio walwatch / pg_recvlogical:
#   walwatch drain: X rows/s, pg_recvlogical: Y rows/s, ratio Z
#
# Environment:
#   BENCH_ROWS (100000)      rows in the backlog
#   BENCH_TXN (single)       single: one row per transaction; batch: BENCH_BATCH
#   BENCH_BATCH (1000)       rows per transaction when BENCH_TXN=batch
#   BENCH_REPS (3)           repetitions (medians are reported)
#   BENCH_DRAIN_SIZES        smaller backlogs, each drained once by both
#                            (words, rows; e.g. "5000 10000"): drain time
#                            against backlog size
#   BENCH_DRAIN_REPLICAS     replica counts (e.g. "1 2 4 8"): that many
#                            walwatch processes, each with its own slot,
#                            drain one backlog of BENCH_DRAIN_REPLICA_ROWS
#                            (BENCH_ROWS / 4) at once; the drain time and
#                            the primary's CPU per replica
#   BENCH_TIMEOUT (600)      seconds any one step may take
#   WALWATCH_BIN             default build-bench/walwatch, else build/walwatch
#   BENCH_WALWATCH_FLAGS     extra walwatch flags (words), e.g. "--http-threads 2"
#   WATCH_COUNT_BIN          the watcher (tests/bench/watch_count.cc); default
#                            watch_count next to WALWATCH_BIN
#   BENCH_DRAIN_OUT          also write key=value results to this file, and
#                            the sizes' and replicas' lines to the same name
#                            ending in .txt
#   BENCH_KEEP=1             keep the sandbox directory (logs) at the end
#   BENCH_PERF_DIR           record a system-wide CPU profile of each drain
#                            (perf record -a -g -e cpu-clock) into this
#                            directory: recvlogical.R.data, walwatch.R.data;
#                            and the consumer's context switches, page faults
#                            and system calls per thread (perf stat):
#                            recvlogical.R.stat, walwatch.R.stat
# Needs: PostgreSQL 15 + wal2json (make deps).
# shellcheck disable=SC2317  # functions called from traps only
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
ROWS=${BENCH_ROWS:-100000}
TXN=${BENCH_TXN:-single}
BATCH=${BENCH_BATCH:-1000}
REPS=${BENCH_REPS:-3}
TIMEOUT=${BENCH_TIMEOUT:-600}
SIZES=${BENCH_DRAIN_SIZES:-}
REPLICAS=${BENCH_DRAIN_REPLICAS:-}
REPLICA_ROWS=${BENCH_DRAIN_REPLICA_ROWS:-$((ROWS / 4))}
if [[ -z "${WALWATCH_BIN:-}" ]]; then
  WALWATCH_BIN=$ROOT/build-bench/walwatch
  [[ -x "$WALWATCH_BIN" ]] || WALWATCH_BIN=$ROOT/build/walwatch
fi
WATCH_COUNT_BIN=${WATCH_COUNT_BIN:-$(dirname "$WALWATCH_BIN")/watch_count}
PG_BINDIR=${WALWATCH_PG_BINDIR:-/usr/lib/postgresql/15/bin}
PG_RECVLOGICAL=$PG_BINDIR/pg_recvlogical
[[ -x "$PG_RECVLOGICAL" ]] || PG_RECVLOGICAL=$(command -v pg_recvlogical)

# bench_lib.sh for pg_cpu_ticks and cpu_ticks; the functions below that
# share a name with its own replace them.
# shellcheck source=tests/bench/bench_lib.sh
source tests/bench/bench_lib.sh
say() { echo "drain_bench: $*" >&2; }
die() { say "$*"; exit 1; }

[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROWS must be a positive integer"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPS must be a positive integer"
[[ "$BATCH" =~ ^[1-9][0-9]*$ ]] || die "BENCH_BATCH must be a positive integer"
[[ "$TXN" == single || "$TXN" == batch ]] || die "BENCH_TXN must be single or batch"
[[ -x "$WALWATCH_BIN" ]] || die "no walwatch binary ($WALWATCH_BIN); build it first"
[[ -x "$WATCH_COUNT_BIN" ]] || die "no watch_count binary ($WATCH_COUNT_BIN); build the bench targets first"

DIR=""
WALWATCH_PID=""
PERF_PID=""
STAT_PID=""
STAT_EVENTS=task-clock,context-switches,page-faults
for call in futex poll ppoll recvfrom read sendto sendmsg write writev epoll_wait epoll_ctl \
  timerfd_settime mprotect mmap munmap brk madvise; do
  STAT_EVENTS+=",syscalls:sys_enter_$call"
done

# System-wide profile of one drain, when BENCH_PERF_DIR is set.
perf_start() {
  [[ -n "${BENCH_PERF_DIR:-}" ]] || return 0
  mkdir -p "$BENCH_PERF_DIR"
  perf record -a -g -e cpu-clock -o "$BENCH_PERF_DIR/$1.data" >"$BENCH_PERF_DIR/$1.log" 2>&1 &
  PERF_PID=$!
  sleep 0.5  # let it start
}
# Counts of one process's threads, when BENCH_PERF_DIR is set.
stat_start() {
  [[ -n "${BENCH_PERF_DIR:-}" ]] || return 0
  perf stat --per-thread -e "$STAT_EVENTS" -p "$2" -o "$BENCH_PERF_DIR/$1.stat" 2>/dev/null &
  STAT_PID=$!
}
perf_stop() {
  local pid
  for pid in "$STAT_PID" "$PERF_PID"; do
    [[ -n "$pid" ]] || continue
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PERF_PID="" STAT_PID=""
}

stop_walwatch() {
  local pid=$WALWATCH_PID i
  WALWATCH_PID=""
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  set +e
  trap '' INT TERM
  stop_walwatch
  perf_stop
  if [[ -n "$DIR" ]]; then
    if [[ "${BENCH_KEEP:-}" == 1 ]]; then
      "$ROOT/tests/tools/pg-sandbox.sh" stop "$DIR/pg" >/dev/null 2>&1
      say "kept $DIR"
    else
      "$ROOT/tests/tools/pg-sandbox.sh" stop "$DIR/pg" >/dev/null 2>&1
      rm -rf -- "$DIR"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_ns() { date +%s%N; }

DIR=$(mktemp -d /tmp/ww-bench.XXXXXX)
chmod 0755 "$DIR"
sandbox_env=$("$ROOT/tests/tools/pg-sandbox.sh" start "$DIR/pg")  # set -e stops here on failure
eval "$sandbox_env"
CONNINFO="host=$PGHOST port=$PGPORT dbname=postgres user=postgres"
psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
psql_v() { psql -X -qAt -v ON_ERROR_STOP=1 "$@"; }

psql_q -f "$ROOT/schema/clusterpedia.sql"

# A Kubernetes-like Pod of ~3 KB of jsonb text for row i: labels,
# annotations, ownerReferences, managedFields, one container, status. md5
# makes names, uids and hashes vary, so compression is realistic.
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

CREATE PROCEDURE bench_load(first int, n int, batch int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN first..first + n - 1 LOOP
    INSERT INTO resources ("group", version, resource, kind, cluster,
                           namespace, name, owner_uid, uid, resource_version,
                           object, created_at, synced_at)
    SELECT '', 'v1', 'pods', 'Pod', 'c1', o->'metadata'->>'namespace',
           o->'metadata'->>'name', md5('rs' || i)::uuid::text,
           o->'metadata'->>'uid', o->'metadata'->>'resourceVersion', o,
           now(), now()
    FROM bench_pod(i) AS o;
    IF i % batch = 0 THEN COMMIT; END IF;
  END LOOP;
  COMMIT;
END $$;
SQL

OBJ_BYTES=$(psql_v -c "SELECT avg(length(bench_pod(i)::text))::int FROM generate_series(1, 200) AS i")

slot() { psql_v -c "SELECT pg_create_logical_replication_slot('$1', 'wal2json')" >/dev/null; }
# Fresh slots for every repetition, all created before the load.
for ((r = 1; r <= REPS; r++)); do
  slot "bench_recv_$r"
  slot "bench_ww_$r"
done

per_txn=1
[[ "$TXN" == batch ]] && per_txn=$BATCH
# The load comes in parts, so that a slot created between two parts sees
# just the rows after it: the smaller backlogs of BENCH_DRAIN_SIZES and the
# replicas' are the last rows of the one load.
POINTS=$( (for n in $SIZES; do echo "$n"; done; [[ -z "$REPLICAS" ]] || echo "$REPLICA_ROWS") | sort -rnu)
say "loading $ROWS Pods of ~$OBJ_BYTES bytes of jsonb, $per_txn row(s) per transaction ..."
loaded=0
t0=$(now_ns)
for point in $POINTS; do
  timeout "$TIMEOUT" psql -X -q -v ON_ERROR_STOP=1 -c "CALL bench_load($((loaded + 1)), $((ROWS - point - loaded)), $per_txn)"
  loaded=$((ROWS - point))
  for n in $SIZES; do
    [[ "$n" != "$point" ]] || { slot "bench_recv_s$n"; slot "bench_ww_s$n"; }
  done
  if [[ "$point" == "$REPLICA_ROWS" ]]; then
    for k in $REPLICAS; do
      for ((j = 1; j <= k; j++)); do slot "bench_rep_${k}_$j"; done
    done
  fi
done
timeout "$TIMEOUT" psql -X -q -v ON_ERROR_STOP=1 -c "CALL bench_load($((loaded + 1)), $((ROWS - loaded)), $per_txn)"
t1=$(now_ns)
LOAD_RPS=$(awk -v n="$ROWS" -v ns=$((t1 - t0)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
END_LSN=$(psql_v -c "SELECT pg_current_wal_lsn()")
WAL_BYTES=$(psql_v -c "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'bench_recv_1'")
say "loaded at $LOAD_RPS rows/s; backlog of $WAL_BYTES bytes of WAL up to $END_LSN"

WAL2JSON_OPTS=(-o format-version=2 -o include-xids=1 -o include-lsn=1
  -o include-timestamp=1 -o include-types=0
  -o add-msg-prefixes=walwatch.clusterpedia.io/none -o add-tables=public.resources)

# One pg_recvlogical drain; sets RECV_RPS.
run_recvlogical() {
  local r=$1 rows=${2:-$ROWS} t0 t1
  local pid rc=0
  perf_start "recvlogical.$r"
  t0=$(now_ns)
  timeout "$TIMEOUT" "$PG_RECVLOGICAL" -d "$CONNINFO" --slot "bench_recv_$r" \
    --start --endpos "$END_LSN" --no-loop "${WAL2JSON_OPTS[@]}" -f /dev/null \
    2>"$DIR/recvlogical.$r.err" &
  pid=$!
  if [[ -n "${BENCH_PERF_DIR:-}" ]]; then
    local child="" i
    for ((i = 0; i < 100; i++)); do
      child=$(pgrep -P "$pid" pg_recvlogical || true)
      [[ -z "$child" ]] || break
      sleep 0.01
    done
    [[ -z "$child" ]] || stat_start "recvlogical.$r" "$child"
  fi
  wait "$pid" || rc=$?
  t1=$(now_ns)
  if ((rc != 0)); then
    perf_stop
    cat "$DIR/recvlogical.$r.err" >&2
    die "pg_recvlogical failed (repetition $r)"
  fi
  perf_stop
  RECV_RPS=$(awk -v n="$rows" -v ns=$((t1 - t0)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
}

# One walwatch drain; sets WW_RPS (walwatch's start to the watcher's last
# event) and WW_STREAM_RPS (first to last event).
run_walwatch() {
  local r=$1 rows=${2:-$ROWS} floor sock t0 i out count tfirst tlast
  floor=$(psql_v -c "SELECT (confirmed_flush_lsn - '0/0'::pg_lsn)::numeric - 1
                     FROM pg_replication_slots WHERE slot_name = 'bench_ww_$r'")
  sock=$DIR/walwatch.$r.sock
  perf_start "walwatch.$r"
  t0=$(now_ns)
  local -a extra
  read -r -a extra <<<"${BENCH_WALWATCH_FLAGS:-}"
  "$WALWATCH_BIN" --conninfo "$CONNINFO" --slot "bench_ww_$r" --socket "$sock" \
    --metrics-address= --max-log-bytes 8Gi --max-watcher-backlog 8Gi \
    --log-level warn "${extra[@]}" >"$DIR/walwatch.$r.log" 2>&1 &
  WALWATCH_PID=$!
  stat_start "walwatch.$r" "$WALWATCH_PID"
  for ((i = 0; i < TIMEOUT * 100; i++)); do
    [[ -S "$sock" ]] && break
    kill -0 "$WALWATCH_PID" 2>/dev/null || { cat "$DIR/walwatch.$r.log" >&2; die "walwatch exited"; }
    sleep 0.01
  done
  [[ -S "$sock" ]] || die "walwatch did not create its socket"
  if ! out=$("$WATCH_COUNT_BIN" --socket "$sock" --count "$rows" --timeout "$TIMEOUT" \
      --path "/api/v1/pods?watch=1&resourceVersion=$floor"); then
    perf_stop
    tail -n 20 "$DIR/walwatch.$r.log" >&2
    die "the watcher did not get $rows ADDED events (repetition $r)"
  fi
  perf_stop
  stop_walwatch
  read -r count tfirst tlast <<<"$out"
  [[ "$count" == "$rows" ]] || die "the watcher got $count events, expected $rows (repetition $r)"
  WW_RPS=$(awk -v n="$rows" -v ns=$((tlast - t0)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
  WW_STREAM_RPS=$(awk -v n="$rows" -v ns=$((tlast - tfirst)) 'BEGIN { printf "%.0f", (n - 1) / (ns / 1e9) }')
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

recv_all=() ww_all=() ww_stream_all=()
for ((r = 1; r <= REPS; r++)); do
  run_recvlogical "$r"
  run_walwatch "$r"
  say "repetition $r: pg_recvlogical $RECV_RPS rows/s; walwatch $WW_RPS rows/s (start to last event), $WW_STREAM_RPS rows/s (first to last event)"
  recv_all+=("$RECV_RPS") ww_all+=("$WW_RPS") ww_stream_all+=("$WW_STREAM_RPS")
done

# The smaller backlogs, one drain of each.
: >"$DIR/sizes.txt"
for n in $SIZES; do
  run_recvlogical "s$n" "$n"
  run_walwatch "s$n" "$n"
  say "backlog of $n rows: pg_recvlogical $RECV_RPS rows/s; walwatch $WW_RPS rows/s"
  echo "size $n recv_s=$(awk -v n="$n" -v r="$RECV_RPS" 'BEGIN { printf "%.2f", n / r }') walwatch_s=$(awk -v n="$n" -v r="$WW_RPS" 'BEGIN { printf "%.2f", n / r }')" >>"$DIR/sizes.txt"
done
echo "size $ROWS recv_s=$(printf '%s\n' "${recv_all[@]}" | median | awk -v n="$ROWS" '{ printf "%.2f", n / $1 }') walwatch_s=$(printf '%s\n' "${ww_all[@]}" | median | awk -v n="$ROWS" '{ printf "%.2f", n / $1 }')" >>"$DIR/sizes.txt"

# Replicas: k walwatch processes, each on its own slot, drain the same
# REPLICA_ROWS backlog at once, each to one watcher; timed from their start
# to the last watcher's last event. The primary's CPU: all of PostgreSQL
# over that time (its k walsenders decoding).
for k in $REPLICAS; do
  pids=() counters=()
  pg0=$(pg_cpu_ticks)
  t0=$(now_ns)
  for ((j = 1; j <= k; j++)); do
    sock=$DIR/rep.$k.$j.sock
    floor=$(psql_v -c "SELECT (confirmed_flush_lsn - '0/0'::pg_lsn)::numeric - 1
                       FROM pg_replication_slots WHERE slot_name = 'bench_rep_${k}_$j'")
    "$WALWATCH_BIN" --conninfo "$CONNINFO" --slot "bench_rep_${k}_$j" --socket "$sock" \
      --metrics-address= --max-log-bytes 8Gi --max-watcher-backlog 8Gi \
      --log-level warn >"$DIR/rep.$k.$j.log" 2>&1 &
    pids+=("$!")
    (for ((i = 0; i < TIMEOUT * 100; i++)); do [[ -S "$sock" ]] && break; sleep 0.01; done
     exec "$WATCH_COUNT_BIN" --socket "$sock" --count "$REPLICA_ROWS" --timeout "$TIMEOUT" \
       --path "/api/v1/pods?watch=1&resourceVersion=$floor") >"$DIR/rep.$k.$j.out" 2>&1 &
    counters+=("$!")
  done
  for c in "${counters[@]}"; do wait "$c" || { cat "$DIR"/rep.$k.*.out >&2; die "a replica's watcher failed ($k replicas)"; }; done
  t1=$(now_ns)
  pg1=$(pg_cpu_ticks)
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  line=$(awk -v k="$k" -v ns=$((t1 - t0)) -v pg=$((pg1 - pg0)) -v hz="$CLK_TCK" -v n="$REPLICA_ROWS" \
    'BEGIN { printf "replicas %d rows=%d drain_s=%.2f primary_cpu_s_per_replica=%.2f primary_cpu_pct=%.0f", k, n, ns / 1e9, pg / hz / k, 100 * pg / hz / (ns / 1e9) }')
  echo "$line" >>"$DIR/sizes.txt"
  say "$line"
done

RECV=$(printf '%s\n' "${recv_all[@]}" | median)
WW=$(printf '%s\n' "${ww_all[@]}" | median)
WW_STREAM=$(printf '%s\n' "${ww_stream_all[@]}" | median)
RATIO=$(awk -v a="$WW" -v b="$RECV" 'BEGIN { printf "%.2f", a / b }')

echo "walwatch drain: $WW rows/s, pg_recvlogical: $RECV rows/s, ratio $RATIO"
say "rows=$ROWS txn=$TXN object_bytes~$OBJ_BYTES wal_bytes=$WAL_BYTES load=$LOAD_RPS rows/s; walwatch first-to-last event: $WW_STREAM rows/s"
say "all repetitions: pg_recvlogical ${recv_all[*]}; walwatch ${ww_all[*]}; walwatch first-to-last ${ww_stream_all[*]}"
if [[ -n "${BENCH_DRAIN_OUT:-}" ]]; then
  cat >"$BENCH_DRAIN_OUT" <<EOF
rows=$ROWS
txn=$TXN
rows_per_txn=$per_txn
reps=$REPS
object_bytes=$OBJ_BYTES
wal_bytes=$WAL_BYTES
load_rows_per_s=$LOAD_RPS
recvlogical_rows_per_s=$RECV
walwatch_rows_per_s=$WW
walwatch_stream_rows_per_s=$WW_STREAM
ratio=$RATIO
recvlogical_all="${recv_all[*]}"
walwatch_all="${ww_all[*]}"
walwatch_stream_all="${ww_stream_all[*]}"
EOF
  # Per backlog size and per replica count, for the summary and the plots.
  cp "$DIR/sizes.txt" "${BENCH_DRAIN_OUT%.*}.txt"
fi
