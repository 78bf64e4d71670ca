#!/usr/bin/env bash
# The clang build of the product code with -Wthread-safety -Werror (ctest
# `thread_safety_build`, part of `make test`): every field marked
# GUARDED_BY(mu) must be touched only with mu held (cdc/base/mutex.h,
# cdc/base/thread_annotations.h), or the build fails. g++ ignores the
# attributes, so this is the build that checks them.
#
#   tests/tools/thread-safety-build.sh SOURCE_DIR BUILD_DIR
#
# Builds the `walwatch` target (every product library) in BUILD_DIR with
# clang++ at -O0 (the analysis runs before code generation; optimising
# would only cost time). Uses ccache when it is installed.
set -euo pipefail
SRC=${1:?usage: thread-safety-build.sh SOURCE_DIR BUILD_DIR}
BUILD=${2:?usage: thread-safety-build.sh SOURCE_DIR BUILD_DIR}
JOBS=${JOBS:-2}
CXX_BIN=$(command -v clang++ || command -v clang++-14 || true)
if [[ -z "$CXX_BIN" ]]; then
  echo "thread-safety-build: clang++ is not installed (Debian package clang; make deps installs it)" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$SRC" -B "$BUILD" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O0 -Wthread-safety -Werror" \
  -DWALWATCH_BUILD_TESTS=OFF "${launcher[@]}" >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target walwatch
