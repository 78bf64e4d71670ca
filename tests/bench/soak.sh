#!/usr/bin/env bash
# Soak (`make soak`; not in CI): 1,000 watchers and steady writes for
# SOAK_MINUTES (10), with walwatch's RSS and open descriptors sampled; both
# must stay flat, and no watcher may lose, repeat or reorder an event.
#
#   tests/bench/soak.sh                 # 10 minutes, appends to tests/bench/HISTORY.md
#   SOAK_MINUTES=1 SOAK_NO_APPEND=1 tests/bench/soak.sh   # a quick smoke run
#
# A throwaway PostgreSQL 15 + wal2json; walwatch with --max-log-bytes
# SOAK_MAX_LOG (32Mi for 10 minutes at 200 commits/s, less for shorter or
# slower runs: the log fills within the warm-up, so a full log is the steady
# state being watched); fanout_client (one process, one connection per
# watcher, on epoll) opens SOAK_WATCHERS watches of /apis/apps/v1/deployments
# with allowWatchBookmarks=true and a timeoutSeconds longer than the run
# from walwatch's current RV; bench_writer
# updates 100 Deployments at SOAK_RATE commits/s for the whole run. Every
# SOAK_SAMPLE seconds: walwatch's VmRSS, open descriptors (/proc/PID/fd),
# CPU, and the log's events and bytes (/metrics), into samples.csv. When the
# writer stops, the client waits until every watcher has the last write.
#
# Flat means, with the first 20% of the run as warm-up, the first window the
# next 10% (minutes 2-3 of 10) and the last window the last 10% (minutes
# 9-10):
#   RSS:  mean of the last window <= mean of the first window x 1.05;
#   fds:  the last window's largest count <= the first window's largest;
#   and every watcher still streaming, with zero errors, lost, duplicate or
#   out-of-order events, and the writer's last write received by all.
# Exit status 0 when all hold. The report (and samples.csv) is printed and,
# unless SOAK_NO_APPEND=1, appended to tests/bench/HISTORY.md.
#
# Environment: SOAK_MINUTES (10), SOAK_WATCHERS (1000), SOAK_RATE (200),
# SOAK_SAMPLE (10 s; 2 s when SOAK_MINUTES < 3), SOAK_MAX_LOG (see above),
# SOAK_NO_APPEND, BENCH_OBJECT_BYTES (1024), plus bench_lib.sh's (the
# binaries are built in BENCH_BUILD_DIR, default build-bench).
set -euo pipefail

cd "$(dirname "$0")/../.."
BUILD_DIR=${BENCH_BUILD_DIR:-build-bench}
MINUTES=${SOAK_MINUTES:-10}
WATCHERS=${SOAK_WATCHERS:-1000}
RATE=${SOAK_RATE:-200}
# The log must fill within the warm-up (20 % of the run) for RSS to level
# off: ~2 KB per event at SOAK_RATE; 32Mi for 10 minutes at 200/s.
MAX_LOG=${SOAK_MAX_LOG:-$(awk -v m="${SOAK_MINUTES:-10}" -v r="${SOAK_RATE:-200}" \
  'BEGIN { x = int(0.15 * m * 60 * r * 2000 / 1048576); if (x < 1) x = 1; if (x > 32) x = 32; print x "Mi" }')}
OBJECT_BYTES=${BENCH_OBJECT_BYTES:-1024}
if [[ -z "${SOAK_SAMPLE:-}" ]]; then
  SAMPLE=10
  awk -v m="$MINUTES" 'BEGIN { exit !(m < 3) }' && SAMPLE=2
else
  SAMPLE=$SOAK_SAMPLE
fi
[[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "soak: SOAK_MINUTES must be a number" >&2; exit 2; }

echo "soak: building in $BUILD_DIR ..." >&2
# shellcheck source=tests/bench/bench_lib.sh
source tests/bench/bench_lib.sh
bench_build "$BUILD_DIR" "${JOBS:-2}" walwatch bench_writer fanout_client >/dev/null
WALWATCH_BIN=${WALWATCH_BIN:-$PWD/$BUILD_DIR/walwatch}

DURATION=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
bench_init soak
"$BENCH_WRITER" --conninfo "$CONNINFO" --setup --mode one --object-bytes "$OBJECT_BYTES" >/dev/null
start_walwatch bench_soak --max-log-bytes "$MAX_LOG"
WALWATCH_CMD="walwatch --slot bench_soak --max-log-bytes $MAX_LOG --socket ... --metrics-address ... --log-level warn"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

rv=$(fresh_rv)
# Without timeoutSeconds walwatch, like the apiserver, ends a watch after a
# random 30 to 60 minutes, and the client would have to re-watch; the soak
# holds the same 1,000 streams for the whole run instead.
TIMEOUT_S=$((DURATION + 900))
"$FANOUT_CLIENT" --socket "$SOCK" --watchers "$WATCHERS" --check-seq \
  --path "/apis/apps/v1/deployments?watch=1&allowWatchBookmarks=true&resourceVersion=$rv&timeoutSeconds=$TIMEOUT_S" \
  --ready-file "$DIR/ready" --done-file "$DIR/done" --drain-timeout 120 \
  --report-every 60 >"$DIR/client.out" 2>"$DIR/client.err" &
CLIENT_PID=$!
wait_for_file "$DIR/ready" "$CLIENT_PID" || { cat "$DIR/client.err" >&2; bench_die "the watchers did not start"; }
bench_say "$WATCHERS watchers streaming; writing $RATE commits/s for $MINUTES min, sampling every $SAMPLE s"

"$BENCH_WRITER" --conninfo "$CONNINFO" --mode one --object-bytes "$OBJECT_BYTES" \
  --rate "$RATE" --duration "$DURATION" --writers 1 --out "$DIR/done" >"$DIR/writer.out" &
WRITER_PID=$!

SAMPLES=$DIR/samples.csv
echo "seconds,rss_kib,fds,cpu_percent,log_events,log_bytes,client_open" >"$SAMPLES"
t0=$(now_s)
ticks0=$(cpu_ticks "$WALWATCH_PID")
prev_t=$t0 prev_ticks=$ticks0
while kill -0 "$WRITER_PID" 2>/dev/null; do
  sleep "$SAMPLE"
  kill -0 "$WALWATCH_PID" 2>/dev/null || bench_die "walwatch died"
  t=$(now_s) ticks=$(cpu_ticks "$WALWATCH_PID")
  awk -v t="$t" -v t0="$t0" -v pt="$prev_t" -v k="$ticks" -v pk="$prev_ticks" -v hz="$CLK_TCK" \
    -v rss="$(rss_kb "$WALWATCH_PID")" -v fds="$(fd_count "$WALWATCH_PID")" \
    -v ev="$(metric walwatch_event_log_events)" -v lb="$(metric walwatch_event_log_bytes)" \
    -v open="$(find "/proc/$CLIENT_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)" \
    'BEGIN { printf "%.0f,%d,%d,%.0f,%d,%d,%d\n", t - t0, rss, fds, 100 * (k - pk) / hz / (t - pt), ev, lb, open }' >>"$SAMPLES"
  prev_t=$t prev_ticks=$ticks
done
wait "$WRITER_PID" || bench_die "the writer failed: $(cat "$DIR/writer.out")"
wait "$CLIENT_PID" || true
CLIENT_PID=""
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
stop_walwatch

# --- the verdict ----------------------------------------------------------------
C=$DIR/client.out W=$DIR/writer.out
read -r rss_first rss_last fd_first fd_last rss_slope <<<"$(awk -F, -v d="$DURATION" '
  NR == 1 { next }
  { t = $1 }
  t > 0.2 * d && t <= 0.3 * d { rf += $2; nf++; if ($3 > ff) ff = $3 }
  t > 0.9 * d { rl += $2; nl++; if ($3 > fl) fl = $3 }
  t > 0.2 * d { n++; sx += t; sy += $2; sxx += t * t; sxy += t * $2 }
  END {
    slope = (n > 1 && n * sxx != sx * sx) ? (n * sxy - sx * sy) / (n * sxx - sx * sx) * 60 : 0
    printf "%.0f %.0f %d %d %.1f\n", (nf ? rf / nf : 0), (nl ? rl / nl : 0), ff, fl, slope }' "$SAMPLES")"
rss_ok=$(awk -v a="$rss_first" -v b="$rss_last" 'BEGIN { print (a > 0 && b <= a * 1.05) ? 1 : 0 }')
fd_ok=$(( fd_first > 0 && fd_last <= fd_first ? 1 : 0 ))
events_ok=1
for key in errors lost duplicates out_of_order short_at_end ended failed; do
  [[ "$(kv "$C" "$key")" == 0 ]] || events_ok=0
done
[[ "$(kv "$C" streaming)" == "$WATCHERS" ]] || events_ok=0
verdict="flat"
((rss_ok && fd_ok)) || verdict="NOT flat"
((events_ok)) || verdict+=", events NOT exact"
((events_ok)) && verdict+=", every event exactly once and in order"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- cdc watchserver schema tests/bench 2>/dev/null || commit+=" (with uncommitted changes in the working tree)"
report() {
  echo
  echo "## Soak $(date -u '+%Y-%m-%d %H:%M UTC') — commit $commit"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), Linux $(uname -r); load average $LOAD_BEFORE before, $LOAD_AFTER after."
  echo
  echo "Command: \`SOAK_MINUTES=$MINUTES SOAK_WATCHERS=$WATCHERS SOAK_RATE=$RATE SOAK_MAX_LOG=$MAX_LOG make soak\` (tests/bench/soak.sh); walwatch: \`$WALWATCH_CMD\`."
  echo
  echo "$WATCHERS watchers of one resource (allowWatchBookmarks), $(kv "$W" writes) one-row UPDATEs at $(kv "$W" rate) commits/s over $MINUTES min; walwatch sampled every $SAMPLE s (warm-up: the first 20 %)."
  echo
  echo "| | first window (20–30 %) | last window (90–100 %) | criterion | result |"
  echo "|---|---|---|---|---|"
  echo "| RSS, mean | $((rss_first / 1024)) MiB | $((rss_last / 1024)) MiB | last ≤ first × 1.05 | $( ((rss_ok)) && echo flat || echo grew) ($(awk -v a="$rss_first" -v b="$rss_last" 'BEGIN { printf "%+.1f%%", (a > 0 ? 100 * (b - a) / a : 0) }'); slope after warm-up $rss_slope KiB/min) |"
  echo "| open descriptors, max | $fd_first | $fd_last | last ≤ first | $( ((fd_ok)) && echo flat || echo grew) |"
  echo
  echo "Watchers: $(kv "$C" streaming) of $WATCHERS streams opened (200), $(kv "$C" events) events and $(kv "$C" bookmarks) bookmarks received; errors $(kv "$C" errors), streams ended $(kv "$C" ended), lost $(kv "$C" lost), duplicates $(kv "$C" duplicates), out of order $(kv "$C" out_of_order), short of the last write $(kv "$C" short_at_end); commit → client p50 $(awk -v v="$(kv "$C" latency_p50_us)" 'BEGIN { printf "%.1f", v / 1e3 }') ms, p99 $(awk -v v="$(kv "$C" latency_p99_us)" 'BEGIN { printf "%.1f", v / 1e3 }') ms, max $(awk -v v="$(kv "$C" latency_max_us)" 'BEGIN { printf "%.0f", v / 1e3 }') ms."
  echo
  echo "**Result: $verdict.**"
  echo
  echo "<details><summary>samples (seconds, RSS KiB, fds, walwatch CPU %, log events, log bytes, client fds)</summary>"
  echo
  echo '```'
  cat "$SAMPLES"
  echo '```'
  echo
  echo "</details>"
}
report | tee "$DIR/report.md"
if [[ "${SOAK_NO_APPEND:-}" != 1 ]]; then
  cat "$DIR/report.md" >>"$ROOT/tests/bench/HISTORY.md"
  bench_say "appended to tests/bench/HISTORY.md"
fi
[[ "$verdict" == "flat, every event exactly once and in order" ]]
