#!/usr/bin/env bash
# `make bench`: builds the benchmarks, runs them, prints a report and appends
# it to BENCHMARKS.md (machine, commit, commands, median figures, targets).
#
#   tests/bench/run-bench.sh
#
# 1. cmake -DWALWATCH_BUILD_BENCH=ON in build-bench/ (the build type `make`
#    ships, RelWithDebInfo), targets decoder_bench, watch_count,
#    bench_writer, fanout_client, walwatch;
# 2. decoder_bench, 5 repetitions, medians (tests/bench/decoder_bench.cc);
# 2a. quiet_watchers_bench, 5 repetitions, medians: what a hot resource's
#    events cost 1,000 watchers of quiet resources in the event log
#    (tests/bench/quiet_watchers_bench.cc);
# 3. tests/bench/drain_bench.sh: backlog drain, walwatch vs pg_recvlogical;
# 4. tests/bench/fanout_bench.sh: commit -> client latency and walwatch's CPU
#    with 1 to 5,000 watchers at 100 to 5,000 commits/s;
# 4a. tests/bench/ceiling_bench.sh: the same fan-out with walwatch and
#    PostgreSQL taken out (an ideal server), what the machine allows at all;
# 5. tests/bench/memory_bench.sh: RSS per idle watcher, event-log RSS per
#    wire byte;
# 6. tests/bench/replay_bench.sh: time to rebuild the window after a restart;
# 7. tests/bench/quiet_e2e_bench.sh: walwatch's CPU per hot commit with and
#    without 1,000 watchers of quiet resources, and their 410s (must be 0).
# About 21 minutes on 2 cores. The soak is separate: `make soak`
# (tests/bench/soak.sh).
#
# Environment:
#   BENCH_ONLY=decoder|quiet|drain|fanout|ceiling|memory|replay|quiet_e2e   run only
#                              these (a comma-separated list)
#   BENCH_REPETITIONS (5)      decoder_bench's and quiet_watchers_bench's
#                              repetitions
#   BENCH_MIN_TIME (0.5)       their seconds per repetition
#   QUIET_BENCH_LOG_MB (256), QUIET_BENCH_EVENT_BYTES (1024): see
#                              quiet_watchers_bench.cc
#   BENCH_FILTER               decoder_bench --benchmark_filter
#   BENCH_NO_APPEND=1          print the report, leave BENCHMARKS.md alone
#   BENCH_BUILD_DIR (build-bench), JOBS (2), WALWATCH_MARCH (haswell on x86-64)
#   BENCH_ROWS, BENCH_TXN, BENCH_BATCH, BENCH_REPS, ...: see drain_bench.sh
#   BENCH_FANOUT_*, BENCH_CEILING_*, BENCH_MEMORY_*, BENCH_REPLAY_*,
#   BENCH_QUIET_E2E_*,
#   BENCH_OBJECT_BYTES: see fanout_bench.sh, ceiling_bench.sh,
#                              memory_bench.sh, replay_bench.sh,
#                              quiet_e2e_bench.sh
# shellcheck disable=SC2154  # the drain's figures come from `source drain.env`
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BENCH_BUILD_DIR:-build-bench}
JOBS=${JOBS:-2}
REPETITIONS=${BENCH_REPETITIONS:-5}
MIN_TIME=${BENCH_MIN_TIME:-0.5}
ONLY=${BENCH_ONLY:-}
say() { echo "run-bench: $*" >&2; }

PARTS=(decoder quiet drain fanout ceiling memory replay quiet_e2e)
for part in ${ONLY//,/ }; do
  [[ " ${PARTS[*]} " == *" $part "* ]] ||
    { say "BENCH_ONLY: $part is not one of ${PARTS[*]}"; exit 2; }
done
# Whether a part runs: all of them unless BENCH_ONLY names some.
want() { [[ -z "$ONLY" || ",${ONLY// /,}," == *",$1,"* ]]; }

WORK=$(mktemp -d /tmp/ww-runbench.XXXXXX)
trap 'rm -rf -- "$WORK"' EXIT

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# What is measured is what is built now: the commit, and whether changes to
# what is built (others edit tests meanwhile) were in the working tree.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD -- cdc watchserver schema tests/bench CMakeLists.txt 2>/dev/null; then
  commit+=" (with uncommitted changes in the working tree)"
fi
say "configuring and building in $BUILD_DIR ..."
# shellcheck source=tests/bench/bench_lib.sh
source tests/bench/bench_lib.sh
bench_build "$BUILD_DIR" "$JOBS" decoder_bench quiet_watchers_bench \
  watch_count bench_writer fanout_client fanout_ceiling walwatch

DECODER_CMD=("$BUILD_DIR/decoder_bench" "--benchmark_repetitions=$REPETITIONS"
  "--benchmark_report_aggregates_only=true" "--benchmark_min_time=$MIN_TIME")
[[ -n "${BENCH_FILTER:-}" ]] && DECODER_CMD+=("--benchmark_filter=$BENCH_FILTER")

QUIET_CMD=("$BUILD_DIR/quiet_watchers_bench" "--benchmark_repetitions=$REPETITIONS"
  "--benchmark_report_aggregates_only=true" "--benchmark_min_time=$MIN_TIME")
QUIET_ENV="QUIET_BENCH_LOG_MB=${QUIET_BENCH_LOG_MB:-256} QUIET_BENCH_EVENT_BYTES=${QUIET_BENCH_EVENT_BYTES:-1024}"

DRAIN_ENV="BENCH_ROWS=${BENCH_ROWS:-100000} BENCH_TXN=${BENCH_TXN:-single} BENCH_REPS=${BENCH_REPS:-3}"
[[ "${BENCH_TXN:-single}" == batch ]] && DRAIN_ENV+=" BENCH_BATCH=${BENCH_BATCH:-1000}"

if want decoder; then
  say "running ${DECODER_CMD[*]} ..."
  "${DECODER_CMD[@]}" --benchmark_out="$WORK/decoder.json" \
    --benchmark_out_format=json
fi
if want quiet; then
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
fi
if want drain; then
  say "running $DRAIN_ENV tests/bench/drain_bench.sh ..."
  # shellcheck disable=SC2086  # DRAIN_ENV is NAME=value words
  env $DRAIN_ENV WALWATCH_BIN="$ROOT/$BUILD_DIR/walwatch" \
    BENCH_DRAIN_OUT="$WORK/drain.env" tests/bench/drain_bench.sh
fi
# The fan-out, ceiling, memory and replay benchmarks: each prints its own
# section.
for part in fanout ceiling memory replay quiet_e2e; do
  want "$part" || continue
  say "running tests/bench/${part}_bench.sh ..."
  WALWATCH_BIN="$ROOT/$BUILD_DIR/walwatch" BENCH_REPORT="$WORK/$part.md" \
    "tests/bench/${part}_bench.sh"
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
# JSON: one line "family size op bytes_per_s items_per_s line_bytes obj_bytes cv".
decoder_rows() {
  awk '
    /"name":/ { gsub(/[",]/, "", $2); name = $2 }
    /"aggregate_name":/ { gsub(/[",]/, "", $2); agg = $2 }
    /"bytes_per_second":/ { gsub(/,/, "", $2); bps = $2 }
    /"items_per_second":/ { gsub(/,/, "", $2); ips = $2 }
    /"row_line_bytes":/ { gsub(/,/, "", $2); line = $2 }
    /"object_bytes":/ { gsub(/,/, "", $2); obj = $2 }
    /^    }/ {
      if (name != "") {
        base = name; sub(/_(median|mean|stddev|cv)$/, "", base)
        if (agg == "median") { m[base] = bps " " ips " " line " " obj; order[++n] = base }
        if (agg == "cv") cv[base] = bps
      }
      name = ""; agg = ""
    }
    END {
      for (i = 1; i <= n; i++) {
        b = order[i]; split(b, p, "/")
        print p[1], p[2], p[3], m[b], (b in cv ? cv[b] : 0)
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
        m(q2, "quiet_turn_ns") / m(q1, "quiet_turn_ns"), m(q2, "log_events") / 1000, m(q2, "log_mib")
    }'
}

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
  for part in fanout ceiling memory replay quiet_e2e; do
    if want "$part"; then
      env | grep -E "^BENCH_($(tr '[:lower:]' '[:upper:]' <<<"$part")_|OBJECT_BYTES)" | sort | tr '\n' ' ' || true
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
    source "$WORK/drain.env"
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
  for part in fanout ceiling memory replay quiet_e2e; do
    if want "$part"; then cat "$WORK/$part.md"; fi
  done
} >"$WORK/report.md"

echo
cat "$WORK/report.md"
if [[ "${BENCH_NO_APPEND:-}" != 1 ]]; then
  if [[ ! -f BENCHMARKS.md ]]; then
    # shellcheck disable=SC2016  # backquotes are Markdown
    printf '# walwatch benchmarks\n\nAppended by `make bench` (tests/bench/run-bench.sh).\n' >BENCHMARKS.md
  fi
  cat "$WORK/report.md" >>BENCHMARKS.md
  say "appended to BENCHMARKS.md"
fi
