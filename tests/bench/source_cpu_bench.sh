#!/usr/bin/env bash
# walwatch's CPU per delivered event on PostgreSQL and on MariaDB, in one run:
# does reading the binlog cost walwatch more than reading wal2json?
#
#   tests/bench/source_cpu_bench.sh
#
# Each round runs fanout_bench.sh's case `one` (N watchers of one resource,
# bench_writer's one-row UPDATEs at a fixed rate) for every N:rate of
# BENCH_SRCCPU_CASES once on a throwaway PostgreSQL and once on a throwaway
# MariaDB (BENCH_DB=mysql), the two back to back and in turns (odd rounds
# PostgreSQL first, even rounds MariaDB first), so that other work on the
# machine falls on both alike. Per run: walwatch's utime+stime from
# /proc/PID/stat over the run, divided by the events all watchers received
# (ww_us_per_event) and by the commits (ww_us_per_commit). Per case it
# prints each round's MariaDB / PostgreSQL ratio and their median, minimum
# and maximum: the spread of the ratios over rounds is the noise. With one
# watcher the figure is the source's decoding and the event's building
# alone; with 1,000 it is mostly the fan-out, which is the same code for
# both. Also, per database: the median p99 commit -> client latency and
# machine CPU, and the runs that did not keep up (fanout_bench.sh's rule):
# a run that falls behind batches more events per write, which lowers its
# cost per event, so a ratio is only fair where neither did.
#
# Environment:
#   BENCH_SRCCPU_CASES ("1:1000 1000:1000 1000:2000"; watchers:commits/s),
#   BENCH_SRCCPU_ROUNDS (5), BENCH_SRCCPU_SECONDS (5: the writer's seconds
#   per run), BENCH_SRCCPU_OUT (also write the per-run key=value lines, each
#   prefixed with the round and the database, to this file),
#   plus fanout_bench.sh's BENCH_FANOUT_WRITERS, BENCH_FANOUT_DRAIN,
#   BENCH_OBJECT_BYTES, BENCH_WALWATCH_FLAGS and bench_lib.sh's.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CASES=${BENCH_SRCCPU_CASES:-"1:1000 1000:1000 1000:2000"}
ROUNDS=${BENCH_SRCCPU_ROUNDS:-5}
SECONDS_PER_RUN=${BENCH_SRCCPU_SECONDS:-5}
say() { echo "source_cpu: $*" >&2; }

WORK=$(mktemp -d /tmp/ww-srccpu.XXXXXX)
trap 'rm -rf -- "$WORK"' EXIT
ALL=$WORK/all.txt
: >"$ALL"

one_db() {
  local round=$1 db=$2
  say "round $round: $db"
  BENCH_DB=$db BENCH_FANOUT_WATCHERS="" BENCH_FANOUT_EXTRA="$CASES" \
    BENCH_FANOUT_SPREAD_RATES="" BENCH_FANOUT_MIXED="" \
    BENCH_FANOUT_REPS=1 BENCH_FANOUT_GOAL_REPS=1 \
    BENCH_FANOUT_SECONDS="$SECONDS_PER_RUN" BENCH_FANOUT_OUT="$WORK/out" \
    BENCH_REPORT="" "$HERE/fanout_bench.sh" >"$WORK/log.$round.$db" 2>&1 ||
    { tail -n 20 "$WORK/log.$round.$db" >&2; say "fanout_bench.sh failed ($db, round $round)"; exit 1; }
  sed "s/^/$round $db /" "$WORK/out" >>"$ALL"
}

for ((round = 1; round <= ROUNDS; round++)); do
  if ((round % 2)); then
    one_db "$round" postgres
    one_db "$round" mysql
  else
    one_db "$round" mysql
    one_db "$round" postgres
  fi
done
[[ -z "${BENCH_SRCCPU_OUT:-}" ]] || cp "$ALL" "$BENCH_SRCCPU_OUT"

# Lines: round db mode watchers rate rep key=value...
echo
echo "walwatch CPU per delivered event (and per commit), µs: MariaDB against PostgreSQL, $ROUNDS rounds of ${SECONDS_PER_RUN} s runs (tests/bench/source_cpu_bench.sh)"
echo
echo "| watchers | commits/s | PostgreSQL µs/event (median) | MariaDB µs/event (median) | MariaDB / PostgreSQL per event: median (min–max) | per commit: median (min–max) | per-round ratios per event | p99 ms PG / MariaDB (median) | machine CPU % PG / MariaDB (median) | runs saturated PG / MariaDB |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for pair in $CASES; do
  awk -v n="${pair%%:*}" -v rate="${pair##*:}" '
    function val(key,   i, kv) { for (i = 7; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) return kv[2] } return "" }
    function median(a, k,   i, j, t, b) {
      for (i = 1; i <= k; i++) b[i] = a[i]
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t }
      return k % 2 ? b[(k + 1) / 2] : (b[k / 2] + b[k / 2 + 1]) / 2 }
    function minmax(a, k, want,   i, m) { m = a[1]; for (i = 2; i <= k; i++) if ((want == "min") == (a[i] < m)) m = a[i]; return m }
    $3 == "one" && $4 == n && $5 == rate {
      ev[$1, $2] = val("ww_us_per_event"); cm[$1, $2] = val("ww_us_per_commit"); mc[$1, $2] = val("machine_cpu")
      p99[$1, $2] = val("p99_ms")
      # fanout_bench.sh: a watcher short of the last write, an error, or the
      # last event more than 1 s after the writer stopped.
      if (val("short") > 0 || val("errors") > 0 || val("tail_s") > 1) sat[$2]++
      if ($1 > rounds) rounds = $1 }
    END {
      k = 0
      for (r = 1; r <= rounds; r++) {
        if (!((r, "postgres") in ev) || !((r, "mysql") in ev) || ev[r, "postgres"] == 0 || cm[r, "postgres"] == 0) continue
        k++; pe[k] = ev[r, "postgres"]; me[k] = ev[r, "mysql"]; pm[k] = mc[r, "postgres"]; mm[k] = mc[r, "mysql"]
        pp[k] = p99[r, "postgres"]; mp[k] = p99[r, "mysql"]
        re[k] = me[k] / pe[k]; rc[k] = cm[r, "mysql"] / cm[r, "postgres"]
        list = list (k > 1 ? ", " : "") sprintf("%.2f", re[k]) }
      if (k == 0) { printf "| %s | %s | - | - | - | - | - | - | - | - |\n", n, rate; exit }
      printf "| %s | %s | %.2f | %.2f | %.2f (%.2f–%.2f) | %.2f (%.2f–%.2f) | %s | %.1f / %.1f | %.0f / %.0f | %d / %d of %d |\n",
        n, rate, median(pe, k), median(me, k), median(re, k), minmax(re, k, "min"), minmax(re, k, "max"),
        median(rc, k), minmax(rc, k, "min"), minmax(rc, k, "max"), list, median(pp, k), median(mp, k),
        median(pm, k), median(mm, k), sat["postgres"], sat["mysql"], k }' "$ALL"
done
