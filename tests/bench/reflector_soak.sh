#!/usr/bin/env bash
# The consumer's test, long and wide (`make soak`, after soak.sh; not in CI):
# tests/integration/reflector_test.cc with SOAK_REFLECTOR_CLIENTS (2000)
# clients written like client-go's reflector (list, watch with bookmarks and
# timeoutSeconds, resume, relist on 410) over a Clusterpedia-shaped mix, for
# SOAK_REFLECTOR_SECONDS (300) of writes. It passes when every client's state
# equals SQL, no object version shares an RV, every 410 Expired is
# witnessed by the WAL (a wal2json slot of the test's own shows a
# transaction that gave an event of the client's selection above the RV
# refused and at or below the floor the 410 names, so the client really
# lost an event), and a client of a quiet resource gets no 410 but such
# witnessed ones. At this width on 2 cores a resume can take longer than a
# 1 MiB log lasts, so a quiet resource's own events are evicted too and its
# 410s are right; SOAK_REFLECTOR_QUIET_410=none restores make test's stricter
# rule (no quiet 410 at all). The report (its [REFLECTOR] lines, with each
# kind of request's wait for its response header) is printed and, unless
# SOAK_NO_APPEND=1, appended to tests/bench/HISTORY.md.
#
#   tests/bench/reflector_soak.sh
#   SOAK_REFLECTOR_CLIENTS=200 SOAK_REFLECTOR_SECONDS=60 SOAK_NO_APPEND=1 \
#     tests/bench/reflector_soak.sh          # a quick run
#
# Environment: SOAK_REFLECTOR_CLIENTS, SOAK_REFLECTOR_SECONDS,
# SOAK_REFLECTOR_SEED (20261204), SOAK_REFLECTOR_MAX_LOG (1Mi),
# SOAK_REFLECTOR_QUIET_410 (witnessed), SOAK_NO_APPEND, BUILD_DIR (build), JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
CLIENTS=${SOAK_REFLECTOR_CLIENTS:-2000}
SECONDS_OF_WRITES=${SOAK_REFLECTOR_SECONDS:-300}
SEED=${SOAK_REFLECTOR_SEED:-20261204}
MAX_LOG=${SOAK_REFLECTOR_MAX_LOG:-1Mi}
QUIET_410=${SOAK_REFLECTOR_QUIET_410:-witnessed}
say() { echo "reflector-soak: $*" >&2; }

"$ROOT/tests/tools/install-deps.sh"
cmake -S . -B "$BUILD_DIR" >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target reflector_test walwatch

DIR=$(mktemp -d /tmp/walwatch-reflector-soak.XXXXXX)
chmod 0755 "$DIR"  # the postgres user runs the sandbox under it
PGDIR="$DIR/pg"
# shellcheck disable=SC2317  # invoked by the trap
cleanup() { "$ROOT/tests/tools/pg-sandbox.sh" stop "$PGDIR" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# An assignment, so that set -e stops here if the sandbox does not start.
sandbox_env=$("$ROOT/tests/tools/pg-sandbox.sh" start "$PGDIR")
eval "$sandbox_env"
# Each client holds a connection; the test process needs the descriptors.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

say "$CLIENTS clients, $SECONDS_OF_WRITES s of writes, --max-log-bytes $MAX_LOG, quiet 410s: $QUIET_410 (seed $SEED)"
start=$(date +%s)
set +e
WALWATCH_REFLECTOR_CLIENTS=$CLIENTS WALWATCH_REFLECTOR_SECONDS=$SECONDS_OF_WRITES \
  WALWATCH_REFLECTOR_SEED=$SEED WALWATCH_REFLECTOR_MAX_LOG=$MAX_LOG \
  WALWATCH_REFLECTOR_QUIET_410=$QUIET_410 \
  "$BUILD_DIR/tests/reflector_test" >"$DIR/reflector.log" 2>&1
rc=$?
set -e
took=$(($(date +%s) - start))
verdict=$([[ $rc == 0 ]] && echo "passed" || echo "FAILED (exit $rc; log kept in $DIR/reflector.log)")

report() {
  echo
  echo "## Reflector soak — $(date -u +%Y-%m-%d) — commit $(git rev-parse --short HEAD)"
  echo
  echo "Command: \`SOAK_REFLECTOR_CLIENTS=$CLIENTS SOAK_REFLECTOR_SECONDS=$SECONDS_OF_WRITES SOAK_REFLECTOR_MAX_LOG=$MAX_LOG SOAK_REFLECTOR_QUIET_410=$QUIET_410 tests/bench/reflector_soak.sh\` ($(nproc) cores, ${took} s in all)."
  echo
  echo '```'
  grep '^\[REFLECTOR\]' "$DIR/reflector.log" || echo "(no summary: see the log)"
  echo '```'
  echo
  echo "**Result: $verdict.**"
}
report | tee "$DIR/report.md"
if [[ "${SOAK_NO_APPEND:-}" != 1 ]]; then
  cat "$DIR/report.md" >>"$ROOT/tests/bench/HISTORY.md"
  say "appended to tests/bench/HISTORY.md"
fi
exit "$rc"
