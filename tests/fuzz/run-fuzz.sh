#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets with clang (ASan + UBSan) and runs
# each for FUZZ_RUNS executions; fails on any finding.
#
# Targets (tests/fuzz/<name>_fuzz.cc, seeds in tests/fuzz/corpus/<name>/):
#   http      raw bytes of a connection -> Beast request_parser -> ParseRequest
#             -> WatchFilter::Create -> StatusJson
#   selector  LabelSelector / FieldSelector parse, match, ToString round trip
#   rv        ParseResourceVersion, ParseLsn / ParsePgLsn, ParseHandoffSnapshot
#   wal2json  ParseTableMapping, Wal2JsonDecoder -> TransactionAssembler ->
#             EventBuilder -> EventLog
#   pgoutput  framed pgoutput messages (and lost connections) ->
#             PgoutputDecoder -> TransactionAssembler (streams, aborts, the
#             byte bound) -> EventBuilder -> EventLog
#   mysql_json  DecodeMysqlJson: MySQL 8's binary JSON to the text a SELECT
#             shows (its output must parse as JSON)
#   mysql_binlog  a binlog file's bytes -> BinlogReader::OpenFile (Connector/C's
#             event and row parsing, the table map, transactions, values) ->
#             ToTransaction -> EventBuilder -> EventLog; seeds captured from
#             MariaDB by tests/fuzz/capture-binlog-corpus.sh
# Each target is built by CMake (tests/fuzz/CMakeLists.txt) from the same
# library targets as the product (schema, cdc, watchserver_core,
# watchserver), in $FUZZ_BUILD_DIR (default build-fuzz/) configured with
# WALWATCH_FUZZ=ON and clang, which compiles everything with libFuzzer's
# instrumentation, ASan and UBSan (tests/fuzz/sanitizers.cmake). No source
# list is kept here. It first replays tests/fuzz/regressions/<name>/ (inputs
# of past findings), then fuzzes a copy of its seed corpus in
# build-fuzz/corpus-<name>/, which keeps what it learns across runs; the
# repository is never written to. (`make test` replays the seed corpus and
# the regressions through the same sources built by g++: ctest
# fuzz_replay_<name>.)
#
# Usage: tests/fuzz/run-fuzz.sh [TARGET...]     (default: all six)
#   FUZZ_RUNS=1000000   executions per target
#   FUZZ_JOBS=2         parallel compiles
#   FUZZ_CXX=clang++-14
#   FUZZ_MARCH=haswell  as the release build (CMakeLists.txt WALWATCH_MARCH)
# Needs clang and libclang-rt-14-dev (tests/tools/install-deps.sh).
#
# A finding: libFuzzer prints the stack and writes the input to
# build-fuzz/artifacts/<target>-crash-<sha1>. Replay it with
#   build-fuzz/fuzz/<target>_fuzz build-fuzz/artifacts/<target>-crash-<sha1>
# then keep it as tests/fuzz/regressions/<target>/<name> with the fix.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=${FUZZ_RUNS:-1000000}
JOBS=${FUZZ_JOBS:-2}
CXX=${FUZZ_CXX:-clang++-14}
OUT=${FUZZ_BUILD_DIR:-build-fuzz}
ALL_TARGETS=(http selector rv wal2json pgoutput mysql_json mysql_binlog)
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then TARGETS=("${ALL_TARGETS[@]}"); fi

# -max_len per target. http: the session's read buffer (16 KiB header +
# 8 KiB body + 4 KiB); wal2json: captured lines reach 21 KiB, and a
# transaction holds several.
declare -A MAX_LEN
MAX_LEN[http]=28672
MAX_LEN[selector]=4096
MAX_LEN[rv]=256
MAX_LEN[wal2json]=65536
MAX_LEN[pgoutput]=65536
MAX_LEN[mysql_json]=16384
# mysql_binlog: the captured seeds are 0.4-3 KiB; room for several writes.
MAX_LEN[mysql_binlog]=16384

for t in "${TARGETS[@]}"; do
  if [[ -z "${MAX_LEN[$t]+set}" ]]; then
    echo "run-fuzz: unknown target '$t' (known: ${ALL_TARGETS[*]})" >&2
    exit 2
  fi
done
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "run-fuzz: $CXX not found; install clang and libclang-rt-14-dev (make deps)" >&2
  exit 1
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    "$CXX" -x c++ -fsanitize=fuzzer,address,undefined -o /dev/null - 2>/dev/null; then
  echo "run-fuzz: $CXX cannot link -fsanitize=fuzzer; install libclang-rt-14-dev (make deps)" >&2
  exit 1
fi

mkdir -p "$OUT/artifacts"

# Debug: assert() stays on in the product's code (sanitizers.cmake adds
# -O1). -march as the release build (WALWATCH_MARCH): simdjson's On-Demand
# parser is inline and picks its kernel at compile time, so this fuzzes the
# kernel the release build runs. The tests and the product binary are not
# built here.
if ! cmake -S . -B "$OUT" -DWALWATCH_FUZZ=ON -DWALWATCH_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$CXX" \
    -DWALWATCH_MARCH="${FUZZ_MARCH:-haswell}" >"$OUT/configure.log" 2>&1; then
  cat "$OUT/configure.log" >&2
  echo "run-fuzz: configuring $OUT failed (a build dir made with another compiler? remove $OUT)" >&2
  exit 1
fi
build_targets=()
for t in "${TARGETS[@]}"; do build_targets+=("${t}_fuzz"); done
if ! cmake --build "$OUT" -j"$JOBS" --target "${build_targets[@]}" \
    >"$OUT/build.log" 2>&1; then
  tail -n 80 "$OUT/build.log" >&2
  echo "run-fuzz: building ${build_targets[*]} failed (log $OUT/build.log)" >&2
  exit 1
fi
echo "run-fuzz: built ${build_targets[*]} in $OUT/fuzz/"

summary=()
status=0
for t in "${TARGETS[@]}"; do
  bin="$OUT/fuzz/${t}_fuzz"
  dict=()
  [[ -f "tests/fuzz/$t.dict" ]] && dict=(-dict="tests/fuzz/$t.dict")

  # Past findings first: each must now pass.
  shopt -s nullglob
  regressions=(tests/fuzz/regressions/"$t"/*)
  shopt -u nullglob
  if ((${#regressions[@]} > 0)); then
    echo "run-fuzz: $t: replaying ${#regressions[@]} regression input(s)"
    : >"$OUT/$t-regressions.log"
    failing=()
    for input in "${regressions[@]}"; do
      if ! "$bin" -runs=1 "$input" >>"$OUT/$t-regressions.log" 2>&1; then
        failing+=("$input")
      fi
    done
    if ((${#failing[@]} > 0)); then
      grep -E 'FUZZ_CHECK|ERROR:|runtime error|assertion' \
        "$OUT/$t-regressions.log" >&2 || true
      for input in "${failing[@]}"; do
        echo "run-fuzz: $t: regression input fails: $input" >&2
      done
      summary+=("$(printf '%-9s FAILED on %d regression input(s) (log %s)' \
        "$t" "${#failing[@]}" "$OUT/$t-regressions.log")")
      status=1
      continue
    fi
  fi

  corpus="$OUT/corpus-$t"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  echo "run-fuzz: $t: $RUNS runs, corpus $corpus ($(find "$corpus" -type f | wc -l) inputs)"
  start=$(date +%s)
  set +e
  "$bin" -runs="$RUNS" -max_len="${MAX_LEN[$t]}" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -print_pcs=0 \
      -artifact_prefix="$OUT/artifacts/$t-" "${dict[@]}" "$corpus" \
      >"$OUT/$t.log" 2>&1
  rc=$?
  set -e
  seconds=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$t.log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$OUT/$t.log" | tail -1 || true)
  if ((rc != 0)); then
    tail -n 60 "$OUT/$t.log" >&2
    echo "run-fuzz: $t: FINDING (exit $rc); input in $OUT/artifacts/, log $OUT/$t.log" >&2
    summary+=("$(printf '%-9s FINDING after %ss (log %s)' "$t" "$seconds" "$OUT/$t.log")")
    status=1
  else
    summary+=("$(printf '%-9s %10s execs  %5ss  %6s execs/s  %s  corpus %s' \
      "$t" "${execs:-?}" "$seconds" "$(( ${execs:-0} / (seconds > 0 ? seconds : 1) ))" \
      "$cov" "$(find "$corpus" -type f | wc -l)")")
  fi
done

echo
echo "run-fuzz: summary (FUZZ_RUNS=$RUNS)"
printf '  %s\n' "${summary[@]}"
exit "$status"
