#!/usr/bin/env bash
# Check and test one Go module of clients/go (the client, or the Clusterpedia
# storage layer beside it) on both k8s.io releases it supports, and prove it
# builds with Clusterpedia's Go. ctest runs it (tests/CMakeLists.txt, the
# go_* tests); by hand it needs what `make test` provides to the integration
# tests (WALWATCH_TEST_PGHOST/_PGPORT, WALWATCH_TEST_MYDIR, a built walwatch;
# see clients/go/internal/testenv).
#
# Usage: tests/tools/run-go-tests.sh [OPTIONS] MODULE_DIR [GO_TEST_ARGS...]
#
# With no option, in this order:
#   1. gofmt -l: fails on any unformatted file of the module;
#   2. go.mod and go.sum are tidy, and each alternate module file
#      (go.k8s-*.mod/.sum) is what clients/go/hack/update-k8s-modfiles.sh
#      derives from them;
#   3. for each module file, go.mod (Clusterpedia's k8s.io pins) and then
#      go.k8s-*.mod (the newest k8s.io): go vet ./..., then
#      go test -count=1 ./... GO_TEST_ARGS;
#   4. with go.mod, under Go 1.23 (GO123, Clusterpedia's Go, fetched from the
#      module proxy by GOTOOLCHAIN and checked against sum.golang.org):
#      go build ./... (the code; its tests run under the Go above).
# A failed step does not stop the next ones (one run shows every problem);
# the script then fails, naming the failed steps. A module may need flags
# everywhere: module_settings below (the Clusterpedia module's
# github.com/clusterpedia-io/api is compiled and vetted as go1.21).
# Options:
#   --download       fetch only, for every MODULE_DIR given (several may be):
#                    each module file's modules and Go 1.23 (ctest's
#                    go_modules_download_<module>, the fixture the module's
#                    go_* tests need, so that download time counts once, against
#                    its own timeout). Fails only if a download fails.
#   --modfile FILE   step 3 with this module file only
#   --tests-only     step 3's go test only (the integration entries: the unit
#                    entry of the module ran the rest)
#   --race           go test -race (and go vet -race: one compile of the deps for both)
#   --require-tests  fail if no test ran: a -run pattern that matches nothing
#                    is a mistake, not a pass
#
# Always: a Go test that skips fails the run (t.Skip, or "no tests to run"
# under --require-tests): `make test` runs every test, and a test that cannot
# run must fail, naming what is missing. -timeout=20m unless GO_TEST_ARGS
# says otherwise (ctest gives a go_* test 25 minutes: Go's own timeout fires
# first and prints every goroutine's stack).
#
# Environment it sets: GOTOOLCHAIN=local (a go line never silently swaps in
# another Go), GOWORK=off (each module builds alone, as its users build it),
# GOFLAGS=-mod=readonly -buildvcs=false (go.sum must be complete: nothing
# is added behind the committer's back; no git call from go build). GOPATH,
# GOMODCACHE and GOCACHE are left to the user: the module cache and the
# build cache persist between runs on a dev machine, and all go_* tests share
# them, so the second module file reuses what it can of the first's build.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
GO123=go1.23.12   # Clusterpedia v0.9.1's go.mod says go 1.23.0; 1.23's last patch

fail() {
  echo "run-go-tests: $*" >&2
  exit 1
}

download=0 modfile="" tests_only=0 race=0 require_tests=0
while (($#)); do
  case $1 in
    --download) download=1 ;;
    --modfile) modfile=${2:?--modfile needs a file name}; shift ;;
    --tests-only) tests_only=1 ;;
    --race) race=1 ;;
    --require-tests) require_tests=1 ;;
    --) shift; break ;;
    -*) fail "unknown option $1 (see the usage at the top of $0)" ;;
    *) break ;;
  esac
  shift
done
(($#)) || fail "usage: $0 [--download] [--modfile FILE] [--tests-only] [--race] [--require-tests] MODULE_DIR [GO_TEST_ARGS...]"

GO=$("$REPO/tests/tools/install-go.sh")
GOFMT=$(dirname "$GO")/gofmt
export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"

# modfiles DIR: go.mod, then the alternate module files (go.k8s-*.mod), by
# name. There must be one (the matrix is the point): without, it says so and
# returns 1 after go.mod, so that the caller can still go on with go.mod.
modfiles() {
  local f found=0
  echo go.mod
  for f in "$1"/go.k8s-*.mod; do
    [[ -f $f ]] || continue
    echo "${f##*/}"
    found=1
  done
  if ((!found)); then
    echo "run-go-tests: ${1#"$REPO"/} has no go.k8s-*.mod (the newest k8s.io release);" \
         "run clients/go/hack/update-k8s-modfiles.sh and commit what it writes" >&2
    return 1
  fi
}

# module_settings MODULE_PATH: what a module needs everywhere, keyed by its
# module path, so that a run by hand gets it too: build_flags (for go build,
# vet, test, list) and vet_lang (for clients/go/hack/vet-with-lang.sh).
module_settings() {
  build_flags=() vet_lang=""
  case $1 in
    github.com/walwatch/walwatch/clients/go/clusterpedia)
      # github.com/clusterpedia-io/api's go.mod says go 1.16 but its code uses
      # generics (see clusterpedia/go.mod): compile it as go1.21, and vet it
      # so too (vet type-checks dependencies, at their go.mod's version).
      build_flags=(-gcflags=github.com/clusterpedia-io/api/...=-lang=go1.21)
      vet_lang=github.com/clusterpedia-io/api/=go1.21 ;;
  esac
}

# modfile_tags FILE: the build tag of a module file's k8s.io release, for
# code that exists for one release only (clients/go/apistorage: v0.32's
# storage.Interface): go.k8s-v0.37.mod builds with -tags=k8s_v037.
modfile_tags() {
  case $1 in
    go.mod) ;;
    go.k8s-*.mod) local v=${1#go.k8s-}; v=${v%.mod}; echo "-tags=k8s_${v//./}" ;;
  esac
}

# go_vet [GO ARGS...]: go vet ./... with the module's flags, through
# vet-with-lang.sh if it needs it (with the vet of the Go that GOTOOLCHAIN
# selects: Go 1.23's in the Go 1.23 build).
go_vet() {
  local vettool=()
  if [[ -n $vet_lang ]]; then
    vettool=(-vettool="$REPO/clients/go/hack/vet-with-lang.sh")
    WALWATCH_VET=$("$GO" env GOTOOLDIR)/vet || return 1
    export WALWATCH_VET WALWATCH_VET_LANG=$vet_lang
  fi
  "$GO" vet "$@" "${build_flags[@]}" "${vettool[@]}" ./...
}

# step NAME COMMAND...: run one step, named on stderr with its time (the
# budget of `make test` is tight). A failed step does not stop the others
# (they are independent: one run shows every problem); the script fails at
# the end, naming them.
failed=()
step() {
  local name=$1 start rc=0
  shift
  echo "run-go-tests: [$module_rel] $name" >&2
  start=$SECONDS
  "$@" || rc=$?
  if ((rc != 0)); then
    echo "run-go-tests: [$module_rel] FAILED: $name (exit $rc, $((SECONDS - start)) s)" >&2
    failed+=("$name")
    return 0
  fi
  echo "run-go-tests: [$module_rel] ok: $name ($((SECONDS - start)) s)" >&2
}

finish() {
  if ((${#failed[@]})); then
    local IFS=';'
    echo "run-go-tests: [$module_rel] FAILED steps: ${failed[*]}" >&2
    exit 1
  fi
}

enter_module() {
  [[ -f $1/go.mod ]] || fail "$1 is not a Go module (no go.mod)"
  module_dir=$(cd "$1" && pwd)
  module_rel=${module_dir#"$REPO"/}
  [[ -f $module_dir/go.sum ]] || fail "$module_rel has no go.sum; run go mod tidy there and commit go.sum"
  cd "$module_dir"
  module_path=$("$GO" list -m) || fail "go list -m failed in $module_rel (above)"
  module_settings "$module_path"
}

if ((download)); then
  rc=0
  for dir in "$@"; do
    (
      # (errexit does not apply in this subshell, being left of ||: every
      # failure is caught by hand; enter_module exits.)
      enter_module "$dir"
      list=$(modfiles "$module_dir") || true   # the unit test fails for it
      mapfile -t files <<<"$list"
      for f in "${files[@]}"; do
        # go mod download: every module go.mod lists; go list -deps -test:
        # whatever else loading the packages and their tests reads (go.mod
        # files of the graph). Only a failed download fails this: a module
        # that does not load (go.sum short of an entry, a stale module file)
        # is the tests' to report, each test on its own, and is not to stop
        # the ones it does not concern.
        step "download ($f)" "$GO" mod download -modfile="$f"
        "$GO" list -e -modfile="$f" -deps -test "${build_flags[@]}" ./... >/dev/null 2>&1 || true
      done
      # tidy and the alternate module files' derivation read more of the
      # graph (go.mod files of the versions `go get` passes through, the
      # checksums an older Go needs): fetched here, checked by the unit entry
      # (go_<module>), which fails loudly if this did not get them.
      "$GO" mod tidy -diff >/dev/null 2>&1 || true
      "$REPO/clients/go/hack/update-k8s-modfiles.sh" --check "$module_dir" >/dev/null 2>&1 || true
      finish
    ) || rc=1
  done
  # Go 1.23 is a module too (golang.org/toolchain), in GOMODCACHE.
  module_rel=toolchain
  step "fetch $GO123" env GOTOOLCHAIN="$GO123" "$GO" version
  finish
  exit "$rc"
fi

enter_module "$1"
shift
test_args=(-count=1 -timeout=20m -v)
# With --race, go vet builds with -race too: vet needs the dependencies
# compiled, and so they are compiled once (race-instrumented) for vet and
# the tests, not twice (the client's go_client, cold: 165 s, then 137 s).
race_flags=()
if ((race)); then
  race_flags=(-race)
  test_args+=(-race)
fi
if [[ -n $vet_lang ]]; then
  # go test's own vet cannot take vet-with-lang.sh (no -vettool), and would
  # fail on the dependency: the go vet step covers the tests.
  test_args+=(-vet=off)
fi
test_args+=("$@")

if ((!tests_only)); then
  gofmt_check() {
    # The module's own files: not a nested module's (it is checked on its
    # own), nor testdata/ (which may hold broken Go on purpose).
    local bad
    bad=$(find . \( -type d \( -name testdata -o -name vendor -o -name '.*' ! -name . \) -prune \) \
              -o \( -type d ! -name . -exec test -e '{}/go.mod' \; -prune \) \
              -o \( -type f -name '*.go' -print0 \) |
          xargs -0 -r "$GOFMT" -l) || return 1   # a file gofmt cannot parse
    if [[ -n $bad ]]; then
      echo "$bad" | sed 's/^/  unformatted: /' >&2
      echo "run-go-tests: run gofmt -w on these (a Go >= 1.26's gofmt: $GOFMT)" >&2
      return 1
    fi
  }
  step "gofmt -l" gofmt_check

  tidy_check() {
    "$GO" mod tidy -diff || {
      echo "run-go-tests: go.mod/go.sum are not tidy (diff above: current, tidy); run go mod tidy in $module_rel" >&2
      return 1
    }
  }
  step "go mod tidy -diff" tidy_check
  step "k8s.io module files are derived from go.mod" \
    "$REPO/clients/go/hack/update-k8s-modfiles.sh" --check "$module_dir"
fi

if [[ -n $modfile ]]; then
  [[ -f $modfile ]] || fail "$module_rel/$modfile does not exist; run clients/go/hack/update-k8s-modfiles.sh and commit what it writes"
  files=("$modfile")
else
  list=$(modfiles "$module_dir") || failed+=("no go.k8s-*.mod")
  mapfile -t files <<<"$list"
fi

if ((race)) && [[ $("$GO" env CGO_ENABLED) != 1 ]]; then
  fail "go test -race needs cgo and a C compiler (gcc: build-essential); run tests/tools/install-deps.sh (make deps)"
fi

# go_test FILE: go test with module file FILE, its output also kept to count
# what ran and skipped.
go_test() {
  local f=$1 log rc=0 ran skipped
  log=$(mktemp /tmp/walwatch-go-test.XXXXXX)
  "$GO" test -modfile="$f" $(modfile_tags "$f") "${build_flags[@]}" "${test_args[@]}" ./... 2>&1 | tee "$log" || rc=$?
  ran=$(grep -c '^=== RUN' "$log" || true)
  skipped=$(grep -E '^ *--- SKIP' "$log" || true)
  rm -f "$log"
  ((rc == 0)) || return "$rc"
  if [[ -n $skipped ]]; then
    echo "$skipped" >&2
    echo "run-go-tests: tests skipped (above); under make test every test runs, so a skip is a failure: give the test what it needs, or fail it naming what is missing" >&2
    return 1
  fi
  if ((require_tests && ran == 0)); then
    echo "run-go-tests: no test ran with: ${test_args[*]}; a pattern that matches nothing is a mistake" >&2
    return 1
  fi
  echo "run-go-tests: [$module_rel] $ran tests and subtests ran ($f)" >&2
}

for f in "${files[@]}"; do
  if ((!tests_only)); then
    step "go vet ($f)" go_vet -modfile="$f" $(modfile_tags "$f") "${race_flags[@]}"
  fi
  step "go test ($f)" go_test "$f"
done

if ((!tests_only)); then
  # Clusterpedia's Go: the code compiles with it (what a Clusterpedia build
  # compiles; the tests and vet run under the newer Go above, and compiling
  # them a third time cost `make test` a minute). go.mod only (the newest
  # k8s.io needs Go 1.26). GOTOOLCHAIN names it: the go command runs that
  # release from the module cache (the download fixture fetched it).
  go123_build() {
    GOTOOLCHAIN=$GO123 "$GO" build "${build_flags[@]}" ./...
  }
  step "go build with $GO123 (go.mod)" go123_build
fi
finish
