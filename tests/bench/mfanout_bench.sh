#!/usr/bin/env bash
# Fan-out on MariaDB: fanout_bench.sh's case `one` (N watchers of one
# resource, bench_writer's one-row UPDATEs at a fixed rate, commit -> client
# latency from the writer's stamp) with walwatch --source mysql reading a
# throwaway MariaDB's binlog (BENCH_DB=mysql: bench_lib.sh). The same
# client, writer, checks and report as on PostgreSQL; only the database
# differs. The goal is PostgreSQL's: p99 < 50 ms for 1,000 watchers at
# 2,000 commits/s, in every run. One run at 1,000/s comes first, reported
# too: on PostgreSQL the goal's case follows a dozen others, and here it
# would otherwise be the first load the fresh server and walwatch see (the
# first run after start was 1 s at p99 where the next two were 62 and
# 43 ms; tests/bench/HISTORY.md, 2026-12-07 02:16).
#
#   tests/bench/mfanout_bench.sh
#
# Environment:
#   BENCH_MFANOUT_WATCHERS (1000), BENCH_MFANOUT_RATE (2000),
#   BENCH_MFANOUT_SECONDS (4), BENCH_MFANOUT_REPS (3, of the goal's case),
#   BENCH_MFANOUT_DRAIN (10), BENCH_MFANOUT_WRITERS (2): fanout_bench.sh's
#   BENCH_FANOUT_* for this run;
#   BENCH_OUT (fanout_bench.sh's BENCH_FANOUT_OUT: key=value lines per run),
#   BENCH_REPORT, and fanout_bench.sh's others (BENCH_OBJECT_BYTES,
#   BENCH_WALWATCH_FLAGS, WALWATCH_BIN, BENCH_KEEP, BENCH_TIMEOUT).
set -euo pipefail

exec env BENCH_DB=mysql \
  BENCH_FANOUT_WATCHERS="${BENCH_MFANOUT_WATCHERS:-1000}" \
  BENCH_FANOUT_RATES="1000 ${BENCH_MFANOUT_RATE:-2000}" \
  BENCH_FANOUT_SECONDS="${BENCH_MFANOUT_SECONDS:-4}" \
  BENCH_FANOUT_REPS=1 \
  BENCH_FANOUT_GOAL_REPS="${BENCH_MFANOUT_REPS:-3}" \
  BENCH_FANOUT_DRAIN="${BENCH_MFANOUT_DRAIN:-10}" \
  BENCH_FANOUT_WRITERS="${BENCH_MFANOUT_WRITERS:-2}" \
  BENCH_FANOUT_EXTRA= BENCH_FANOUT_SPREAD_RATES= BENCH_FANOUT_MIXED= \
  BENCH_FANOUT_OUT="${BENCH_OUT:-}" \
  "$(dirname "$0")/fanout_bench.sh"
