#!/usr/bin/env bash
# Print the path of a Go >= 1.26 for the Go client's tests (clients/go), and
# fetch one if there is none.
#
# The client is tested with two k8s.io releases (tests/tools/run-go-tests.sh):
# v0.32 (Clusterpedia's pins, Go 1.23) and v0.37, whose go.mod says go 1.26.0.
# Debian 12's golang-go is 1.19, too old for either, so a Debian package will
# not do, and go.dev's downloads are not reachable from every CI; the Go module
# proxy is, and it serves each Go release as a module zip
# (golang.org/toolchain, what GOTOOLCHAIN=goX.Y.Z itself downloads). So:
#
#   1. `go` on PATH, then /usr/local/go/bin/go: the first that is >= 1.26
#      (a Go the user installed is never replaced nor shadowed);
#   2. else go1.26.8, unpacked in ${XDG_CACHE_HOME:-$HOME/.cache}/walwatch/go1.26.8
#      by an earlier run;
#   3. else that zip, from proxy.golang.org with curl, checked against the
#      SHA-256 below, and unpacked there.
#
# Why a per-user cache, also for root (CI): it needs no sudo (a developer's
# `make test` never stops at a password prompt to unpack a tool), it is the
# same code path for root and for a user, it writes nothing under /usr where
# the package manager or the admin's own Go live, and `rm -rf
# ~/.cache/walwatch` removes it. In CI the clone and HOME are thrown away, so
# the cost is one 70 MB download per run (a second or two on the proxy).
#
# WALWATCH_GO_PINNED=1 skips step 1: always the pinned go1.26.8 (to test this
# script's download on a machine that has a Go, or to run with exactly it).
#
# Stdout: the go binary's path, one line, and nothing else (callers do
# GO=$(tests/tools/install-go.sh)). Quiet on success, except one line on
# stderr when it downloads. On failure: a message on stderr naming the fix,
# and a non-zero exit. Idempotent, and safe to run twice at once (the unpacked
# tree is moved into place by one rename).
#
# Needs curl, unzip, sha256sum and ca-certificates (tests/tools/install-deps.sh
# installs them).
set -euo pipefail

GO_VERSION=go1.26.8   # the Go that is fetched when none >= MIN_MINOR is found
MIN_MINOR=26          # Go 1.26: k8s.io v0.37's go.mod says go 1.26.0
PROXY=${WALWATCH_GO_PROXY:-https://proxy.golang.org}

# The SHA-256 of the proxy's zip, per architecture. Each was computed from a
# zip that `go mod download golang.org/toolchain@v0.0.1-go1.26.8.linux-<arch>`
# had fetched and checked against sum.golang.org (its h1: hash in the
# checksum database; the go command refuses a zip that does not match):
#   amd64 h1:ZOmGe1OnfREDMIdb1Qi4G9JSuDPBLGExZMQ4nis1RXM=
#   arm64 h1:sYL/O6MqS68ML0kjsQ36WoYIpJqkw60TxizWUYUKQMc=
# and the amd64 one is also the sha256sum of the file curl downloads below.
# To move to another Go: change GO_VERSION, and recompute both with
#   GOMODCACHE=$(mktemp -d) go mod download -json golang.org/toolchain@v0.0.1-goX.Y.Z.linux-amd64
#   sha256sum "$GOMODCACHE"/cache/download/golang.org/toolchain/@v/*.zip
declare -A SHA256=(
  [amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
  [arm64]=02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99
)

fail() {
  echo "install-go: $*" >&2
  exit 1
}

# go_minor GO: the minor version of Go binary GO (26 for go1.26.8), or
# nothing when it does not run or says something else (a devel build).
# GOTOOLCHAIN=local: a Go >= 1.21 run inside a module whose go.mod asks for
# a newer Go would otherwise download that one and report its version;
# GOENV=off: the user's go env settings play no part in this question.
go_minor() {
  local v
  v=$(cd / && GOTOOLCHAIN=local GOENV=off "$1" env GOVERSION 2>/dev/null) || return 0
  if [[ $v =~ ^go1\.([0-9]+)([.a-z]|$) ]]; then
    echo "${BASH_REMATCH[1]}"
  fi
}

usable() {
  local minor
  minor=$(go_minor "$1")
  [[ -n $minor ]] && ((minor >= MIN_MINOR))
}

# 1. A Go already installed.
candidates=()
if [[ ${WALWATCH_GO_PINNED:-} != 1 ]]; then
  if path_go=$(command -v go 2>/dev/null); then
    candidates+=("$path_go")
  fi
  candidates+=(/usr/local/go/bin/go)
fi
for go in "${candidates[@]}"; do
  if [[ -x $go ]] && usable "$go"; then
    echo "$go"
    exit 0
  fi
done

# 2. The one this script unpacked before.
: "${HOME:?install-go: HOME is not set (the Go toolchain is cached under it)}"
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/walwatch
DEST=$CACHE/$GO_VERSION
if [[ -x $DEST/bin/go ]] && usable "$DEST/bin/go"; then
  echo "$DEST/bin/go"
  exit 0
fi
# A tree is only ever moved there whole (below), so one that does not run
# was damaged since: fetch it again.
if [[ -e $DEST ]]; then
  echo "install-go: $DEST/bin/go does not run; removing it and fetching $GO_VERSION again" >&2
  rm -rf "$DEST"
fi

# 3. Download it.
case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) fail "no Go >= 1.$MIN_MINOR on PATH or in /usr/local/go, and no pinned $GO_VERSION zip for $(uname -m);" \
          "install Go >= 1.$MIN_MINOR (https://go.dev/doc/install) and put it on PATH" ;;
esac
for tool in curl unzip sha256sum; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "no Go >= 1.$MIN_MINOR found, and $tool (needed to fetch $GO_VERSION) is missing; run: tests/tools/install-deps.sh (make deps)"
done

module_version=v0.0.1-$GO_VERSION.linux-$arch
url=$PROXY/golang.org/toolchain/@v/$module_version.zip
mkdir -p "$CACHE" || fail "cannot create $CACHE; set XDG_CACHE_HOME to a writable directory"
# Everything is staged in a directory beside DEST (same file system, so the
# final mv is one rename), removed on every exit.
stage=$(mktemp -d "$CACHE/.$GO_VERSION.XXXXXX")
trap 'rm -rf "$stage"' EXIT

if [[ ${WALWATCH_GO_PINNED:-} == 1 ]]; then
  why="WALWATCH_GO_PINNED=1"
else
  why="no Go >= 1.$MIN_MINOR on PATH or in /usr/local/go"
fi
echo "install-go: $why; fetching $GO_VERSION (~70 MB) from $url into $DEST" >&2
# --retry-all-errors: also retry a reset connection or a 5xx mid-transfer,
# not only the transient errors curl knows by default.
if ! curl -fsSL --retry 4 --retry-delay 3 --retry-all-errors --connect-timeout 30 \
    -o "$stage/go.zip" "$url"; then
  fail "downloading $url failed (above). Check the network or the proxy" \
       "(https_proxy, WALWATCH_GO_PROXY for a Go module mirror), or install Go >= 1.$MIN_MINOR on PATH"
fi
sum=$(sha256sum "$stage/go.zip" | cut -d' ' -f1)
if [[ $sum != "${SHA256[$arch]}" ]]; then
  fail "$url: SHA-256 $sum, expected ${SHA256[$arch]}; refusing it." \
       "A proxy rewrote it, or the pin in $0 is wrong (see its comment on how it was computed)"
fi
if ! unzip -q "$stage/go.zip" -d "$stage/unpacked"; then
  fail "unzip of $url failed (above); is $CACHE's file system full?"
fi
root=$stage/unpacked/golang.org/toolchain@$module_version
[[ -x $root/bin/go ]] || fail "the zip from $url has no golang.org/toolchain@$module_version/bin/go; its layout changed"
# The zip keeps the Unix modes (bin/*, pkg/tool/*/* are executable) and the
# tree finds its own GOROOT from bin/go's location, so it runs where it lands.
usable "$root/bin/go" || fail "the unpacked $root/bin/go does not run or is not >= 1.$MIN_MINOR"

# Another run may have finished first: then its tree is kept and ours dropped
# (a rename onto a non-empty directory fails).
if ! mv -T "$root" "$DEST" 2>/dev/null && ! [[ -x $DEST/bin/go ]]; then
  fail "cannot move the unpacked Go to $DEST; remove $DEST and run again"
fi
usable "$DEST/bin/go" || fail "$DEST/bin/go does not work; remove $DEST and run again"
echo "$DEST/bin/go"
