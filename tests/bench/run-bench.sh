#!/usr/bin/env bash
# `make bench`: builds the benchmarks, runs them with the peers (pg_recvlogical,
# etcd, kine) in the same run, checks the goals, and writes the report:
#   BENCHMARKS.md             rewritten: one table of every figure (goal,
#                             latest value, met or missed, commit, command),
#                             the plots, each part's time
#   tests/bench/plots/*.svg   redrawn (tests/bench/plots.sh, gnuplot)
#   tests/bench/results/      the latest figures of each part that ran, which
#                             the summary and the plots are made from
#   tests/bench/HISTORY.md    this run's dated section appended
#
#   tests/bench/run-bench.sh
#
# 1. cmake -DWALWATCH_BUILD_BENCH=ON in build-bench/ (the build type `make`
#    ships, RelWithDebInfo), the bench targets and walwatch;
# 2. decoder_bench, medians (tests/bench/decoder_bench.cc);
# 2a. quiet_watchers_bench, medians: what a hot resource's events cost 1,000
#    watchers of quiet resources in the event log;
# 3. tests/bench/drain_bench.sh: backlog drain, walwatch vs pg_recvlogical,
#    at several backlog sizes, and 1, 2, 4, 8 replicas on one primary;
# 4. tests/bench/fanout_bench.sh: commit -> client latency and walwatch's CPU
#    with 1 to 5,000 watchers at 100 to 5,000 commits/s, and the mixed
#    Clusterpedia workload at 1,000 and 5,000 selective watchers;
# 4a. tests/bench/ceiling_bench.sh: the same fan-out from an ideal server;
# 5. tests/bench/memory_bench.sh: RSS per idle watcher, event-log RSS per
#    wire byte;
# 6. tests/bench/replay_bench.sh: time to rebuild the window after a restart;
# 7. tests/bench/quiet_e2e_bench.sh: walwatch's CPU per hot commit with and
#    without 1,000 watchers of quiet resources, and their 410s (must be 0);
# 8. tests/bench/etcd_bench.sh: etcd against walwatch, same objects and
#    watchers; etcd watched through its Go client (tests/bench/etcdwatch,
#    built with Go): a connection per watcher, and multiplexed; fresh
#    servers every run (skipped, and said so, without etcd);
# 9. tests/bench/kine_bench.sh: kine (k3s's etcd API over SQL, one global
#    poll every 1 s / 100 ms) against walwatch on one PostgreSQL, same
#    objects, rate and watchers (builds kine with Go);
# 10. tests/bench/mdrain_bench.sh: backlog drain on MariaDB, walwatch
#    --source mysql against mariadb-binlog, from the same binlog position;
# 11. tests/bench/mfanout_bench.sh: commit -> client latency for 1,000
#    watchers at 2,000 commits/s on MariaDB (fanout_bench.sh, BENCH_DB=mysql);
# 12. tests/bench/standby_bench.sh: 1, 2, 4 replicas decoding one backlog with
#    their slots on the primary or on a hot standby (PostgreSQL 17, pgoutput),
#    the primary's and the standby's CPU;
# 13. tests/bench/relist_storm_bench.sh: N WatchLists of one resource at once
#    (a relist storm) against the same bytes written from memory to the same
#    readers (storm_ceiling), with the state reads, PostgreSQL's CPU and
#    walwatch's peak RSS;
# 14. tests/bench/debezium_bench.sh: Debezium (embedded engine, PostgreSQL
#    connector, pgoutput) beside walwatch: drain_bench.sh's backlog, and
#    commit -> consumer latency at 500 commits/s (skipped, and said so,
#    without a JDK and Maven).
# Sizes are cut to fit 30 minutes on 2 cores (each part's time is printed and
# reported); every comparison is a ratio of figures from the same run.
# The soak is separate: `make soak` (tests/bench/soak.sh).
#
# Environment:
#   BENCH_ONLY=decoder|quiet|drain|fanout|ceiling|memory|replay|quiet_e2e|etcd|kine|mdrain|mfanout|standby|relist_storm|debezium
#                              run only these (a comma-separated list); the
#                              summary keeps the other parts' latest figures
#   BENCH_REPETITIONS (3)      decoder_bench's and quiet_watchers_bench's
#                              repetitions
#   BENCH_MIN_TIME (0.2)       their seconds per repetition
#   QUIET_BENCH_LOG_MB (256), QUIET_BENCH_EVENT_BYTES (1024): see
#                              quiet_watchers_bench.cc
#   BENCH_FILTER               decoder_bench --benchmark_filter
#   BENCH_NO_APPEND=1          print the report, leave BENCHMARKS.md, the
#                              plots, results/ and HISTORY.md alone
#   BENCH_BUILD_DIR (build-bench), JOBS (2), WALWATCH_MARCH (haswell on x86-64)
#   BENCH_ROWS, BENCH_TXN, BENCH_BATCH, BENCH_REPS, BENCH_DRAIN_*: see
#                              drain_bench.sh
#   BENCH_FANOUT_*, BENCH_CEILING_*, BENCH_MEMORY_*, BENCH_REPLAY_*,
#   BENCH_QUIET_E2E_*, BENCH_ETCD_*, BENCH_KINE_*, BENCH_MDRAIN_*, BENCH_MFANOUT_*, BENCH_STANDBY_*, BENCH_STORM_*, BENCH_DEBEZIUM_*,
#   BENCH_OBJECT_BYTES: see each script; run-bench.sh sets the sizes below
#                              where they are not set
# shellcheck disable=SC2154  # the drain's figures come from `source drain.env`
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BENCH_BUILD_DIR:-build-bench}
JOBS=${JOBS:-2}
REPETITIONS=${BENCH_REPETITIONS:-3}
MIN_TIME=${BENCH_MIN_TIME:-0.2}
ONLY=${BENCH_ONLY:-}
say() { echo "run-bench: $*" >&2; }

PARTS=(decoder quiet drain fanout ceiling memory replay quiet_e2e etcd kine mdrain mfanout standby relist_storm debezium)
for part in ${ONLY//,/ }; do
  [[ " ${PARTS[*]} " == *" $part "* ]] ||
    { say "BENCH_ONLY: $part is not one of ${PARTS[*]}"; exit 2; }
done
# Whether a part runs: all of them unless BENCH_ONLY names some.
want() { [[ -z "$ONLY" || ",${ONLY// /,}," == *",$1,"* ]]; }

WORK=$(mktemp -d /tmp/ww-runbench.XXXXXX)
trap 'rm -rf -- "$WORK"' EXIT
mkdir -p "$WORK/results"

# The full run's sizes (30 minutes on 2 cores, the build included): each
# cut where its ratios stay meaningful. Set any of them to override.
: "${BENCH_ROWS:=40000}" "${BENCH_REPS:=3}"
: "${BENCH_DRAIN_SIZES:=5000 10000 20000}" "${BENCH_DRAIN_REPLICAS:=1 2 4 8}"
: "${BENCH_DRAIN_REPLICA_ROWS:=10000}"
: "${BENCH_FANOUT_WATCHERS:=1 100 1000 5000}" "${BENCH_FANOUT_RATES:=100 1000 2000 5000}"
: "${BENCH_FANOUT_EXTRA=}" "${BENCH_FANOUT_SPREAD_RATES=}" "${BENCH_FANOUT_MIXED=1000 5000}"
: "${BENCH_FANOUT_SECONDS:=4}" "${BENCH_FANOUT_REPS:=1}" "${BENCH_FANOUT_GOAL_REPS:=3}"
: "${BENCH_FANOUT_DRAIN:=10}"
: "${BENCH_CEILING_CASES:=1000:2000:0:1 1000:2000:0:1:sendfile}" "${BENCH_CEILING_REPS:=2}"
: "${BENCH_CEILING_SECONDS:=4}"
: "${BENCH_MEMORY_WATCHERS:=100 1000 5000}" "${BENCH_MEMORY_REPS:=1}"
: "${BENCH_MEMORY_ROWS:=20000}" "${BENCH_MEMORY_OBJECT_BYTES:=1024 4096}"
: "${BENCH_REPLAY_ROWS:=20000}" "${BENCH_REPLAY_REPS:=2}"
: "${BENCH_QUIET_E2E_SECONDS:=8}" "${BENCH_QUIET_E2E_REPS:=2}" "${BENCH_QUIET_E2E_FILL:=20000}"
: "${BENCH_MDRAIN_ROWS:=40000}" "${BENCH_MDRAIN_REPS:=3}"
: "${BENCH_MFANOUT_WATCHERS:=1000}" "${BENCH_MFANOUT_RATE:=2000}" "${BENCH_MFANOUT_SECONDS:=4}"
: "${BENCH_MFANOUT_REPS:=3}"
: "${BENCH_STANDBY_ROWS:=20000}" "${BENCH_STANDBY_REPS:=2}" "${BENCH_STANDBY_REPLICAS:=1 2 4}"
: "${BENCH_KINE_REPS:=3}" "${BENCH_KINE_SECONDS:=6}"
: "${BENCH_STORM_ROWS:=20000}" "${BENCH_STORM_NS:=1 10 50 100}" "${BENCH_STORM_REPS:=1}"
: "${BENCH_DEBEZIUM_ROWS:=40000}" "${BENCH_DEBEZIUM_REPS:=2}" "${BENCH_DEBEZIUM_SECONDS:=10}"
: "${BENCH_DEBEZIUM_POLL_MS:=10}"
: "${BENCH_ETCD_REPS:=3}" "${BENCH_ETCD_SECONDS:=5}"
export BENCH_ROWS BENCH_REPS BENCH_DRAIN_SIZES BENCH_DRAIN_REPLICAS BENCH_DRAIN_REPLICA_ROWS \
  BENCH_FANOUT_WATCHERS BENCH_FANOUT_RATES BENCH_FANOUT_EXTRA BENCH_FANOUT_SPREAD_RATES \
  BENCH_FANOUT_MIXED BENCH_FANOUT_SECONDS BENCH_FANOUT_REPS BENCH_FANOUT_GOAL_REPS \
  BENCH_FANOUT_DRAIN BENCH_CEILING_CASES BENCH_CEILING_REPS BENCH_CEILING_SECONDS \
  BENCH_MEMORY_WATCHERS BENCH_MEMORY_REPS BENCH_MEMORY_ROWS BENCH_MEMORY_OBJECT_BYTES \
  BENCH_REPLAY_ROWS BENCH_REPLAY_REPS BENCH_QUIET_E2E_SECONDS BENCH_QUIET_E2E_REPS \
  BENCH_QUIET_E2E_FILL BENCH_MDRAIN_ROWS BENCH_MDRAIN_REPS BENCH_MFANOUT_WATCHERS \
  BENCH_MFANOUT_RATE BENCH_MFANOUT_SECONDS BENCH_MFANOUT_REPS \
  BENCH_STANDBY_ROWS BENCH_STANDBY_REPS BENCH_STANDBY_REPLICAS \
  BENCH_KINE_REPS BENCH_KINE_SECONDS BENCH_STORM_ROWS BENCH_STORM_NS BENCH_STORM_REPS \
  BENCH_DEBEZIUM_ROWS BENCH_DEBEZIUM_REPS BENCH_DEBEZIUM_SECONDS BENCH_DEBEZIUM_POLL_MS \
  BENCH_ETCD_REPS BENCH_ETCD_SECONDS

# Each part's wall time, for the budget: "part seconds" lines.
: >"$WORK/times.txt"
T_PART=0
part_begin() { T_PART=$(date +%s); say "part $1 ..."; }
part_end() {
  local took=$(($(date +%s) - T_PART))
  echo "$1 $took" >>"$WORK/times.txt"
  say "part $1 took $took s"
}
T_START=$(date +%s)

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# What is measured is what is built now: the commit, and whether changes to
# what is built (others edit tests meanwhile) were in the working tree.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD -- cdc watchserver schema tests/bench CMakeLists.txt 2>/dev/null; then
  commit+=" (with uncommitted changes in the working tree)"
fi
part_begin build
# shellcheck source=tests/bench/bench_lib.sh
source tests/bench/bench_lib.sh
bench_build "$BUILD_DIR" "$JOBS" decoder_bench quiet_watchers_bench \
  watch_count bench_writer fanout_client fanout_ceiling storm_ceiling walwatch
part_end build

DECODER_CMD=("$BUILD_DIR/decoder_bench" "--benchmark_repetitions=$REPETITIONS"
  "--benchmark_report_aggregates_only=true" "--benchmark_min_time=$MIN_TIME")
[[ -n "${BENCH_FILTER:-}" ]] && DECODER_CMD+=("--benchmark_filter=$BENCH_FILTER")

QUIET_CMD=("$BUILD_DIR/quiet_watchers_bench" "--benchmark_repetitions=$REPETITIONS"
  "--benchmark_report_aggregates_only=true" "--benchmark_min_time=$MIN_TIME")
QUIET_ENV="QUIET_BENCH_LOG_MB=${QUIET_BENCH_LOG_MB:-256} QUIET_BENCH_EVENT_BYTES=${QUIET_BENCH_EVENT_BYTES:-1024}"

DRAIN_ENV="BENCH_ROWS=$BENCH_ROWS BENCH_TXN=${BENCH_TXN:-single} BENCH_REPS=$BENCH_REPS"
DRAIN_ENV+=" BENCH_DRAIN_SIZES='$BENCH_DRAIN_SIZES' BENCH_DRAIN_REPLICAS='$BENCH_DRAIN_REPLICAS'"
DRAIN_ENV+=" BENCH_DRAIN_REPLICA_ROWS=$BENCH_DRAIN_REPLICA_ROWS"
[[ "${BENCH_TXN:-single}" == batch ]] && DRAIN_ENV+=" BENCH_BATCH=${BENCH_BATCH:-1000}"

if want decoder; then
  part_begin decoder
  say "running ${DECODER_CMD[*]} ..."
  "${DECODER_CMD[@]}" --benchmark_out="$WORK/decoder.json" \
    --benchmark_out_format=json
  part_end decoder
fi
if want quiet; then
  part_begin quiet
  say "running $QUIET_ENV ${QUIET_CMD[*]} ..."
  # shellcheck disable=SC2086  # QUIET_ENV is NAME=value words
  env $QUIET_ENV "${QUIET_CMD[@]}" --benchmark_out="$WORK/quiet.json" \
    --benchmark_out_format=json
  # The appender again with no watcher on either side: what the same ratio
  # shows from noise alone on this machine.
  say "running QUIET_BENCH_WATCHERS=0 $QUIET_ENV ${QUIET_CMD[*]} --benchmark_filter=BM_HotAppend ..."
  # shellcheck disable=SC2086  # QUIET_ENV is NAME=value words
  env QUIET_BENCH_WATCHERS=0 $QUIET_ENV "${QUIET_CMD[@]}" \
    --benchmark_filter=BM_HotAppend --benchmark_out="$WORK/quiet_aa.json" \
    --benchmark_out_format=json
  part_end quiet
fi
if want drain; then
  part_begin drain
  say "running $DRAIN_ENV tests/bench/drain_bench.sh ..."
  WALWATCH_BIN="$ROOT/$BUILD_DIR/walwatch" BENCH_DRAIN_OUT="$WORK/results/drain.env" \
    tests/bench/drain_bench.sh
  part_end drain
fi
# The other benchmarks: each prints its own section and writes its figures.
for part in fanout ceiling memory replay quiet_e2e etcd kine mdrain mfanout standby relist_storm debezium; do
  want "$part" || continue
  part_begin "$part"
  WALWATCH_BIN="$ROOT/$BUILD_DIR/walwatch" BENCH_REPORT="$WORK/$part.md" \
    BENCH_OUT="$WORK/results/$part.txt" BENCH_FANOUT_OUT="$WORK/results/fanout.txt" \
    BENCH_STANDBY_OUT="$WORK/results/standby.env" \
    "tests/bench/${part}_bench.sh"
  part_end "$part"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the report ---------------------------------------------------------------

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
pg=$(/usr/lib/postgresql/15/bin/postgres --version 2>/dev/null | awk '{ print $3 }' || true)
simdjson=$(dpkg-query -W -f '${Version}' libsimdjson-dev 2>/dev/null || echo '?')
march=$(awk -F= '/^WALWATCH_MARCH:/ { print $2 }' "$BUILD_DIR/CMakeCache.txt")
build_type=$(awk -F= '/^CMAKE_BUILD_TYPE:/ { print $2 }' "$BUILD_DIR/CMakeCache.txt")

# Medians (and the coefficient of variation of bytes/s) from decoder_bench's
# JSON: one line "family size op bytes_per_s items_per_s line_bytes obj_bytes cv
# pgoutput_over_wal2json" (the last 0 but for PgoutputDecode: its time per row
# over wal2json's on the same rows).
decoder_rows() {
  awk '
    /"name":/ { gsub(/[",]/, "", $2); name = $2 }
    /"aggregate_name":/ { gsub(/[",]/, "", $2); agg = $2 }
    /"bytes_per_second":/ { gsub(/,/, "", $2); bps = $2 }
    /"items_per_second":/ { gsub(/,/, "", $2); ips = $2 }
    /"row_line_bytes":/ { gsub(/,/, "", $2); line = $2 }
    /"object_bytes":/ { gsub(/,/, "", $2); obj = $2 }
    /"pgoutput_over_wal2json":/ { gsub(/,/, "", $2); pw = $2 }
    /^    }/ {
      if (name != "") {
        base = name; sub(/_(median|mean|stddev|cv)$/, "", base)
        if (agg == "median") { m[base] = bps " " ips " " line " " obj; r[base] = (pw == "" ? 0 : pw); order[++n] = base }
        if (agg == "cv") cv[base] = bps
      }
      name = ""; agg = ""; pw = ""
    }
    END {
      for (i = 1; i <= n; i++) {
        b = order[i]; split(b, p, "/")
        print p[1], p[2], p[3], m[b], (b in cv ? cv[b] : 0), r[b]
      }
    }' "$WORK/decoder.json"
}

decoder_table() {
  decoder_rows | awk '
    { key = $2 " " $3; if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
      bps[key, $1] = $4; ips[key, $1] = $5; line[key] = $6; obj[key] = $7
      cv[key, $1] = $8 }
    function gb(x) { return sprintf("%.2f", x / 1e9) }
    END {
      print "| object (jsonb text) | row | row line | raw DOM | raw On-Demand | **Decode** | Decode / On-Demand | raw On-Demand nested | **Decode+Build** | Decode+Build events/s | Decode+Build / nested | decoder target |"
      print "|---|---|---|---|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        k = keys[i]; split(k, p, " ")
        d = bps[k, "Decode"]; od = bps[k, "SimdjsonOnDemand"]
        nest = bps[k, "SimdjsonOnDemandNested"]; full = bps[k, "DecodeBuild"]
        verdict = (d >= 1e9 || (od > 0 && d >= od / 2)) ? "met" : sprintf("missed: %.0f%% below 1 GB/s", 100 * (1 - d / 1e9))
        if (d < 1e9 && od > 0 && d >= od / 2) verdict = sprintf("met (%.2f of raw)", d / od)
        printf "| %.1f KB | %s | %.1f KB | %s | %s | **%s** | %.2f | %s | **%s** | %.0fk | %.2f | %s |\n",
          obj[k] / 1000, p[2], line[k] / 1000, gb(bps[k, "SimdjsonDom"]), gb(od), gb(d),
          (od > 0 ? d / od : 0), gb(nest), gb(full), ips[k, "DecodeBuild"] / 1000,
          (nest > 0 ? full / nest : 0), verdict
      }
    }'
}

# quiet_watchers_bench's aggregates in JSON file $1: one line "benchmark
# aggregate counter value" per counter (benchmark without /manual_time).
quiet_rows() {
  awk '
    /"name":/ { gsub(/[",]/, "", $2); name = $2; sub(/\/manual_time.*/, "", name) }
    /"aggregate_name":/ { gsub(/[",]/, "", $2); agg = $2 }
    /^      "[a-z_]+": [-0-9.e+]+,?$/ {
      key = $1; gsub(/[":]/, "", key); v = $2; gsub(/,/, "", v); val[key] = v
    }
    /^    }/ {
      if (name != "" && agg != "") for (k in val) print name, agg, k, val[k]
      name = ""; agg = ""; delete val
    }' "$1"
}

# The quiet watchers' section: medians of the repetitions (quiet wakes: their
# mean, non-zero if any repetition had one).
quiet_section() {
  { quiet_rows "$WORK/quiet.json"; quiet_rows "$WORK/quiet_aa.json" | sed 's/^BM_HotAppend /AA /'; } |
    awk -v reps="$REPETITIONS" '
    { v[$1, $2, $3] = $4 }
    function m(b, k) { return v[b, "median", k] }
    END {
      a = "BM_HotAppend"; q1 = "BM_WatcherTurn/1000"; q2 = "BM_WatcherTurn/100000"
      printf "\nQuiet watchers (issue 18 §2), the event log alone, one core, median of %d; each benchmark measures both arms in the same iterations, interleaved:\n\n", reps
      print "| appender, per hot transaction (pods, " sprintf("%.1f", m(a, "events_per_txn")) " events of ~1 KiB, log full at " sprintf("%.0f", m(a, "log_mib")) " MiB, evicting) | ns/txn |"
      print "|---|---|"
      printf "| no watcher | %.0f |\n", m(a, "bare_ns_per_txn")
      printf "| %.0f watchers of %d quiet resources waiting (WaitForAppendOf) | %.0f |\n", m(a, "quiet_watchers"), 30, m(a, "watched_ns_per_txn")
      printf "| **ratio, with / without** | **%.2f** (c.v. %.0f%%) |\n", m(a, "watched_over_bare"), 100 * v[a, "cv", "watched_over_bare"]
      printf "| the same ratio with no watcher on either side (A/A: noise alone; QUIET_BENCH_WATCHERS=0) | %.2f (%.0f / %.0f; c.v. %.0f%%) |\n", m("AA", "watched_over_bare"), m("AA", "watched_ns_per_txn"), m("AA", "bare_ns_per_txn"), 100 * v["AA", "cv", "watched_over_bare"]
      printf "\nQuiet watchers woken by hot appends: %.0f (must be 0).\n\n", v[a, "mean", "quiet_wakes"]
      print "| N hot events between cursor and tail | quiet watcher turn (SkipOtherResources + ResumeRvAt + ReadForWatch), ns | pods watcher reading the N (ReadForWatch by 256 + ResumeRvAt), µs | ns per hot event read | **hot read / quiet turn** |"
      print "|---|---|---|---|---|"
      for (i = 1; i <= 2; i++) {
        b = (i == 1 ? q1 : q2)
        printf "| %.0f | %.0f | %.1f | %.1f | **%.0f** |\n", m(b, "hot_events_between"), m(b, "quiet_turn_ns"),
          m(b, "hot_read_ns") / 1000, m(b, "hot_ns_per_event"), m(b, "hot_over_quiet")
      }
      printf "\nA quiet turn with 100k hot events between: %.2f times one with 1k (the log holds %.0fk events, %.0f MiB, in both). 1.0 would be no cost per hot event at all.\n", \
        (m(q1, "quiet_turn_ns") > 0 ? m(q2, "quiet_turn_ns") / m(q1, "quiet_turn_ns") : 0), m(q2, "log_events") / 1000, m(q2, "log_mib")
    }'
}

if want decoder; then decoder_rows >"$WORK/results/decoder.txt"; fi
if want quiet; then
  { quiet_rows "$WORK/quiet.json"; quiet_rows "$WORK/quiet_aa.json" | sed 's/^BM_HotAppend /AA /'; } >"$WORK/results/quiet.txt"
fi
TOTAL_S=$(($(date +%s) - T_START))
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC') — commit $commit"
  echo
  echo "Machine: $(nproc) cores, $cpu, $mem RAM, Linux $(uname -r); load average ${LOAD_BEFORE} before, ${LOAD_AFTER} after."
  echo "Build: $build_type, -march=$march, g++ $(g++ -dumpfullversion 2>/dev/null), simdjson $simdjson, PostgreSQL ${pg:-?} + wal2json."
  echo
  echo "Commands (\`make bench\` = \`tests/bench/run-bench.sh\`):"
  echo
  echo '```'
  if want decoder; then echo "${DECODER_CMD[*]}"; fi
  if want quiet; then
    echo "$QUIET_ENV ${QUIET_CMD[*]}"
    echo "QUIET_BENCH_WATCHERS=0 $QUIET_ENV ${QUIET_CMD[*]} --benchmark_filter=BM_HotAppend"
  fi
  if want drain; then echo "$DRAIN_ENV tests/bench/drain_bench.sh"; fi
  for part in fanout ceiling memory replay quiet_e2e etcd kine mdrain mfanout standby relist_storm debezium; do
    if want "$part"; then
      # relist_storm's variables are BENCH_STORM_*.
      env | grep -E "^BENCH_($(tr '[:lower:]' '[:upper:]' <<<"${part#relist_}")_|OBJECT_BYTES)" | sort | tr '\n' ' ' || true
      echo "tests/bench/${part}_bench.sh"
    fi
  done
  echo '```'
  if want decoder; then
    echo
    echo "Decoder, one core, median of $REPETITIONS; GB/s = 10^9 bytes of wal2json input (B, row and C lines of one-row transactions) per CPU-second:"
    echo
    decoder_table
    echo
    echo "simdjson kernels: $(awk -F'"' '/"simdjson_(ondemand|dom)_kernel"/ { printf "%s%s %s", sep, $2, $4; sep = ", " }' "$WORK/decoder.json")."
  fi
  if want quiet; then quiet_section; fi
  if want drain; then
    # shellcheck disable=SC1091  # drain_bench.sh's key=value lines
    source "$WORK/results/drain.env"
    verdict=$(awk -v r="$ratio" 'BEGIN { if (r >= 0.9) print "met"; else printf "missed by %.0f%% (%.2f of the 0.9 target)", 100 * (0.9 - r) / 0.9, r / 0.9 }')
    echo
    echo "Backlog drain, $rows Pods of ~$object_bytes bytes of jsonb, $rows_per_txn row(s) per transaction ($wal_bytes bytes of WAL; loaded at $load_rows_per_s rows/s), median of $reps:"
    echo
    echo "| | rows/s | all repetitions |"
    echo "|---|---|---|"
    echo "| pg_recvlogical → /dev/null | $recvlogical_rows_per_s | $recvlogical_all |"
    echo "| walwatch → one watcher (start to last event) | $walwatch_rows_per_s | $walwatch_all |"
    echo "| walwatch (first to last event) | $walwatch_stream_rows_per_s | $walwatch_stream_all |"
    echo
    echo "walwatch drain: $walwatch_rows_per_s rows/s, pg_recvlogical: $recvlogical_rows_per_s rows/s, ratio $ratio — target ≥ 0.9: $verdict."
  fi
  for part in fanout ceiling memory replay quiet_e2e etcd kine mdrain mfanout standby relist_storm debezium; do
    if want "$part"; then cat "$WORK/$part.md"; fi
  done
  echo
  echo "Time per part, s (of the ${TOTAL_S} s in all; budget 1800 s on 2 cores):"
  echo
  echo "| $(awk '{ printf "%s%s", sep, $1; sep = " | " }' "$WORK/times.txt") |"
  echo "|$(awk '{ printf "---|" }' "$WORK/times.txt")"
  echo "| $(awk '{ printf "%s%s", sep, $2; sep = " | " }' "$WORK/times.txt") |"
} >"$WORK/report.md"

echo
cat "$WORK/report.md"
say "time per part (s): $(tr '\n' ' ' <"$WORK/times.txt")— ${TOTAL_S} s in all (budget 1800 s)"
if [[ "${BENCH_NO_APPEND:-}" != 1 ]]; then
  cat "$WORK/report.md" >>tests/bench/HISTORY.md
  say "appended to tests/bench/HISTORY.md"
  # The latest figures of each part that ran, with when, at which commit
  # and by which command.
  mkdir -p tests/bench/results
  date_utc=$(date -u '+%Y-%m-%d %H:%M UTC')
  for part in "${PARTS[@]}"; do
    want "$part" || continue
    for f in "$WORK/results/$part".* "$WORK/results/${part}_"*; do
      [[ -e "$f" ]] && cp "$f" tests/bench/results/
    done
    printf 'date=%s\ncommit=%s\nseconds=%s\n' "$date_utc" "$commit" \
      "$(awk -v p="$part" '$1 == p { print $2 }' "$WORK/times.txt")" >"tests/bench/results/$part.meta"
  done
  printf 'date=%s\ncommit=%s\ntotal_seconds=%s\nonly=%s\nmachine=%s cores, %s, load %s before, %s after\n' \
    "$date_utc" "$commit" "$TOTAL_S" "${ONLY:-all}" "$(nproc)" "$cpu" "$LOAD_BEFORE" "$LOAD_AFTER" >tests/bench/results/run.meta
  cp "$WORK/times.txt" tests/bench/results/times.txt
  tests/bench/plots.sh tests/bench/results tests/bench/plots
  tests/bench/summary.sh tests/bench/results BENCHMARKS.md >"$WORK/BENCHMARKS.md"
  cp "$WORK/BENCHMARKS.md" BENCHMARKS.md
  say "rewrote BENCHMARKS.md and tests/bench/plots/"
else
  tests/bench/summary.sh "$WORK/results" | sed -n '/^| figure/,/^$/p'
fi
