#!/usr/bin/env bash
# (Re)derive each Go module's alternate module file, go.k8s-v0.37.mod and
# go.k8s-v0.37.sum, from its go.mod and go.sum.
#
# The Go modules of clients/go are tested against two k8s.io releases
# (tests/tools/run-go-tests.sh, ctest go_*): the one in go.mod, Clusterpedia's
# pins (v0.32, what a Clusterpedia build links), and the newest one
# (K8S_VERSION below), through `go test -modfile=go.k8s-v0.37.mod`. The
# alternate file is go.mod with every k8s.io release module (those at
# go.mod's k8s.io/apimachinery version: api, apimachinery, client-go,
# apiserver, component-base, ...) raised to K8S_VERSION, one release for all
# of them, and whatever that drags in raised as little as `go get` must
# (never -u), then tidied. So it is derived, never edited: after a change to
# go.mod or go.sum, run this script and commit both files it writes.
#
# Usage: clients/go/hack/update-k8s-modfiles.sh [--check] [MODULE_DIR...]
#   MODULE_DIR  default: clients/go, and clients/go/clusterpedia when it has a go.mod
#   --check     write nothing: derive them in a copy of clients/go and fail,
#               with the diff, if the committed files differ (run-go-tests.sh
#               does this, so a stale file fails `make test`)
#
# Needs the network (the Go module proxy) unless the module cache already
# holds what it fetches. Uses the Go from tests/tools/install-go.sh.
set -euo pipefail

K8S_VERSION=v0.37.2               # the newest k8s.io release on the proxy
ALT=go.k8s-${K8S_VERSION%.*}      # go.k8s-v0.37: .mod and .sum

GO_ROOT=$(cd "$(dirname "$0")/.." && pwd)    # clients/go
REPO=$(cd "$GO_ROOT/../.." && pwd)

fail() {
  echo "update-k8s-modfiles: $*" >&2
  exit 1
}

check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi
modules=("$@")
if ((${#modules[@]} == 0)); then
  modules=("$GO_ROOT")
  if [[ -f $GO_ROOT/clusterpedia/go.mod ]]; then
    modules+=("$GO_ROOT/clusterpedia")
  fi
fi

GO=$("$REPO/tests/tools/install-go.sh")
# Never another toolchain than that one (a go line it cannot satisfy fails
# instead), no go.work (each module stands alone, as users build it), and
# go get/tidy may write the alternate files; a GOFLAGS of the user's such as
# -mod=vendor must not apply.
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod

# requires DIR: "path version" for each module DIR's go.mod requires
# (directly or `// indirect`; since go 1.17 that is every module that
# provides a package), from the require lines and blocks only.
requires() {
  (cd "$1" && "$GO" mod edit -print) | awk '
    /^require \(/ { inblock = 1; next }
    inblock && /^\)/ { inblock = 0; next }
    /^require [^(]/ { print $2, $3; next }
    inblock { print $1, $2 }
  '
}

# derive DIR: write DIR/$ALT.mod and DIR/$ALT.sum. Every failure is checked
# by hand: --check calls it left of ||, where errexit does not apply.
derive() {
  local dir=$1 reqs pin mods=() m args=()
  [[ -f $dir/go.mod && -f $dir/go.sum ]] || fail "$dir has no go.mod and go.sum"
  reqs=$(requires "$dir") || fail "go mod edit -print failed in $dir"
  # The release go.mod pins: its k8s.io/apimachinery's version. The modules
  # of that release are the k8s.io ones at that version (api, client-go,
  # apiserver, component-base, ...); k8s.io/utils, kube-openapi and klog have
  # versions of their own and follow from `go get`.
  pin=$(awk '$1 == "k8s.io/apimachinery" { print $2 }' <<<"$reqs")
  [[ -n $pin ]] || fail "$dir/go.mod requires no k8s.io/apimachinery; nothing to raise"
  mapfile -t mods < <(awk -v pin="$pin" '$1 ~ /^k8s\.io\// && $2 == pin { print $1 }' <<<"$reqs")
  for m in "${mods[@]}"; do args+=("$m@$K8S_VERSION"); done
  cp "$dir/go.mod" "$dir/$ALT.mod" || fail "cannot write $dir/$ALT.mod"
  cp "$dir/go.sum" "$dir/$ALT.sum" || fail "cannot write $dir/$ALT.sum"
  (
    cd "$dir" || exit 1
    # -modfile: go.mod and go.sum are only read. go get raises the go line
    # too (k8s.io v0.37 says go 1.26.0).
    "$GO" get -modfile="$ALT.mod" "${args[@]}" || fail "go get failed in $dir (above)"
    "$GO" mod tidy -modfile="$ALT.mod" || fail "go mod tidy -modfile=$ALT.mod failed in $dir (above)"
    # No toolchain line: it would only name the Go that ran this script.
    "$GO" mod edit -toolchain=none "$ALT.mod" || exit 1
    # One release: every k8s.io release module the packages and their tests
    # use is at K8S_VERSION (a module still at an older one was not in
    # go.mod, and a dependency's requirement kept it there).
    stale=$(GOFLAGS=-mod=readonly "$GO" list -modfile="$ALT.mod" -deps -test \
              -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./... |
            sort -u | awk -v v="$K8S_VERSION" '$1 ~ /^k8s\.io\// && $2 ~ /^v0\.[0-9]+\.[0-9]+$/ && $2 != v') ||
      fail "go list -modfile=$ALT.mod failed in $dir (above)"
    [[ -z $stale ]] || fail "$dir/$ALT.mod: k8s.io modules not at $K8S_VERSION: $stale"
  ) || return 1
  echo "update-k8s-modfiles: ${dir#"$REPO"/}/$ALT.mod: ${mods[*]} $pin -> $K8S_VERSION" >&2
}

if ((check == 0)); then
  for dir in "${modules[@]}"; do
    derive "$(cd "$dir" && pwd)"
  done
  exit 0
fi

# --check: in a copy of the whole clients/go (a nested module's replace
# points at ../), so that the files in the tree are never touched.
tmp=$(mktemp -d /tmp/walwatch-k8s-modfiles.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -a "$GO_ROOT/." "$tmp/"
rc=0
for dir in "${modules[@]}"; do
  dir=$(cd "$dir" && pwd)
  rel=${dir#"$GO_ROOT"}
  rel=${rel#/}
  copy=$tmp/$rel
  for f in "$ALT.mod" "$ALT.sum"; do
    [[ -f $dir/$f ]] || fail "${dir#"$REPO"/}/$f is missing; run clients/go/hack/update-k8s-modfiles.sh and commit what it writes"
  done
  derive "$copy" 2>"$tmp/derive.log" || { cat "$tmp/derive.log" >&2; exit 1; }
  for f in "$ALT.mod" "$ALT.sum"; do
    if ! diff -u "$dir/$f" "$copy/$f" >&2; then
      echo "update-k8s-modfiles: ${dir#"$REPO"/}/$f is not what go.mod and go.sum give (diff above: committed, derived);" \
           "run clients/go/hack/update-k8s-modfiles.sh and commit what it writes" >&2
      rc=1
    fi
  done
done
exit "$rc"
