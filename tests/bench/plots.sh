#!/usr/bin/env bash
# Draws BENCHMARKS.md's plots (SVG, gnuplot) from make bench's latest figures.
#
#   tests/bench/plots.sh RESULTS_DIR OUT_DIR [png]
#
# RESULTS_DIR is tests/bench/results/ (run-bench.sh writes it); a plot whose
# figures are missing is skipped and said so. With `png`, PNGs instead
# (for looking at them where an SVG viewer is not at hand).
#   latency_watchers  commit -> client p50/p99 against watchers, one line per
#                     rate (fanout.txt, mode one; medians of the runs)
#   latency_rate      the same against commits/s, one line per watcher count
#   idle_memory       RSS per idle watcher against watchers (memory.txt),
#                     etcd's beside it (etcd.txt)
#   drain             drain time against backlog size, walwatch and
#                     pg_recvlogical (drain.txt); on MariaDB, walwatch
#                     --source mysql and mariadb-binlog (mdrain.txt)
#   replicas          drain time and primary CPU per replica against
#                     replicas (drain.txt)
#   quiet             walwatch CPU per hot commit with and without 1,000
#                     watchers of quiet resources (quiet_e2e.txt)
#   peers             p50/p99 of walwatch, etcd and kine (etcd.txt,
#                     kine.txt)
set -euo pipefail
IN=$1 OUT=$2 FORMAT=${3:-svg}
command -v gnuplot >/dev/null || { echo "plots: gnuplot is missing (apt-get install gnuplot-nox); no plots" >&2; exit 0; }
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/ww-plots.XXXXXX)
trap 'rm -rf -- "$TMP"' EXIT
say() { echo "plots: $*" >&2; }
# awk's median of the numbers in a space-separated string (any awk: no asort).
MED='function med(s,   n, a, i, j, t) { n = split(s, a, " "); for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t } return n == 0 ? "" : (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }'


if [[ "$FORMAT" == png ]]; then
  TERM_LINE="set terminal pngcairo size 900,560 font 'sans,11'"
else
  TERM_LINE="set terminal svg size 900,560 dynamic font 'sans,13' background '#ffffff'"
fi
plot() {  # NAME: gnuplot commands on stdin
  { echo "$TERM_LINE"; echo "set output '$OUT/$1.$FORMAT'"
    echo "set grid; set key inside left top box opaque"; cat; } | gnuplot
  say "drew $OUT/$1.$FORMAT"
}
# Median of key $2 over the fanout runs "mode n rate rep k=v..." of mode $1,
# one "n rate value" line per case.
fanout_medians() {
  awk -v mode="$1" -v key="$2" '$1 == mode { for (i = 5; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) v[$2 " " $3] = v[$2 " " $3] " " kv[2] } }
    END { for (c in v) print c, med(v[c]) } '"$MED" "$IN/fanout.txt" | sort -k1,1n -k2,2n
}

if [[ -s "$IN/fanout.txt" ]]; then
  fanout_medians one p50_ms >"$TMP/p50"
  fanout_medians one p99_ms >"$TMP/p99"
  join -j1 <(awk '{ print $1 "_" $2, $1, $2, $3 }' "$TMP/p50" | sort) \
    <(awk '{ print $1 "_" $2, $3 }' "$TMP/p99" | sort) | awk '{ print $2, $3, $4, $5 }' | sort -k1,1n -k2,2n >"$TMP/lat"
  rates=$(awk '{ print $2 }' "$TMP/lat" | sort -nu | tr '\n' ' ')
  watchers=$(awk '{ print $1 }' "$TMP/lat" | sort -nu | tr '\n' ' ')
  cmds="" sep=""
  for r in $rates; do
    awk -v r="$r" '$2 == r' "$TMP/lat" >"$TMP/rate.$r"
    cmds+="$sep'$TMP/rate.$r' using 1:4 with linespoints lw 2 title 'p99, $r commits/s', '$TMP/rate.$r' using 1:3 with linespoints dt 2 title 'p50, $r commits/s'"
    sep=", "
  done
  plot latency_watchers <<GP
set title "Commit → client latency against watchers (one resource, objects of about 1 KB)"
set xlabel "watchers (one connection each)"; set ylabel "commit → client latency, ms"
set logscale xy; set xrange [0.7:8000]
set arrow from 0.7,50 to 8000,50 nohead dt 3 lw 2 lc rgb "red"
set label "goal: p99 < 50 ms at 1,000 × 2,000/s" at 1,60 tc rgb "red"
plot $cmds
GP
  cmds="" sep=""
  for n in $watchers; do
    awk -v n="$n" '$1 == n' "$TMP/lat" >"$TMP/w.$n"
    cmds+="$sep'$TMP/w.$n' using 2:4 with linespoints lw 2 title 'p99, $n watchers', '$TMP/w.$n' using 2:3 with linespoints dt 2 title 'p50, $n watchers'"
    sep=", "
  done
  plot latency_rate <<GP
set title "Commit → client latency against the write rate (one resource, objects of about 1 KB)"
set xlabel "commits/s (one-row UPDATEs)"; set ylabel "commit → client latency, ms"
set logscale xy
plot $cmds
GP
else
  say "no fanout figures: latency_watchers and latency_rate not drawn"
fi

if [[ -s "$IN/memory.txt" ]]; then
  awk '$1 == "idle" { print $2, $5 }' "$IN/memory.txt" | sort -n >"$TMP/idle"
  etcd_line=""
  if [[ -s "$IN/etcd.txt" ]] && grep -q '^idle ' "$IN/etcd.txt"; then
    awk '$1 == "idle" { split($4, e, "="); split($3, w, "="); print $2, e[2], w[2] }' "$IN/etcd.txt" >"$TMP/etcd_idle"
    etcd_line=", '$TMP/etcd_idle' using 1:2 with points pt 7 ps 2 title 'etcd (same run as its walwatch point)', '$TMP/etcd_idle' using 1:3 with points pt 6 ps 2 title 'walwatch beside etcd'"
  fi
  plot idle_memory <<GP
set title "Memory per idle watcher (RSS growth / watchers)"
set xlabel "idle watchers"; set ylabel "RSS per watcher, KiB"
set logscale x; set yrange [0:*]
plot '$TMP/idle' using 1:2 with linespoints lw 2 title 'walwatch'$etcd_line
GP
else
  say "no memory figures: idle_memory not drawn"
fi

if [[ -s "$IN/drain.txt" ]]; then
  awk '$1 == "size" { split($3, r, "="); split($4, w, "="); print $2, r[2], w[2] }' "$IN/drain.txt" | sort -n >"$TMP/drain"
  # MariaDB's drain (one backlog size, medians) as points beside them.
  mariadb_lines=""
  if [[ -s "$IN/mdrain.txt" ]]; then
    awk -F= '{ gsub(/"/, "", $2); v[$1] = $2 } END { print v["rows"], v["mbl_s"], v["walwatch_s"] }' "$IN/mdrain.txt" >"$TMP/mdrain"
    mariadb_lines=", '$TMP/mdrain' using (\$1/1000):3 with points pt 7 ps 1.5 title 'MariaDB: walwatch', '$TMP/mdrain' using (\$1/1000):2 with points pt 6 ps 1.5 title 'MariaDB: mariadb-binlog -v'"
  fi
  plot drain <<GP
set title "Backlog drain: Pods of about 3.5 KB, one row per transaction"
set xlabel "backlog, thousands of rows"; set ylabel "time to drain, s"
set yrange [0:*]; set xrange [0:*]; set offsets 0, graph 0.05, 0, 0
plot '$TMP/drain' using (\$1/1000):3 with linespoints lw 2 title 'walwatch → one watcher (from its start)', '$TMP/drain' using (\$1/1000):2 with linespoints lw 2 dt 2 title 'pg\\_recvlogical → /dev/null'$mariadb_lines
GP
  awk '$1 == "replicas" { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } print $2, v["drain_s"], v["primary_cpu_s_per_replica"] }' "$IN/drain.txt" >"$TMP/rep"
  if [[ -s "$TMP/rep" ]]; then
    rows=$(awk '$1 == "replicas" { sub(/rows=/, "", $3); print $3; exit }' "$IN/drain.txt")
    plot replicas <<GP
set title "One primary, k walwatch replicas (a slot each) draining $rows rows at once"
set xlabel "replicas"; set ylabel "drain time, s"; set y2label "primary CPU per replica, s"
set logscale x 2; set xrange [0.8:10]; set xtics (1, 2, 4, 8); set yrange [0:*]; set y2range [0:*]; set ytics nomirror; set y2tics
set offsets 0, 0, graph 0.25, 0
plot '$TMP/rep' using 1:2 with linespoints lw 2 title 'drain time (all replicas)', '$TMP/rep' using 1:3 axes x1y2 with linespoints lw 2 dt 2 title 'primary CPU per replica'
GP
  fi
else
  say "no drain figures: drain and replicas not drawn"
fi

if [[ -s "$IN/quiet_e2e.txt" ]]; then
  awk '{ for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "ww_us_per_commit") print ($1 == 0 ? 0 : 1), $2, kv[2] } }' "$IN/quiet_e2e.txt" >"$TMP/quiet"
  n=$(awk '$1 != 0 { print $1; exit }' "$IN/quiet_e2e.txt")
  e410=$(awk '{ for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "e410") s += kv[2] } } END { print s + 0 }' "$IN/quiet_e2e.txt")
  plot quiet <<GP
set title "A hot resource's cost with quiet watchers (issue 18): walwatch CPU per hot commit"
set xlabel "watchers of quiet resources"; set ylabel "walwatch CPU per hot commit, µs"
set xtics ("none" 0, "$n" 1); set xrange [-0.6:1.6]; set yrange [0:*]; set boxwidth 0.5
set key inside right top
set label "410s to the quiet watchers, all runs: $e410" at graph 0.05, graph 0.08
plot '$TMP/quiet' using 1:3 with points pt 7 ps 1.5 title 'each run'
GP
else
  say "no quiet_e2e figures: quiet not drawn"
fi

# Peers: p50 and p99 of each reader, from the etcd and kine runs; the
# readers of one workload side by side (sorted on a key, then cut).
: >"$TMP/peers.unsorted"
if [[ -s "$IN/kine.txt" ]] && ! grep -q '^missing' "$IN/kine.txt"; then
  awk '{ for (i = 3; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = v[$1, kv[1]] " " kv[2] } k[$1] = 1 }
    END { for (c in k) print "0 " c "\t\"" c "\"", med(v[c, "p50_ms"]), med(v[c, "p99_ms"]) } '"$MED" "$IN/kine.txt" >>"$TMP/peers.unsorted"
fi
if [[ -s "$IN/etcd.txt" ]] && ! grep -q '^missing' "$IN/etcd.txt"; then
  awk '$1 != "idle" { for (i = 5; i <= NF; i++) { split($i, kv, "="); v[$1 " " $2 "x" $3, kv[1]] = v[$1 " " $2 "x" $3, kv[1]] " " kv[2] } k[$1 " " $2 "x" $3] = 1 }
    END { for (c in k) { split(c, w, " "); print "1 " w[2] " " w[1] "\t\"" c "/s\"", med(v[c, "p50_ms"]), med(v[c, "p99_ms"]) } } '"$MED" "$IN/etcd.txt" >>"$TMP/peers.unsorted"
fi
sort "$TMP/peers.unsorted" | cut -f2- >"$TMP/peers"
if [[ -s "$TMP/peers" ]]; then
  plot peers <<GP
set title "walwatch beside its peers, each on the same workload in the same run"
set ylabel "commit → client latency, ms"; set logscale y; set yrange [0.5:3000]
set key inside right top
set style data histograms; set style histogram clustered gap 1; set style fill solid 0.7 border -1
set xtics rotate by -25
plot '$TMP/peers' using 2:xtic(1) title 'p50', '' using 3 title 'p99'
GP
else
  say "no etcd or kine figures: peers not drawn"
fi
