#!/usr/bin/env bash
# Writes BENCHMARKS.md (on stdout) from make bench's latest figures: one table
# of every figure with its goal, latest value, verdict, commit and command;
# the goals met or missed; the plots with their readings; each part's time.
#
#   tests/bench/summary.sh RESULTS_DIR [OLD_BENCHMARKS_MD] >BENCHMARKS.md
#
# RESULTS_DIR: tests/bench/results/ (run-bench.sh). The readings under the
# plots and the reasons for missed goals are written by a person: the text
# between <!-- reading:ID --> and <!-- /reading:ID --> (and why:ID) in
# OLD_BENCHMARKS_MD is carried over; new ones are placeholders.
set -euo pipefail
R=$1 OLD=${2:-}
MED='function med(s,   n, a, i, j, t) { n = split(s, a, " "); for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t } return n == 0 ? "" : (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }'

meta() { sed -n "s/^$2=//p" "$R/$1.meta" 2>/dev/null | head -n 1; }
when() { local c d; c=$(meta "$1" commit) d=$(meta "$1" date); [[ -n "$c" ]] && echo "$c, $d" || echo "-"; }
cmd() { echo "\`BENCH_ONLY=$1 make bench\`"; }
has() { [[ -s "$R/$1" ]]; }
# Fan-out: key over the runs of a case: med, max or all ("a, b, c"); of
# fanout.txt, or of the file FAN names (mfanout.txt: on MariaDB).
fan() {
  local file=${FAN:-fanout.txt}
  has "$file" || return 0
  awk -v how="$1" -v m="$2" -v n="$3" -v r="$4" -v key="$5" '$1 == m && $2 == n && $3 == r { for (i = 5; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) { v = v " " kv[2]; if (max == "" || kv[2] + 0 > max) max = kv[2] + 0; all = all sep kv[2]; sep = ", " } } }
    END { if (v == "") exit; if (how == "med") print med(v); else if (how == "max") print max; else print all } '"$MED" "$R/$file"
}
# Median of key over lines whose first word is $2 (etcd.txt, kine.txt, ...).
med_of() {
  has "$1" || return 0
  awk -v c="$2" -v key="$3" -v first="${4:-3}" '$1 == c { for (i = first; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) v = v " " kv[2] } } END { if (v != "") print med(v) } '"$MED" "$R/$1"
}
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 < b + 0) }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
verdict() { if "$@"; then echo "**met**"; else echo "**missed**"; fi; }

MISSED=()
goal_row() {  # ID FIGURE GOAL VALUE VERDICT PART
  echo "| $2 | $3 | $4 | $5 | $(when "$6") | $(cmd "$6") |"
  [[ "$5" != "**missed**" ]] || MISSED+=("$1|$2")
}
# FIGURE TARGET VALUE PART [VERDICT]: a reference figure has no verdict.
info_row() { echo "| $1 | $2 | $3 | ${5:--} | $(when "$4") | $(cmd "$4") |"; }
na() { echo "not measured yet"; }

# Text a person wrote between markers in the old BENCHMARKS.md, else $2.
carried() {
  local id=$1 default=$2 text=""
  [[ -n "$OLD" && -f "$OLD" ]] && text=$(awk -v id="$id" '$0 == "<!-- " id " -->" { on = 1; next } $0 == "<!-- /" id " -->" { on = 0 } on' "$OLD")
  echo "<!-- $id -->"
  if [[ -n "$text" ]]; then echo "$text"; else echo "$default"; fi
  echo "<!-- /$id -->"
}

cat <<HEAD
# walwatch benchmarks

Written by \`make bench\` (tests/bench/run-bench.sh; its budget is 30 minutes on 2 cores, the last run's time is at the end) from the latest
figures of each part in [tests/bench/results/](tests/bench/results/); the readings under the plots and
the reasons for missed goals are written by a person and kept from run to run. Every run's full report,
and every dated section written before this page, is in [tests/bench/HISTORY.md](tests/bench/HISTORY.md).
Peers are measured in the same run as walwatch, on the same workload, and compared as ratios.

Last run: $(sed -n 's/^date=//p' "$R/run.meta" 2>/dev/null || echo "-"), commit $(sed -n 's/^commit=//p' "$R/run.meta" 2>/dev/null || echo "-"), parts: $(sed -n 's/^only=//p' "$R/run.meta" 2>/dev/null || echo "-"), $(sed -n 's/^total_seconds=//p' "$R/run.meta" 2>/dev/null || echo "?") s in all (budget 1800 s); $(sed -n 's/^machine=//p' "$R/run.meta" 2>/dev/null || true).

## Goals

| figure | goal | latest | verdict | commit, date | command |
|---|---|---|---|---|---|
HEAD

# 1. 1,000 watchers of one resource at 2,000 events/s, p99 in every run.
all=$(fan all one 1000 2000 p99_ms) max=$(fan max one 1000 2000 p99_ms)
if [[ -n "$max" ]]; then
  goal_row g1 "1,000 watchers of one resource, 2,000 commits/s: p99 commit → client, every run" "< 50 ms in every run" "worst $max ms (runs: $all)" "$(verdict lt "$max" 50)" fanout
else goal_row g1 "1,000 watchers of one resource, 2,000 commits/s" "< 50 ms in every run" "$(na)" "-" fanout; fi
# 2. 5,000 selective watchers over 100 resources at 2,000 events/s.
rate=$(awk '$1 == "mixed" && $2 == 5000 { print $3; exit }' "$R/fanout.txt" 2>/dev/null || true)
max=$(fan max mixed 5000 "${rate:-2000}" p99_ms) all=$(fan all mixed 5000 "${rate:-2000}" p99_ms)
if [[ -n "$max" ]]; then
  goal_row g2 "5,000 selective watchers over 100 resources (mixed), ${rate} commits/s: p99" "< 50 ms" "worst $max ms (runs: $all)" "$(verdict lt "$max" 50)" fanout
else goal_row g2 "5,000 selective watchers over 100 resources" "< 50 ms" "$(na)" "-" fanout; fi
# 3, 4. etcd, watched through its Go client (etcd_bench.sh: etcd-per-stream,
# etcd-multiplexed; etcd-gateway only as an extra, "etcd" in runs before it).
# Median of key over the runs of server $1, N $2, rate $3 in etcd.txt.
etcd_med() { awk -v s="$1" -v n="$2" -v r="$3" -v key="$4" '$1 == s && $2 == n && $3 == r { for (i = 5; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) v = v " " kv[2] } } END { print med(v) } '"$MED" "$R/etcd.txt"; }
etcd_servers() { awk '$1 ~ /^etcd/ { print $1 }' "$R/etcd.txt" | sort -u; }
if has etcd.txt && grep -q '^missing' "$R/etcd.txt"; then
  goal_row g3 "walwatch p99 against etcd p99, same load" "walwatch ≤ etcd" "not measured: etcd is not installed" "-" etcd
  goal_row g4 "idle memory per watcher against etcd" "walwatch ≤ ¼ of etcd" "not measured: etcd is not installed" "-" etcd
elif has etcd.txt; then
  # Against etcd's best mode (lowest p99) in each case.
  vals="" ok=1
  while read -r n r; do
    w=$(etcd_med walwatch "$n" "$r" p99_ms) best="" each=""
    for s in $(etcd_servers); do
      e=$(etcd_med "$s" "$n" "$r" p99_ms)
      [[ -n "$e" ]] || continue
      each+="${each:+, }${s#etcd-} $e"
      if [[ -z "$best" ]] || lt "$e" "$best"; then best=$e; fi
    done
    vals+="${vals:+; }$n × $r/s: $w against $each ms (best etcd / walwatch $(ratio "$best" "$w"))"
    le "$w" "$best" || ok=0
  done < <(awk '$1 == "walwatch" { print $2, $3 }' "$R/etcd.txt" | sort -u -k1,1n -k2,2n)
  goal_row g3 "walwatch p99 against etcd's best p99 of its watch modes, same watchers, objects and rate" "walwatch ≤ etcd" "$vals" "$(verdict test $ok = 1)" etcd
  ww=$(awk '$1 == "idle" { sub(/.*=/, "", $3); print $3 }' "$R/etcd.txt") et=$(awk '$1 == "idle" { sub(/.*=/, "", $4); print $4 }' "$R/etcd.txt")
  n=$(awk '$1 == "idle" { print $2 }' "$R/etcd.txt")
  goal_row g4 "idle memory per watcher ($n watchers, fresh servers): walwatch's RSS growth against etcd's lowest (RSS, or heap + stacks after GC, any mode)" "walwatch ≤ ¼ of etcd" "$ww against $et KiB (etcd / walwatch $(ratio "$et" "$ww"))" "$(verdict le "$(awk -v w="$ww" 'BEGIN { print 4 * w }')" "$et")" etcd
else
  goal_row g3 "walwatch p99 against etcd p99" "walwatch ≤ etcd" "$(na)" "-" etcd
  goal_row g4 "idle memory per watcher against etcd" "walwatch ≤ ¼ of etcd" "$(na)" "-" etcd
fi
# 5. Drain.
if has drain.env; then
  w=$(sed -n 's/^walwatch_rows_per_s=//p' "$R/drain.env") p=$(sed -n 's/^recvlogical_rows_per_s=//p' "$R/drain.env") rows=$(sed -n 's/^rows=//p' "$R/drain.env")
  tr=$(awk -v w="$w" -v p="$p" 'BEGIN { printf "%.2f", p / w }')
  goal_row g5 "backlog drain, $rows Pods of ~3.5 KB: walwatch's time against pg_recvlogical's" "≤ 1.11 ×" "$tr × ($w against $p rows/s)" "$(verdict le "$tr" 1.11)" drain
else goal_row g5 "backlog drain against pg_recvlogical" "≤ 1.11 ×" "$(na)" "-" drain; fi
# 7. MariaDB: the drain against mariadb-binlog, and 1,000 watchers' p99.
if has mdrain.txt; then
  kvm() { sed -n "s/^$1=//p" "$R/mdrain.txt" | tr -d '"'; }
  tr=$(kvm ratio)
  goal_row g7 "MariaDB backlog drain, $(kvm rows) Pods of ~$(kvm object_bytes) B: walwatch --source mysql's time against mariadb-binlog $(kvm mbl_flags)'s" "≤ 1.11 ×" "$tr × ($(kvm walwatch_s) against $(kvm mbl_s) s; first to last event $(kvm stream_ratio) ×)" "$(verdict le "$tr" 1.11)" mdrain
else goal_row g7 "MariaDB backlog drain against mariadb-binlog" "≤ 1.11 ×" "$(na)" "-" mdrain; fi
# The goal's case is the highest rate (a run at 1,000/s comes first).
mrate=$(awk '$1 == "one" && $3 > r { r = $3 } END { if (r) print r }' "$R/mfanout.txt" 2>/dev/null || true)
mn=$(awk '$1 == "one" { print $2; exit }' "$R/mfanout.txt" 2>/dev/null || true)
max=$(FAN=mfanout.txt fan max one "${mn:-1000}" "${mrate:-2000}" p99_ms)
if [[ -n "$max" ]]; then
  all=$(FAN=mfanout.txt fan all one "$mn" "$mrate" p99_ms) p50=$(FAN=mfanout.txt fan med one "$mn" "$mrate" p50_ms)
  goal_row g8 "MariaDB: $mn watchers of one resource, $mrate commits/s: p99 commit → client, every run (p50 median)" "< 50 ms in every run" "worst $max ms (runs: $all; p50 $p50 ms)" "$(verdict lt "$max" 50)" mfanout
else goal_row g8 "MariaDB: 1,000 watchers of one resource, 2,000 commits/s" "< 50 ms in every run" "$(na)" "-" mfanout; fi
# 6. kine (k3s's SQL watch) on the same PostgreSQL: spread, 1,000 watchers.
if has kine.txt && grep -q '^kine2-100ms/spread ' "$R/kine.txt"; then
  wp=$(med_of kine.txt walwatch/spread p50_ms) kp=$(med_of kine.txt kine/spread p50_ms) k2=$(med_of kine.txt kine2-100ms/spread p50_ms)
  wd=$(med_of kine.txt walwatch/spread db_cpu) kd=$(med_of kine.txt kine/spread db_cpu)
  wc=$(med_of kine.txt walwatch/spread peer_cpu) kc=$(med_of kine.txt kine/spread peer_cpu)
  kq=$(med_of kine.txt kine/spread queries_per_s)
  ok=0; lt "$wp" "$kp" && awk -v a="$k2" -v b="$wp" 'BEGIN { exit !(b > 0 && a / b >= 10) }' && lt "$wd" "$kd" && lt "$wc" "$kc" && ok=1
  goal_row g6 "kine on the same PostgreSQL (1,000 watchers over 100 resources, 200 commits/s): p50 with the writes through that kine / through a second kine polling every 100 ms; PostgreSQL's CPU; the peer's CPU" "walwatch p50 lower, ≥ 10 × lower than the 100 ms poll; less PostgreSQL and peer CPU" "p50 $wp against $kp / $k2 ms ($(ratio "$kp" "$wp") × / $(ratio "$k2" "$wp") ×); PostgreSQL $wd against $kd % ($kq kine queries/s); peer $wc against $kc %" "$(verdict test $ok = 1)" kine
else goal_row g6 "kine against walwatch" "walwatch p50 lower, ≥ 10 × lower than the 100 ms poll; less PostgreSQL and peer CPU" "$(na)" "-" kine; fi
# 9. Relist storm: N WatchLists of one resource at once, against the same
# bytes written from memory to the same readers (storm_ceiling).
if has relist_storm.txt; then
  rows=$(sed -n 's/^setup rows=\([0-9]*\).*/\1/p' "$R/relist_storm.txt")
  worst=$(awk '$1 == "storm" { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "ratio" && kv[2] + 0 > w) w = kv[2] + 0 } } END { print w }' "$R/relist_storm.txt")
  vals=$(awk '$1 == "storm" { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } printf "%sN=%s: %.2f × (%.2f against %.3f s)", sep, $2, v["ratio"], v["ww_wall_s"], v["limit_wall_s"]; sep = "; " }' "$R/relist_storm.txt")
  goal_row g9 "relist storm, N WatchLists (sendInitialEvents) of $rows Pods at once: walwatch's wall time against the same bytes from memory" "≤ 1.5 × for every N" "$vals" "$(verdict le "$worst" 1.5)" relist_storm
else goal_row g9 "relist storm: N WatchLists at once against the same bytes from memory" "≤ 1.5 ×" "$(na)" "-" relist_storm; fi

cat <<MID

## Every figure

| figure | target or reference | latest | verdict | commit, date | command |
|---|---|---|---|---|---|
MID
if has decoder.txt; then
  lo=$(awk '$1 == "Decode" { v = $4 / 1e9; if (lo == "" || v < lo) lo = v } END { printf "%.2f", lo }' "$R/decoder.txt")
  hi=$(awk '$1 == "Decode" { v = $4 / 1e9; if (v > hi) hi = v } END { printf "%.2f", hi }' "$R/decoder.txt")
  # Against raw simdjson On-Demand on the same lines, case by case.
  rel=$(awk '$1 == "SimdjsonOnDemand" { raw[$2 " " $3] = $4 } $1 == "Decode" { dec[$2 " " $3] = $4 }
    END { for (k in dec) if (raw[k] > 0) { r = dec[k] / raw[k]; if (lo == "" || r < lo) lo = r; if (r > hi) hi = r }
          if (lo != "") printf "%.2f – %.2f", lo, hi }' "$R/decoder.txt")
  info_row "decoder (wal2json → row), one core, objects of 1 to 65 KB" "≥ 1 GB/s or ≥ ½ of raw simdjson" "$lo – $hi GB/s; ${rel:-?} of raw On-Demand" decoder "$(verdict le 0.5 "${rel%% *}")"
  # pgoutput's decoder on the same rows, time per row over wal2json's,
  # measured in the same iterations.
  pw=$(awk '$1 == "PgoutputDecode" && $9 > 0 { if (lo == "" || $9 < lo) lo = $9; if ($9 > hi) hi = $9 }
    END { if (lo != "") printf "%.2f – %.2f", lo, hi }' "$R/decoder.txt")
  if [[ -n "$pw" ]]; then
    info_row "decoder (pgoutput → row) time per row over wal2json's, same rows" "≤ 1 (no slower than wal2json)" "$pw" decoder "$(verdict le "${pw##* }" 1)"
  fi
fi
if has quiet.txt; then
  q=$(awk '$1 == "BM_HotAppend" && $2 == "median" && $3 == "watched_over_bare" { print $4 }' "$R/quiet.txt")
  info_row "event log: appender's cost with 1,000 quiet watchers waiting (with / without)" "≈ 1" "$(printf '%.2f' "${q:-0}")" quiet
fi
if has drain.txt; then
  while read -r k ds cpu; do
    info_row "$k replica(s) draining one backlog at once (a slot each)" "reference" "drain $ds s, primary CPU $cpu s per replica" drain
  done < <(awk '$1 == "replicas" { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } print $2, v["drain_s"], v["primary_cpu_s_per_replica"] }' "$R/drain.txt")
fi
if has standby.txt; then
  v=$(sed -n 's/^pg_version=//p' "$R/standby.env" 2>/dev/null || true)
  while read -r k on ds pc sc; do
    info_row "$k replica(s) draining one backlog at once, slots on the $on (PostgreSQL ${v:-16+}, pgoutput)" "reference" "drain $ds s; CPU per replica: primary $pc s, standby $sc s" standby
  done < <(awk '$1 == "replicas" { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } print $2, v["on"], v["drain_s"], v["primary_cpu_s_per_replica"], v["standby_cpu_s_per_replica"] }' "$R/standby.txt")
fi
if has fanout.txt; then
  for c in "one 1000 1000" "one 5000 100" "one 1 5000"; do
    read -r m n r <<<"$c"
    p=$(fan med "$m" "$n" "$r" p99_ms)
    [[ -z "$p" ]] || info_row "fan-out $n watchers × $r commits/s: p50 / p99, walwatch CPU" "reference (plots)" "$(fan med "$m" "$n" "$r" p50_ms) / $p ms, $(fan med "$m" "$n" "$r" ww_cpu) % of a core" fanout
  done
  while read -r n r; do
    info_row "mixed workload, $n selective watchers, $r commits/s: p50 / p99, deliveries/s, walwatch CPU, 410s" "p99 < 50 ms, 0 410s" "$(fan med mixed "$n" "$r" p50_ms) / $(fan med mixed "$n" "$r" p99_ms) ms, $(fan med mixed "$n" "$r" deliveries_per_s)/s, $(fan med mixed "$n" "$r" ww_cpu) %, 410s: $(fan all mixed "$n" "$r" e410)" fanout
  done < <(awk '$1 == "mixed" { print $2, $3 }' "$R/fanout.txt" | sort -u -k1,1n)
fi
if has ceiling.txt; then
  while read -r spec; do
    info_row "ideal server (no database), $spec (watchers:rate:batch:threads[:write]): p99" "what the machine allows" "$(med_of ceiling.txt "$spec" p99_ms) ms" ceiling
  done < <(awk '{ print $1 }' "$R/ceiling.txt" | sort -u)
fi
if has memory.txt; then
  while read -r n per; do
    info_row "idle watcher, walwatch RSS, $n watchers" "≤ 16 KB" "$per KiB" memory "$(verdict le "$per" 16)"
  done < <(awk '$1 == "idle" { print $2, $5 }' "$R/memory.txt")
  while read -r b rw; do
    info_row "event log RSS per wire byte, $b-byte objects" "≤ 1.1" "$rw" memory "$(verdict le "$rw" 1.1)"
  done < <(awk '$1 == "log" { print $2, $5 }' "$R/memory.txt")
fi
if has replay.txt; then
  info_row "restart: window of $(awk '{ sub(/events=/, "", $1); print $1; exit }' "$R/replay.txt") events rebuilt after" "reference" "$(awk '{ print $3 }' "$R/replay.txt" | sort -g | head -n 1) s (best of $(wc -l <"$R/replay.txt"))" replay
fi
if has quiet_e2e.txt; then
  b=$(med_of quiet_e2e.txt 0 ww_us_per_commit) n=$(awk '$1 != 0 { print $1; exit }' "$R/quiet_e2e.txt")
  w=$(med_of quiet_e2e.txt "$n" ww_us_per_commit)
  e=$(awk -v n="$n" '$1 == n { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "e410") s += kv[2] } } END { print s + 0 }' "$R/quiet_e2e.txt")
  info_row "hot resource's cost with $n quiet watchers: walwatch CPU per hot commit, with / without; their 410s" "≈ 1; 0 410s" "$(ratio "$w" "$b") ($w / $b µs); 410s: $e" quiet_e2e
fi
if has etcd.txt && ! grep -q '^missing' "$R/etcd.txt"; then
  while read -r n r; do
    w=$(etcd_med walwatch "$n" "$r" cpu_us_per_delivery)
    for s in $(etcd_servers); do
      e=$(etcd_med "$s" "$n" "$r" cpu_us_per_delivery)
      info_row "CPU per delivered event, $n watchers × $r/s: walwatch + PostgreSQL against $s" "ratio" "$w against $e µs (etcd / walwatch $(ratio "$e" "$w"))" etcd
      if grep -q "^$s .*go_mib=" "$R/etcd.txt"; then
        info_row "$s, $n watchers × $r/s: p50 / p99, heap + stacks after GC (watchers open), etcd CPU; client CPU, machine CPU" "reference" "$(etcd_med "$s" "$n" "$r" p50_ms) / $(etcd_med "$s" "$n" "$r" p99_ms) ms (walwatch $(etcd_med walwatch "$n" "$r" p50_ms) / $(etcd_med walwatch "$n" "$r" p99_ms)), $(etcd_med "$s" "$n" "$r" go_mib) MiB, $(etcd_med "$s" "$n" "$r" server_cpu) % of a core; $(etcd_med "$s" "$n" "$r" client_cpu) % of a core, $(etcd_med "$s" "$n" "$r" machine_cpu) % of the machine" etcd
      fi
    done
  done < <(awk '$1 == "walwatch" { print $2, $3 }' "$R/etcd.txt" | sort -u -k1,1n -k2,2n)
fi
if has kine.txt && ! grep -q '^missing' "$R/kine.txt"; then
  for c in $(awk '{ print $1 }' "$R/kine.txt" | awk '!seen[$0]++'); do
    info_row "$c ($(med_of kine.txt "$c" watchers) watchers, $(med_of kine.txt "$c" rate_asked) commits/s): p50 / p99, deliveries/s, PostgreSQL / peer CPU, kine queries/s (polls)" "reference" "$(med_of kine.txt "$c" p50_ms) / $(med_of kine.txt "$c" p99_ms) ms, $(med_of kine.txt "$c" deliveries_per_s)/s, $(med_of kine.txt "$c" db_cpu) / $(med_of kine.txt "$c" peer_cpu) %, $(med_of kine.txt "$c" queries_per_s)/s ($(med_of kine.txt "$c" polls_per_s)/s)" kine
  done
fi
if has relist_storm.txt; then
  while read -r n reads pg ww rss hdr ret; do
    info_row "relist storm, $n WatchLists at once: state reads; CPU of PostgreSQL / walwatch; walwatch's peak RSS; slowest 200 header; 504s retried" "reference (issue 40: one state read per storm)" "$reads reads; $pg / $ww s; $rss MiB; $hdr s; $ret" relist_storm
  done < <(awk '$1 == "storm" { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } printf "%s %s %s %s %.0f %s %s\n", $2, v["state_reads"], v["pg_cpu_s"], v["ww_cpu_s"], v["ww_rss_peak_kb"] / 1024, v["ww_header_max_s"], v["ww_retries"] }' "$R/relist_storm.txt")
fi

if has debezium.txt && grep -q '^missing' "$R/debezium.txt"; then
  info_row "Debezium (embedded engine, pgoutput) beside walwatch" "reference" "not measured: $(sed -n 's/^missing //p' "$R/debezium.txt")" debezium
elif has debezium.txt; then
  dv=$(awk '$1 == "meta" { for (i = 3; i <= NF; i++) if ($i ~ /^debezium=/) { sub(/^debezium=/, "", $i); print $i } }' "$R/debezium.txt")
  dn=$(med_of debezium.txt meta rows) drate=$(med_of debezium.txt meta rate)
  dvar() { med_of debezium.txt "$1" "$2"; }
  if grep -q '^drain\.ww_pgoutput ' "$R/debezium.txt" && grep -q '^drain\.dbz ' "$R/debezium.txt"; then
    w=$(dvar drain.ww_pgoutput rows_per_s) d=$(dvar drain.dbz rows_per_s)
    wc=$(dvar drain.ww_pgoutput cpu_s_per_1k) dc=$(dvar drain.dbz cpu_s_per_1k)
    info_row "backlog drain, $dn Pods: walwatch --plugin pgoutput against Debezium $dv embedded (pgoutput, defaults): rows/s; consumer CPU s per 1,000 rows" "ratio" "$w against $d rows/s (walwatch / Debezium $(ratio "$w" "$d")); CPU $wc against $dc s (Debezium / walwatch $(ratio "$dc" "$wc"))" debezium
  fi
  for c in ww_pgoutput ww_wal2json dbz dbz_poll10 dbz_json; do
    grep -q "^drain\.$c " "$R/debezium.txt" || continue
    info_row "backlog drain beside Debezium, $c: rows/s (start / first event → last), consumer and PostgreSQL CPU s per 1,000 rows" "reference" "$(dvar "drain.$c" rows_per_s) / $(dvar "drain.$c" stream_rows_per_s) rows/s; CPU $(dvar "drain.$c" cpu_s_per_1k) and $(dvar "drain.$c" pg_cpu_s_per_1k) s" debezium
  done
  while read -r c; do
    info_row "commit → consumer beside Debezium, $c, $drate commits/s: p50 / p99 (after the warm-up), consumer CPU per commit" "reference" "$(dvar "latency.$c" p50_ms) / $(dvar "latency.$c" p99_ms) ms, $(dvar "latency.$c" consumer_us_per_commit) µs" debezium
  done < <(awk '$1 ~ /^latency\./ { sub(/^latency\./, "", $1); if (!seen[$1]++) print $1 }' "$R/debezium.txt")
fi
if ((${#MISSED[@]})); then
  echo
  echo "## Why a goal is missed"
  echo
  echo "Each reason comes from a profile of the case (perf record -g on walwatch and the machine during it;"
  echo "drain_bench.sh records one with BENCH_PERF_DIR), not from a guess."
  for m in "${MISSED[@]}"; do
    echo
    echo "**${m#*|}**"
    echo
    carried "why:${m%%|*}" "_Missed: the profile-based reason is to be written here after the full run on a quiet machine._"
  done
fi

echo
echo "## Plots"
plot_section() {  # ID TITLE
  [[ -e "tests/bench/plots/$1.svg" ]] || return 0
  echo
  echo "### $2"
  echo
  echo "![$2](tests/bench/plots/$1.svg)"
  echo
  carried "reading:$1" "_Reading: to be written by a person after the full run on a quiet machine._"
}
plot_section latency_watchers "Commit → client latency against watchers"
plot_section latency_rate "Commit → client latency against the write rate"
plot_section peers "walwatch, etcd and kine on the same workload"
plot_section idle_memory "Memory per idle watcher"
plot_section drain "Backlog drain beside pg_recvlogical"
plot_section replicas "Replicas on one primary"
plot_section quiet "A hot resource's cost to quiet watchers"

if [[ -s "$R/times.txt" ]]; then
  echo
  echo "## Time per part (last run)"
  echo
  echo "| $(awk '{ printf "%s%s", sep, $1; sep = " | " }' "$R/times.txt") | all |"
  echo "|$(awk '{ printf "---|" }' "$R/times.txt")---|"
  echo "| $(awk '{ printf "%s%s s", sep, $2; sep = " | " }' "$R/times.txt") | $(sed -n 's/^total_seconds=//p' "$R/run.meta") s |"
fi
