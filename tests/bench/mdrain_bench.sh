#!/usr/bin/env bash
# Backlog drain on MariaDB: how fast walwatch (--source mysql) turns a
# backlog in the binlog into watch events delivered to one watcher, next to
# mariadb-binlog reading the same binlog from the same position into
# /dev/null, as drain_bench.sh does with pg_recvlogical on PostgreSQL.
#
#   tests/bench/mdrain_bench.sh
#
# Steps: a throwaway MariaDB (tests/tools/mariadb-sandbox.sh, through
# bench_lib.sh with BENCH_DB=mysql) with Clusterpedia's table
# (schema/mysql/clusterpedia.sql); FLUSH BINARY LOGS, and the older files
# purged, so that the backlog starts a binlog file F of its own and F is the
# oldest the server keeps; BENCH_MDRAIN_ROWS Pods of ~3 KB of JSON, the
# objects of drain_bench.sh's bench_pod(), inserted one row per transaction
# (autocommit, as Clusterpedia's MySQL driver writes) while nobody reads;
# then per repetition, alternating which goes first:
#   mariadb-binlog  --read-from-remote-server over TCP, F from position 4,
#                   to the end of the binlog (it exits there: without
#                   --stop-never it stops at the end of what the server
#                   has), --base64-output=DECODE-ROWS --verbose, > /dev/null;
#                   timed from its start to its exit;
#   walwatch        --source mysql --replay-window 24h, which starts reading
#                   at F:4 (the oldest file kept, younger than the window),
#                   with one watcher (watch_count, as in drain_bench.sh) from
#                   resourceVersion F:4, the stream's floor, so that every
#                   backlog row arrives as ADDED; timed from walwatch's start
#                   to the watcher's Nth event.
# Both end on a position, not on a time: mariadb-binlog at the binlog's end,
# the watcher at the backlog's last row.
#
# Why those mariadb-binlog flags: walwatch decodes every row's columns and
# writes the object out as text. --verbose with DECODE-ROWS makes
# mariadb-binlog decode every row's columns too and print them as text
# (### INSERT ... @11='{...}'), without the base64 copy of each event that
# its default output adds; DECODE-ROWS alone prints nothing of the rows (no
# column decoded: less work than walwatch's), and the default output
# base64-encodes events without decoding them (other work, not less).
#
# Prints, and writes to BENCH_OUT as key=value lines: the medians of both
# times and their ratio, walwatch / mariadb-binlog (the goal: <= 1.11), and
# every repetition; BENCH_REPORT gets the Markdown section.
#
# Environment:
#   BENCH_MDRAIN_ROWS (40000)   rows in the backlog
#   BENCH_MDRAIN_REPS (3)       repetitions (medians are reported)
#   BENCH_OUT, BENCH_REPORT     see above
#   plus bench_lib.sh's (WALWATCH_BIN, BENCH_KEEP, BENCH_TIMEOUT);
#   WATCH_COUNT_BIN (watch_count next to WALWATCH_BIN).
# Needs: mariadb-server (make deps), mariadb-binlog (mariadb-client), python3.
set -euo pipefail

# shellcheck source=tests/bench/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"

ROWS=${BENCH_MDRAIN_ROWS:-40000}
REPS=${BENCH_MDRAIN_REPS:-3}
MBL_FLAGS=(--base64-output=DECODE-ROWS --verbose)
[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || bench_die "BENCH_MDRAIN_ROWS must be a positive integer"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || bench_die "BENCH_MDRAIN_REPS must be a positive integer"
command -v mariadb-binlog >/dev/null || bench_die "mariadb-binlog is missing (apt-get install mariadb-client)"

# shellcheck disable=SC2034  # read by bench_lib.sh's bench_init
BENCH_DB=mysql
bench_init mdrain
WATCH_COUNT_BIN=${WATCH_COUNT_BIN:-$(dirname "$WALWATCH_BIN")/watch_count}
[[ -x "$WATCH_COUNT_BIN" ]] || bench_die "no $WATCH_COUNT_BIN; build the bench targets first"

now_ns() { date +%s%N; }
# SHOW MASTER STATUS: "file position".
binlog_end() { my_v -e "SHOW MASTER STATUS" | awk '{ print $1, $2 }'; }

# The backlog starts a file of its own, the oldest the server keeps: MariaDB
# purges a file only once its binlog checkpoint has passed, so ask again.
my_q -e "FLUSH BINARY LOGS"
read -r FILE _ < <(binlog_end)
for ((i = 0; ; i++)); do
  my_q -e "PURGE BINARY LOGS TO '$FILE'"
  oldest=$(my_v -e "SHOW BINARY LOGS" | awk 'NR == 1 { print $1 }')
  [[ "$oldest" != "$FILE" ]] || break
  ((i < 300)) || bench_die "the files before $FILE were not purged in 30 s"
  sleep 0.1
done

# drain_bench.sh's bench_pod(i), as the JSON text a client writes.
GEN=$(
  cat <<'PY'
import hashlib, json, sys

def md5(s):
    return hashlib.md5(s.encode()).hexdigest()

def uuid(h):
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

def pod(i):
    h = md5(str(i))[:10]
    rs_uid = uuid(md5("rs" + str(i)))
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"web-{h}-{i}", "generateName": f"web-{h}-",
            "namespace": f"team-{i % 7}", "uid": uuid(md5("uid" + str(i))),
            "resourceVersion": str(1000000 + i),
            "creationTimestamp": "2026-12-02T13:21:36Z",
            "labels": {"app": "web", "pod-template-hash": h,
                       "app.kubernetes.io/part-of": "shop",
                       "app.kubernetes.io/version": f"1.24.{i % 10}"},
            "annotations": {"shadow.clusterpedia.io/cluster-name": "c1",
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": "8080"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": f"web-{h}", "uid": rs_uid,
                                 "controller": True,
                                 "blockOwnerDeletion": True}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update",
                 "apiVersion": "v1", "time": "2026-12-02T13:21:36Z",
                 "fieldsType": "FieldsV1",
                 "fieldsV1": {
                     "f:metadata": {
                         "f:generateName": {},
                         "f:labels": {".": {}, "f:app": {},
                                      "f:pod-template-hash": {}},
                         "f:ownerReferences": {
                             ".": {}, 'k:{"uid":"' + rs_uid + '"}': {}}},
                     "f:spec": {"f:containers": {'k:{"name":"web"}': {
                         ".": {}, "f:env": {}, "f:image": {}, "f:name": {},
                         "f:ports": {}, "f:resources": {}}},
                         "f:dnsPolicy": {}, "f:restartPolicy": {}}}},
                {"manager": "kubelet", "operation": "Update",
                 "apiVersion": "v1", "time": "2026-12-02T13:21:40Z",
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {
                     "f:conditions": {}, "f:containerStatuses": {},
                     "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
                     "f:startTime": {}}}}]},
        "spec": {
            "containers": [{
                "name": "web",
                "image": f"registry.example.com/shop/web:1.24.{i % 10}",
                "ports": [{"name": "http", "protocol": "TCP",
                           "containerPort": 8080}],
                "env": [{"name": "POD_SEED", "value": md5("env" + str(i))},
                        {"name": "LOG_LEVEL", "value": "info"},
                        {"name": "UPSTREAM",
                         "value": f"http://api.team-{i % 7}.svc:8080"}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                              "requests": {"cpu": "100m", "memory": "128Mi"}},
                "readinessProbe": {"httpGet": {"path": "/healthz",
                                               "port": 8080, "scheme": "HTTP"},
                                   "periodSeconds": 10, "timeoutSeconds": 1,
                                   "failureThreshold": 3,
                                   "successThreshold": 1},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "nodeName": f"node-{i % 500}.example.internal",
            "schedulerName": "default-scheduler", "priority": 0,
            "tolerations": [{"key": "node.kubernetes.io/not-ready",
                             "effect": "NoExecute", "operator": "Exists",
                             "tolerationSeconds": 300}]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None,
                 "lastTransitionTime": ts}
                for t, ts in (("Initialized", "2026-12-02T13:21:36Z"),
                              ("Ready", "2026-12-02T13:21:40Z"),
                              ("PodScheduled", "2026-12-02T13:21:36Z"))],
            "hostIP": f"192.168.7.{i % 250}",
            "podIP": f"10.244.{i % 250}.{(i // 250) % 250}",
            "startTime": "2026-12-02T13:21:36Z",
            "containerStatuses": [{
                "name": "web", "ready": True, "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": "2026-12-02T13:21:39Z"}},
                "image": f"registry.example.com/shop/web:1.24.{i % 10}",
                "imageID": "registry.example.com/shop/web@sha256:"
                           + md5("img" + str(i)) + md5("img2" + str(i)),
                "containerID": "containerd://" + md5("c" + str(i))
                               + md5("c2" + str(i))}],
            "qosClass": "Burstable"}}

def sql(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

rows, sizes = int(sys.argv[1]), sys.argv[2]
total = 0
out = sys.stdout
for i in range(1, rows + 1):
    p = pod(i)
    obj = json.dumps(p, separators=(", ", ": "))
    total += len(obj)
    m = p["metadata"]
    out.write(
        "INSERT INTO resources (`group`, version, resource, kind, cluster, "
        "namespace, name, owner_uid, uid, resource_version, object, "
        "created_at, synced_at) VALUES ('', 'v1', 'pods', 'Pod', 'c1', "
        f"{sql(m['namespace'])}, {sql(m['name'])}, "
        f"{sql(m['ownerReferences'][0]['uid'])}, {sql(m['uid'])}, "
        f"{sql(m['resourceVersion'])}, {sql(obj)}, NOW(3), NOW(3));\n")
with open(sizes, "w") as f:
    f.write(f"{total // rows}\n")
PY
)
bench_say "loading $ROWS Pods, one row per transaction, into $FILE ..."
t0=$(now_ns)
python3 -c "$GEN" "$ROWS" "$DIR/object_bytes" | my_q bench
t1=$(now_ns)
LOAD_RPS=$(awk -v n="$ROWS" -v ns=$((t1 - t0)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
OBJ_BYTES=$(cat "$DIR/object_bytes")
read -r END_FILE END_POS < <(binlog_end)
[[ "$END_FILE" == "$FILE" ]] || bench_die "the backlog spans $FILE to $END_FILE: raise max_binlog_size or lower BENCH_MDRAIN_ROWS"
BINLOG_BYTES=$((END_POS - 4))
# The stream's floor, F:4 as a resourceVersion (cdc/mysql/binlog_position.h:
# the server_id modulo 1844 times 10^16, plus the file's number times 10^10,
# plus the offset).
SERVER_ID=$(my_v -e "SELECT @@server_id")
FLOOR=$(( (SERVER_ID % 1844) * 10000000000000000 + 10#${FILE##*.} * 10000000000 + 4))
bench_say "loaded at $LOAD_RPS rows/s: $BINLOG_BYTES bytes of binlog in $FILE, objects of ~$OBJ_BYTES bytes"

# One mariadb-binlog drain; sets MBL_S.
run_mbl() {
  local r=$1 t0 t1
  t0=$(now_ns)
  timeout "$BENCH_TIMEOUT" mariadb-binlog --no-defaults --read-from-remote-server \
    --host=127.0.0.1 --port="$MY_PORT" --user=root "${MBL_FLAGS[@]}" \
    --start-position=4 "$FILE" >/dev/null 2>"$DIR/mbl.$r.err" ||
    { cat "$DIR/mbl.$r.err" >&2; bench_die "mariadb-binlog failed (repetition $r)"; }
  t1=$(now_ns)
  MBL_S=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }')
}

# One walwatch drain; sets WW_S (walwatch's start to the watcher's last
# event) and WW_STREAM_S (first to last event).
run_walwatch() {
  local r=$1 sock=$DIR/mdrain.$1.sock t0 i out count tfirst tlast
  t0=$(now_ns)
  "$WALWATCH_BIN" --source mysql --mysql-conninfo "$MYSQL_CONNINFO" \
    --server-id-from "bench-mdrain-$r" --replay-window 24h --socket "$sock" \
    --metrics-address= --max-log-bytes 8Gi --max-watcher-backlog 8Gi \
    --log-level warn >"$DIR/walwatch.$r.log" 2>&1 &
  WALWATCH_PID=$!
  for ((i = 0; i < BENCH_TIMEOUT * 100; i++)); do
    [[ -S "$sock" ]] && break
    kill -0 "$WALWATCH_PID" 2>/dev/null || { cat "$DIR/walwatch.$r.log" >&2; bench_die "walwatch exited"; }
    sleep 0.01
  done
  [[ -S "$sock" ]] || bench_die "walwatch did not create its socket"
  if ! out=$("$WATCH_COUNT_BIN" --socket "$sock" --count "$ROWS" --timeout "$BENCH_TIMEOUT" \
      --path "/api/v1/pods?watch=1&resourceVersion=$FLOOR"); then
    tail -n 20 "$DIR/walwatch.$r.log" >&2
    bench_die "the watcher did not get $ROWS ADDED events (repetition $r)"
  fi
  stop_walwatch
  read -r count tfirst tlast <<<"$out"
  [[ "$count" == "$ROWS" ]] || bench_die "the watcher got $count events, expected $ROWS (repetition $r)"
  WW_S=$(awk -v ns=$((tlast - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }')
  WW_STREAM_S=$(awk -v ns=$((tlast - tfirst)) 'BEGIN { printf "%.3f", ns / 1e9 }')
}

mbl_all=() ww_all=() ww_stream_all=()
for ((r = 1; r <= REPS; r++)); do
  if ((r % 2)); then run_mbl "$r"; run_walwatch "$r"; else run_walwatch "$r"; run_mbl "$r"; fi
  bench_say "repetition $r: mariadb-binlog $MBL_S s; walwatch $WW_S s (start to last event), $WW_STREAM_S s (first to last event)"
  mbl_all+=("$MBL_S") ww_all+=("$WW_S") ww_stream_all+=("$WW_STREAM_S")
done

MBL=$(printf '%s\n' "${mbl_all[@]}" | median)
WW=$(printf '%s\n' "${ww_all[@]}" | median)
WW_STREAM=$(printf '%s\n' "${ww_stream_all[@]}" | median)
RATIO=$(awk -v a="$WW" -v b="$MBL" 'BEGIN { printf "%.2f", a / b }')
STREAM_RATIO=$(awk -v a="$WW_STREAM" -v b="$MBL" 'BEGIN { printf "%.2f", a / b }')
VERDICT=$(awk -v r="$RATIO" 'BEGIN { if (r <= 1.11) print "met"; else printf "missed (%.2f × the 1.11 goal)", r / 1.11 }')
rps() { awk -v n="$ROWS" -v s="$1" 'BEGIN { printf "%.0f", n / s }'; }

echo "walwatch drain: $WW s, mariadb-binlog: $MBL s, ratio $RATIO"
{
  echo
  echo "Backlog drain on MariaDB (\`tests/bench/mdrain_bench.sh\`), MariaDB $("${WALWATCH_MARIADBD:-/usr/sbin/mariadbd}" --version 2>/dev/null | awk '{ print $3 }' || true): $ROWS Pods of ~$OBJ_BYTES bytes of JSON, one row per transaction ($BINLOG_BYTES bytes of binlog; loaded at $LOAD_RPS rows/s), both from $FILE:4 over TCP, alternating, median of $REPS:"
  echo
  echo "| | s | rows/s | all repetitions, s |"
  echo "|---|---|---|---|"
  echo "| mariadb-binlog --read-from-remote-server ${MBL_FLAGS[*]} → /dev/null | $MBL | $(rps "$MBL") | ${mbl_all[*]} |"
  echo "| walwatch --source mysql → one watcher (start to last event) | $WW | $(rps "$WW") | ${ww_all[*]} |"
  echo "| walwatch (first to last event) | $WW_STREAM | $(rps "$WW_STREAM") | ${ww_stream_all[*]} |"
  echo
  echo "walwatch / mariadb-binlog: $RATIO — goal ≤ 1.11: $VERDICT. From walwatch's first event to its last (its startup left out: the checks, loading the resource catalog, choosing where the replay window starts): $STREAM_RATIO × mariadb-binlog's time."
} >"$DIR/report.md"
cat "$DIR/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$DIR/report.md" "$BENCH_REPORT"
if [[ -n "${BENCH_OUT:-}" ]]; then
  cat >"$BENCH_OUT" <<EOF
rows=$ROWS
reps=$REPS
object_bytes=$OBJ_BYTES
binlog_bytes=$BINLOG_BYTES
load_rows_per_s=$LOAD_RPS
mbl_flags="${MBL_FLAGS[*]}"
mbl_s=$MBL
walwatch_s=$WW
walwatch_stream_s=$WW_STREAM
ratio=$RATIO
stream_ratio=$STREAM_RATIO
mbl_all="${mbl_all[*]}"
walwatch_all="${ww_all[*]}"
walwatch_stream_all="${ww_stream_all[*]}"
EOF
fi
