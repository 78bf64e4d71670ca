#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets with clang (ASan + UBSan) and runs
# each for FUZZ_RUNS executions; fails on any finding.
#
# Targets (tests/fuzz/<name>_fuzz.cc, seeds in tests/fuzz/corpus/<name>/):
#   http      raw bytes of a connection -> Beast request_parser -> ParseRequest
#             -> WatchFilter::Create -> StatusJson
#   selector  LabelSelector / FieldSelector parse, match, ToString round trip
#   rv        ParseResourceVersion, ParseLsn / ParsePgLsn, EventLog::ParseSnapshot
#   wal2json  ParseTableMapping, Wal2JsonDecoder -> TransactionAssembler ->
#             EventBuilder -> EventLog
# Each target is compiled directly from the pure parsing sources it needs (no
# libpq, no sockets) into $FUZZ_BUILD_DIR (default build-fuzz/). It first
# replays tests/fuzz/regressions/<name>/ (inputs of past findings), then
# fuzzes a copy of its seed corpus in build-fuzz/corpus-<name>/, which keeps
# what it learns across runs; the repository is never written to.
#
# Usage: tests/fuzz/run-fuzz.sh [TARGET...]     (default: all four)
#   FUZZ_RUNS=1000000   executions per target
#   FUZZ_JOBS=2         parallel compiles
#   FUZZ_CXX=clang++-14
#   FUZZ_MARCH=haswell  as the release build (CMakeLists.txt WALWATCH_MARCH)
# Needs clang and libclang-rt-14-dev (tests/tools/install-deps.sh).
#
# A finding: libFuzzer prints the stack and writes the input to
# build-fuzz/artifacts/<target>-crash-<sha1>. Replay it with
#   build-fuzz/<target>_fuzz build-fuzz/artifacts/<target>-crash-<sha1>
# then keep it as tests/fuzz/regressions/<target>/<name> with the fix.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=${FUZZ_RUNS:-1000000}
JOBS=${FUZZ_JOBS:-2}
CXX=${FUZZ_CXX:-clang++-14}
OUT=${FUZZ_BUILD_DIR:-build-fuzz}
ALL_TARGETS=(http selector rv wal2json)
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then TARGETS=("${ALL_TARGETS[@]}"); fi

# Sources, extra flags and -max_len per target.
declare -A SOURCES FLAGS MAX_LEN
SOURCES[http]="tests/fuzz/http_request_fuzz.cc watchserver/watch_request.cc
  watchserver/selector.cc watchserver/k8s_status.cc watchserver/event_log.cc
  watchserver/event.cc watchserver/filter_fields.cc"
SOURCES[selector]="tests/fuzz/selector_fuzz.cc watchserver/selector.cc
  watchserver/event.cc watchserver/filter_fields.cc"
SOURCES[rv]="tests/fuzz/rv_fuzz.cc cdc/lsn.cc watchserver/watch_request.cc
  watchserver/k8s_status.cc watchserver/event_log.cc watchserver/event.cc watchserver/filter_fields.cc"
SOURCES[wal2json]="tests/fuzz/wal2json_fuzz.cc cdc/wal2json_decoder.cc
  cdc/transaction_assembler.cc cdc/event_builder.cc cdc/lsn.cc
  schema/table_mapping.cc watchserver/event_log.cc watchserver/event.cc watchserver/filter_fields.cc"
# Boost assertions go to the handler in http_request_fuzz.cc (one of
# Beast 1.74's is wrong).
FLAGS[http]="-DBOOST_ENABLE_ASSERT_HANDLER -lsimdjson"
FLAGS[selector]=""
FLAGS[rv]="-lsimdjson"
FLAGS[wal2json]="-DSIMDJSON_DEVELOPMENT_CHECKS=1 -lsimdjson"
# http: the session's read buffer (16 KiB header + 8 KiB body + 4 KiB);
# wal2json: captured lines reach 21 KiB, and a transaction holds several.
MAX_LEN[http]=28672
MAX_LEN[selector]=4096
MAX_LEN[rv]=256
MAX_LEN[wal2json]=65536

for t in "${TARGETS[@]}"; do
  if [[ -z "${SOURCES[$t]+set}" ]]; then
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

mkdir -p "$OUT/generated/schema" "$OUT/artifacts"

# schema/default_mapping.h, as CMake's configure_file writes it. The
# replacement is quoted so that bash 5.2 does not expand '&' in it.
template=$(<schema/default_mapping.h.in)
mapping_json=$(<schema/clusterpedia-resources.mapping.json)
generated="${template/@WALWATCH_DEFAULT_MAPPING_JSON@/"$mapping_json"}"
if [[ ! -f "$OUT/generated/schema/default_mapping.h" ]] ||
   [[ "$(<"$OUT/generated/schema/default_mapping.h")" != "$generated" ]]; then
  printf '%s\n' "$generated" >"$OUT/generated/schema/default_mapping.h"
fi

# -march as CMakeLists.txt's WALWATCH_MARCH: simdjson's On-Demand parser is
# inline and picks its kernel at compile time, so this fuzzes the kernel
# the release build runs (haswell: AVX2, BMI, PCLMULQDQ).
CXXFLAGS=("-fsanitize=fuzzer,address,undefined" -fno-sanitize-recover=undefined
          -g -O1 -std=c++17 "-march=${FUZZ_MARCH:-haswell}"
          -Wall -Wextra -Wno-unused-parameter
          -I. -I"$OUT/generated")

# The compile command of a target, recorded next to its binary.
command_of() {
  local t=$1
  echo "$CXX ${CXXFLAGS[*]} ${SOURCES[$t]} ${FLAGS[$t]}"
}

# Rebuilds a target when it is missing, was built with another command, or
# is older than any source or header.
needs_build() {
  local t=$1
  local bin="$OUT/${t}_fuzz"
  [[ ! -x "$bin" ]] && return 0
  [[ "$(cat "$bin.cmd" 2>/dev/null)" != "$(command_of "$t")" ]] && return 0
  [[ -n "$(find cdc watchserver schema tests/fuzz "$OUT/generated" \
             \( -name '*.cc' -o -name '*.h' \) -newer "$bin" -print -quit)" ]]
}

build() {
  local t=$1
  local bin="$OUT/${t}_fuzz"
  # shellcheck disable=SC2086  # word splitting of the lists is intended
  if "$CXX" "${CXXFLAGS[@]}" -o "$bin" ${SOURCES[$t]} ${FLAGS[$t]} \
      >"$OUT/build-$t.log" 2>&1; then
    command_of "$t" >"$bin.cmd"
    echo "run-fuzz: built $bin"
  else
    cat "$OUT/build-$t.log" >&2
    echo "run-fuzz: building $bin failed" >&2
    return 1
  fi
}

# Up to JOBS compiles at a time, in batches.
failed=0
pending=()
for t in "${TARGETS[@]}"; do
  needs_build "$t" && pending+=("$t")
done
for ((i = 0; i < ${#pending[@]}; i += JOBS)); do
  pids=()
  for t in "${pending[@]:i:JOBS}"; do
    build "$t" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
done
((failed == 0)) || exit 1

summary=()
status=0
for t in "${TARGETS[@]}"; do
  bin="$OUT/${t}_fuzz"
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
