#!/usr/bin/env bash
# Decoding on a hot standby: what K walwatch replicas cost the primary when
# their slots are on a standby of it, next to the same replicas with their
# slots on the primary, on the same backlog in the same run.
#
#   tests/bench/standby_bench.sh
#
# Steps: a throwaway PostgreSQL 17 primary (tests/tools/install-pg-npm.sh's
# server, through tests/tools/pg-sandbox.sh) with Clusterpedia's table and
# the publication walwatch streams (schema/publication.sql, `ww_bench`); a
# hot standby of it made by hand, as pg_basebackup would (the npm servers
# have none): a physical slot `standby1` on the primary, pg_backup_start in
# one psql session kept open, the data directory copied without pg_wal/*,
# pg_replslot/* and postmaster.pid, pg_backup_stop's label written as
# backup_label, standby.signal, primary_conninfo, primary_slot_name,
# hot_standby_feedback = on, wal_level = logical. Then every slot of the
# run, created before the load so each sees the whole backlog: per
# repetition R, replica count K and replica J one pgoutput slot on the
# primary (ww_p_R_K_J) and one on the standby (ww_s_R_K_J; each creation
# waits for a running-transactions record, which pg_log_standby_snapshot()
# on the primary writes). BENCH_ROWS Pods of ~3.5 KB of jsonb (drain_bench.sh's
# bench_pod() and bench_load(), taken from that script), one row per
# transaction, while nobody reads; the standby replays them all. Then per
# repetition, per K, in both placements (primary first in odd repetitions,
# standby first in even ones):
#   K walwatch processes (--plugin pgoutput --publication ww_bench), each on
#   its own slot, on the primary or on the standby (only --conninfo
#   differs), each with one watcher (tests/bench/watch_count.cc, as in
#   drain_bench.sh) from its slot's floor (every backlog row arrives as
#   ADDED); timed from their start to the last watcher's last event. Over
#   that window: the CPU of all the primary's server processes and of all
#   the standby's (drain_bench.sh's pg_cpu_ticks: the postmaster, its live
#   children, and the children that exited meanwhile), and of the walwatch
#   processes. Also the primary's CPU over the load (until the standby has
#   replayed it), and the part of it its walsender to the standby took: what
#   the standby itself costs the primary, whatever the replicas.
# Prints, per placement and K, the medians over the repetitions:
#   replicas K on=primary|standby rows=N drain_s=... primary_cpu_s=...
#     primary_cpu_s_per_replica=... standby_cpu_s=...
#     standby_cpu_s_per_replica=... walwatch_cpu_s_per_replica=...
# and a Markdown table of them (also to BENCH_REPORT if set).
#
# Environment:
#   BENCH_STANDBY_ROWS       rows in the backlog (default BENCH_ROWS, else 20000)
#   BENCH_STANDBY_REPS       repetitions, medians reported (default
#                            BENCH_REPS, else 2; even keeps the order balanced)
#   BENCH_STANDBY_REPLICAS   replica counts ("1 2 4")
#   BENCH_STANDBY_PG_BINDIR  the server's bin dir, PostgreSQL 16 or later
#                            (default: tests/tools/install-pg-npm.sh 17's)
#   BENCH_STANDBY_OUT        also write key=value results to this file, and
#                            the `replicas` lines (and each repetition's
#                            `run` lines) to the same name ending in .txt
#   BENCH_REPORT             also write the Markdown section to this file
#   BENCH_TIMEOUT (600)      seconds any one step may take
#   WALWATCH_BIN             default build-bench/walwatch, else build/walwatch
#   WATCH_COUNT_BIN          default watch_count next to WALWATCH_BIN
#   BENCH_KEEP=1             keep the work directory (logs) at the end
# Needs: node and npm for install-pg-npm.sh (make deps), Debian's psql.
# shellcheck disable=SC2317  # functions called from traps only
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
ROWS=${BENCH_STANDBY_ROWS:-${BENCH_ROWS:-20000}}
REPS=${BENCH_STANDBY_REPS:-${BENCH_REPS:-2}}
REPLICAS=${BENCH_STANDBY_REPLICAS:-1 2 4}
TIMEOUT=${BENCH_TIMEOUT:-600}
PUBLICATION=ww_bench
if [[ -z "${WALWATCH_BIN:-}" ]]; then
  WALWATCH_BIN=$ROOT/build-bench/walwatch
  [[ -x "$WALWATCH_BIN" ]] || WALWATCH_BIN=$ROOT/build/walwatch
fi
WATCH_COUNT_BIN=${WATCH_COUNT_BIN:-$(dirname "$WALWATCH_BIN")/watch_count}

# bench_lib.sh for cpu_ticks, pids_cpu_ticks, CLK_TCK and median;
# sandbox-lib.sh for as_owner, random_port, port_in_use, say and die.
# shellcheck source=tests/bench/bench_lib.sh
source tests/bench/bench_lib.sh
SANDBOX_NAME=standby_bench SANDBOX_USER=postgres SANDBOX_PACKAGE=postgresql-15
# shellcheck source=tests/tools/sandbox-lib.sh
source tests/tools/sandbox-lib.sh

[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_STANDBY_ROWS (or BENCH_ROWS) must be a positive integer"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_STANDBY_REPS (or BENCH_REPS) must be a positive integer"
for k in $REPLICAS; do
  [[ "$k" =~ ^[1-9][0-9]*$ ]] || die "BENCH_STANDBY_REPLICAS: '$k' is not a positive integer"
done
[[ -x "$WALWATCH_BIN" ]] || die "no walwatch binary ($WALWATCH_BIN); build it first"
[[ -x "$WATCH_COUNT_BIN" ]] || die "no watch_count binary ($WATCH_COUNT_BIN); build the bench targets first"
PG_BINDIR=${BENCH_STANDBY_PG_BINDIR:-$(tests/tools/install-pg-npm.sh 17)} ||
  die "cannot install PostgreSQL 17 (tests/tools/install-pg-npm.sh 17, above)"
PG_VERSION=$(as_owner "$PG_BINDIR/postgres" --version | awk '{ print $3 }')
((${PG_VERSION%%.*} >= 16)) ||
  die "$PG_BINDIR/postgres is PostgreSQL $PG_VERSION; decoding on a standby needs 16 or later"

DIR=""
SB=""                # the standby's directory
WALWATCH_PIDS=()     # of the drain under way, for the cleanup
cleanup() {
  local rc=$? pid
  set +e
  trap '' INT TERM
  for pid in "${WALWATCH_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  if [[ -n "$DIR" ]]; then
    if [[ -n "$SB" && -f "$SB/data/postmaster.pid" ]]; then
      as_owner "$PG_BINDIR/pg_ctl" -D "$SB/data" stop -m immediate -w -t 30 >/dev/null 2>&1
    fi
    WALWATCH_PG_BINDIR=$PG_BINDIR "$ROOT/tests/tools/pg-sandbox.sh" stop "$DIR/pg" >/dev/null 2>&1
    if [[ "${BENCH_KEEP:-}" == 1 ]]; then
      say "kept $DIR"
    else
      rm -rf -- "$DIR"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_ns() { date +%s%N; }

DIR=$(mktemp -d /tmp/ww-standby.XXXXXX)
chmod 0755 "$DIR"
sandbox_env=$(WALWATCH_PG_BINDIR=$PG_BINDIR "$ROOT/tests/tools/pg-sandbox.sh" start "$DIR/pg")  # set -e stops here on failure
eval "$sandbox_env"
P_HOST=$PGHOST P_PORT=$PGPORT
P_CONNINFO="host=$P_HOST port=$P_PORT dbname=postgres user=postgres"
psql_p() { psql -X -qAt -v ON_ERROR_STOP=1 -h "$P_HOST" -p "$P_PORT" -U postgres -d postgres "$@"; }
psql_s() { psql -X -qAt -v ON_ERROR_STOP=1 -h "$SB" -p "$S_PORT" -U postgres -d postgres "$@"; }

psql_p -q -f "$ROOT/schema/clusterpedia.sql"
psql_p -q -v publication="$PUBLICATION" -f "$ROOT/schema/publication.sql" >/dev/null
# The Pods and the load procedure of drain_bench.sh, so that both measure
# the same rows: its first here-document (bench_pod, bench_load).
POD_SQL=$(sed -n "/^psql_q <<'SQL'\$/,/^SQL\$/{p;/^SQL\$/q}" tests/bench/drain_bench.sh | sed '1d;$d')
[[ "$POD_SQL" == *"CREATE FUNCTION bench_pod"* && "$POD_SQL" == *"CREATE PROCEDURE bench_load"* ]] ||
  die "tests/bench/drain_bench.sh no longer has bench_pod() and bench_load() in its first psql_q <<'SQL' here-document"
psql_p -q <<<"$POD_SQL"
OBJ_BYTES=$(psql_p -c "SELECT avg(length(bench_pod(i)::text))::int FROM generate_series(1, 200) AS i")

# --- the standby -------------------------------------------------------------

# Waits until the standby has replayed the primary's WAL up to LSN.
wait_replayed() {
  local lsn=$1 i
  for ((i = 0; i < TIMEOUT * 20; i++)); do
    [[ "$(psql_s -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn" 2>/dev/null)" == t ]] && return 0
    sleep 0.05
  done
  die "the standby did not replay up to $lsn in $TIMEOUT s (log: $SB/log/postgresql.log)"
}

make_standby() {
  local pdata=$P_HOST/data sdata=$SB/data start label rc=0 i
  mkdir -p "$sdata" "$SB/log"
  psql_p -c "SELECT pg_create_physical_replication_slot('standby1', true)" >/dev/null
  # One session from pg_backup_start to pg_backup_stop: the backup lasts as
  # long as it does.
  coproc BACKUP { exec psql -X -qAt -v ON_ERROR_STOP=1 -h "$P_HOST" -p "$P_PORT" -U postgres -d postgres 2>"$DIR/backup.err"; }
  echo "SELECT pg_backup_start('standby_bench', true);" >&"${BACKUP[1]}"
  read -r -t "$TIMEOUT" start <&"${BACKUP[0]}" || { cat "$DIR/backup.err" >&2; die "pg_backup_start failed"; }
  # What pg_basebackup leaves out: the contents of these directories, and
  # these files of the top one. tar's status 1 is a file that changed or
  # vanished while it was read, which the WAL from the backup's start mends.
  tar -C "$pdata" --warning=no-file-changed --warning=no-file-removed \
    --exclude='./pg_wal/*' --exclude='./pg_replslot/*' --exclude='./pg_dynshmem/*' \
    --exclude='./pg_notify/*' --exclude='./pg_serial/*' --exclude='./pg_snapshots/*' \
    --exclude='./pg_stat_tmp/*' --exclude='./pg_subtrans/*' --exclude=./postmaster.pid \
    --exclude=./postmaster.opts --exclude=./backup_label --exclude=./tablespace_map \
    -cf - . | tar -C "$sdata" -xf - || rc=$?
  ((rc <= 1)) || die "copying $pdata to $sdata failed (tar status $rc)"
  echo "SELECT translate(encode(convert_to(labelfile, 'UTF8'), 'base64'), E'\\n', '') FROM pg_backup_stop(false);" >&"${BACKUP[1]}"
  read -r -t "$TIMEOUT" label <&"${BACKUP[0]}" || { cat "$DIR/backup.err" >&2; die "pg_backup_stop failed"; }
  echo '\q' >&"${BACKUP[1]}"
  wait "$BACKUP_PID" || true
  base64 -d <<<"$label" >"$sdata/backup_label" || die "pg_backup_stop's label is not base64: $label"
  : >"$sdata/standby.signal"
  cat >>"$sdata/postgresql.conf" <<EOF

# ---- standby_bench: a hot standby of $P_HOST (backup from $start) ----
unix_socket_directories = '$SB'
primary_conninfo = 'host=$P_HOST port=$P_PORT user=postgres application_name=standby1'
primary_slot_name = 'standby1'
hot_standby = on
hot_standby_feedback = on
wal_level = logical
include_if_exists = 'standby_port.conf'
EOF
  if ((IS_ROOT)); then chown -R postgres:postgres "$SB"; fi
  chmod 0700 "$sdata"
  for ((i = 0; i < 20; i++)); do
    S_PORT=$(random_port)
    ! port_in_use "$S_PORT" || continue
    echo "port = $S_PORT" >"$sdata/standby_port.conf"
    if ((IS_ROOT)); then chown postgres:postgres "$sdata/standby_port.conf"; fi
    if as_owner "$PG_BINDIR/pg_ctl" -D "$sdata" -l "$SB/log/postgresql.log" -w -t "$TIMEOUT" start >/dev/null; then
      S_CONNINFO="host=$SB port=$S_PORT dbname=postgres user=postgres"
      return 0
    fi
    grep -q 'Address already in use' "$SB/log/postgresql.log" || break
  done
  tail -n 30 "$SB/log/postgresql.log" >&2
  die "the standby did not start (log: $SB/log/postgresql.log)"
}

SB=$DIR/sb
S_PORT="" S_CONNINFO=""
say "PostgreSQL $PG_VERSION: primary in $P_HOST on port $P_PORT; making a standby of it in $SB ..."
make_standby
wait_replayed "$(psql_p -c "SELECT pg_current_wal_lsn()")"
[[ "$(psql_p -c "SELECT state FROM pg_stat_replication WHERE application_name = 'standby1'")" == streaming ]] ||
  die "the standby does not stream from the primary (log: $SB/log/postgresql.log)"
say "standby on port $S_PORT, streaming through slot standby1"

# --- the slots, then the load ------------------------------------------------

# CPU ticks of one server's processes (bench_lib.sh's pg_cpu_ticks, for
# the data directory given).
server_cpu_ticks() {
  local pm
  pm=$(head -n 1 "$1/postmaster.pid")
  # shellcheck disable=SC2046  # a list of pids
  echo $(($(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat") + $(pids_cpu_ticks $(pgrep -P "$pm"))))
}


slot_names() {  # PREFIX: every slot of that placement, one a line
  local r k j
  for ((r = 1; r <= REPS; r++)); do
    for k in $REPLICAS; do
      for ((j = 1; j <= k; j++)); do echo "${1}_${r}_${k}_$j"; done
    done
  done
}
create_sql() { sed "s/.*/SELECT pg_create_logical_replication_slot('&', 'pgoutput');/"; }
slot_names ww_p | create_sql | psql_p >/dev/null
# On the standby each creation waits for the primary's next running-
# transactions record: write one until the last slot is there.
slot_names ww_s | create_sql | psql_s >/dev/null 2>"$DIR/slots.err" &
creator=$!
t_end=$(($(date +%s) + TIMEOUT))
while kill -0 "$creator" 2>/dev/null; do
  (($(date +%s) < t_end)) || { kill "$creator"; die "creating the standby's slots took over $TIMEOUT s"; }
  psql_p -c "SELECT pg_log_standby_snapshot()" >/dev/null
  sleep 0.05
done
wait "$creator" || { cat "$DIR/slots.err" >&2; die "creating the standby's slots failed"; }
say "created $(slot_names ww_p | wc -l) slots on the primary and as many on the standby"

say "loading $ROWS Pods of ~$OBJ_BYTES bytes of jsonb, one row per transaction ..."
# What the writes themselves cost the primary, and what of it streaming
# them to the standby did (its walsender): the standby's price on the
# primary, paid once whatever the replicas.
STREAMER=$(psql_p -c "SELECT pid FROM pg_stat_replication WHERE application_name = 'standby1'")
l0=$(server_cpu_ticks "$P_HOST/data") ws0=$(cpu_ticks "$STREAMER")
t0=$(now_ns)
timeout "$TIMEOUT" psql -X -q -v ON_ERROR_STOP=1 -h "$P_HOST" -p "$P_PORT" -U postgres -d postgres \
  -c "CALL bench_load(1, $ROWS, 1)"
t1=$(now_ns)
LOAD_RPS=$(awk -v n="$ROWS" -v ns=$((t1 - t0)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
END_LSN=$(psql_p -c "SELECT pg_current_wal_lsn()")
WAL_BYTES=$(psql_p -c "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'ww_p_1_${REPLICAS%% *}_1'")
wait_replayed "$END_LSN"
l1=$(server_cpu_ticks "$P_HOST/data") ws1=$(cpu_ticks "$STREAMER")
LOAD_CPU=$(awk -v t=$((l1 - l0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
STREAMER_CPU=$(awk -v t=$((ws1 - ws0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
say "loaded at $LOAD_RPS rows/s; backlog of $WAL_BYTES bytes of WAL up to $END_LSN, replayed on the standby"
say "the load cost the primary $LOAD_CPU s of CPU, of which $STREAMER_CPU s its walsender streaming to the standby"

# --- the drains ----------------------------------------------------------------

: >"$DIR/runs.txt"
# One drain: K walwatch replicas on placement ON (primary or standby) in
# repetition R; appends its `run` line to runs.txt.
run_drain() {
  local on=$1 r=$2 k=$3 conninfo=$P_CONNINFO prefix=ww_p query=psql_p j c slot sock floor wpid
  local -a counters=() floors=()
  if [[ "$on" == standby ]]; then conninfo=$S_CONNINFO prefix=ww_s query=psql_s; fi
  for ((j = 1; j <= k; j++)); do
    floors+=("$("$query" -c "SELECT (confirmed_flush_lsn - '0/0'::pg_lsn)::numeric - 1
                             FROM pg_replication_slots WHERE slot_name = '${prefix}_${r}_${k}_$j'")")
  done
  WALWATCH_PIDS=()
  local p0 s0 t0 p1 s1 t1 w1
  p0=$(server_cpu_ticks "$P_HOST/data") s0=$(server_cpu_ticks "$SB/data")
  t0=$(now_ns)
  for ((j = 1; j <= k; j++)); do
    slot=${prefix}_${r}_${k}_$j sock=$DIR/$slot.sock floor=${floors[j - 1]}
    "$WALWATCH_BIN" --conninfo "$conninfo" --slot "$slot" --plugin pgoutput \
      --publication "$PUBLICATION" --socket "$sock" --metrics-address= \
      --max-log-bytes 8Gi --max-watcher-backlog 8Gi --log-level warn >"$DIR/$slot.log" 2>&1 &
    wpid=$!
    WALWATCH_PIDS+=("$wpid")
    (for ((i = 0; i < TIMEOUT * 100; i++)); do
       [[ -S "$sock" ]] && break
       kill -0 "$wpid" 2>/dev/null || { echo "walwatch exited:"; cat "$DIR/$slot.log"; exit 1; }
       sleep 0.01
     done
     exec "$WATCH_COUNT_BIN" --socket "$sock" --count "$ROWS" --timeout "$TIMEOUT" \
       --path "/api/v1/pods?watch=1&resourceVersion=$floor") >"$DIR/$slot.out" 2>&1 &
    counters+=("$!")
  done
  for c in "${counters[@]}"; do
    wait "$c" || { tail -n 20 "$DIR"/"${prefix}_${r}_${k}"_*.out >&2; die "a replica's watcher failed ($k replicas on the $on, repetition $r)"; }
  done
  t1=$(now_ns)
  p1=$(server_cpu_ticks "$P_HOST/data") s1=$(server_cpu_ticks "$SB/data")
  w1=$(pids_cpu_ticks "${WALWATCH_PIDS[@]}")
  for wpid in "${WALWATCH_PIDS[@]}"; do kill -TERM "$wpid" 2>/dev/null || true; wait "$wpid" 2>/dev/null || true; done
  WALWATCH_PIDS=()
  awk -v r="$r" -v k="$k" -v on="$on" -v ns=$((t1 - t0)) -v p=$((p1 - p0)) -v s=$((s1 - s0)) -v w="$w1" -v hz="$CLK_TCK" \
    'BEGIN { printf "run %d replicas %d on=%s drain_s=%.2f primary_cpu_s=%.2f standby_cpu_s=%.2f walwatch_cpu_s=%.2f\n", r, k, on, ns / 1e9, p / hz, s / hz, w / hz }' |
    tee -a "$DIR/runs.txt" | sed 's/^/standby_bench: /' >&2
}

for ((r = 1; r <= REPS; r++)); do
  order="primary standby"
  ((r % 2)) || order="standby primary"
  for k in $REPLICAS; do
    for on in $order; do run_drain "$on" "$r" "$k"; done
  done
done

# --- medians, report -----------------------------------------------------------

# Median over the repetitions of KEY for placement ON and K replicas.
med() {
  awk -v on="on=$1" -v k="$2" -v key="$3" '$5 == on && $4 == k { for (i = 6; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) print kv[2] } }' "$DIR/runs.txt" |
    median | awk '{ printf "%.2f", $1 }'
}
all_of() {
  awk -v on="on=$1" -v k="$2" -v key="$3" '$5 == on && $4 == k { for (i = 6; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) { printf "%s%s", sep, kv[2]; sep = " " } } }' "$DIR/runs.txt"
}
per() { awk -v a="$1" -v k="$2" 'BEGIN { printf "%.2f", a / k }'; }

: >"$DIR/lines.txt"
: >"$DIR/kv.txt"
for k in $REPLICAS; do
  for on in primary standby; do
    d=$(med "$on" "$k" drain_s) p=$(med "$on" "$k" primary_cpu_s) s=$(med "$on" "$k" standby_cpu_s)
    w=$(med "$on" "$k" walwatch_cpu_s)
    echo "replicas $k on=$on rows=$ROWS drain_s=$d primary_cpu_s=$p primary_cpu_s_per_replica=$(per "$p" "$k") standby_cpu_s=$s standby_cpu_s_per_replica=$(per "$s" "$k") walwatch_cpu_s_per_replica=$(per "$w" "$k")" >>"$DIR/lines.txt"
    for key in drain_s primary_cpu_s standby_cpu_s walwatch_cpu_s; do
      echo "${on}_${k}_$key=$(med "$on" "$k" "$key")"
      echo "${on}_${k}_${key}_all=\"$(all_of "$on" "$k" "$key")\""
    done >>"$DIR/kv.txt"
    echo "${on}_${k}_primary_cpu_s_per_replica=$(per "$p" "$k")" >>"$DIR/kv.txt"
    echo "${on}_${k}_standby_cpu_s_per_replica=$(per "$s" "$k")" >>"$DIR/kv.txt"
  done
done
cat "$DIR/lines.txt"

{
  echo
  echo "Decoding on a hot standby (\`tests/bench/standby_bench.sh\`), PostgreSQL $PG_VERSION, --plugin pgoutput: $ROWS Pods of ~$OBJ_BYTES bytes of jsonb, one row per transaction ($WAL_BYTES bytes of WAL; loaded at $LOAD_RPS rows/s), drained by K walwatch replicas at once (a slot each, one watcher each), the slots on the primary or on a hot standby of it; CPU of all of each server's processes over the drain; median of $REPS, the placements alternating:"
  echo
  echo "| replicas | slots on | drain, s | primary CPU, s | per replica | standby CPU, s | per replica | walwatch CPU per replica, s |"
  echo "|---|---|---|---|---|---|---|---|"
  while read -r _ k on _ d p pr s sr w; do
    echo "| $k | ${on#on=} | ${d#*=} | ${p#*=} | ${pr#*=} | ${s#*=} | ${sr#*=} | ${w#*=} |"
  done <"$DIR/lines.txt"
  echo
  echo "The load itself cost the primary $LOAD_CPU s of CPU (all its processes, until the standby had replayed it), of which $STREAMER_CPU s its walsender streaming the WAL to the standby: what a standby costs the primary, once, whatever the number of replicas decoding on it."
  echo
  echo "Every repetition (drain s / primary CPU s / standby CPU s):"
  echo
  for k in $REPLICAS; do
    for on in primary standby; do
      echo "- $k on the $on: $(all_of "$on" "$k" drain_s) / $(all_of "$on" "$k" primary_cpu_s) / $(all_of "$on" "$k" standby_cpu_s)"
    done
  done
} >"$DIR/report.md"
cat "$DIR/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$DIR/report.md" "$BENCH_REPORT"
if [[ -n "${BENCH_STANDBY_OUT:-}" ]]; then
  {
    echo "rows=$ROWS"
    echo "reps=$REPS"
    echo "replicas=\"$REPLICAS\""
    echo "pg_version=$PG_VERSION"
    echo "object_bytes=$OBJ_BYTES"
    echo "wal_bytes=$WAL_BYTES"
    echo "load_rows_per_s=$LOAD_RPS"
    echo "load_primary_cpu_s=$LOAD_CPU"
    echo "load_standby_walsender_cpu_s=$STREAMER_CPU"
    cat "$DIR/kv.txt"
  } >"$BENCH_STANDBY_OUT"
  cat "$DIR/lines.txt" "$DIR/runs.txt" >"${BENCH_STANDBY_OUT%.*}.txt"
fi
