#!/usr/bin/env bash
# `go vet -vettool=clients/go/hack/vet-with-lang.sh`: Go's own vet, but with the
# language version of some dependencies raised, as -gcflags=PATTERN=-lang=...
# raises it for the compiler.
#
# Why: github.com/clusterpedia-io/api's go.mod says go 1.16 while its code
# uses generics (clients/go/clusterpedia/go.mod). The module builds with
# -gcflags=github.com/clusterpedia-io/api/...=-lang=go1.21, but vet type-checks
# every dependency too (for its facts) at the Go version of the dependency's
# go.mod, which no flag changes, and fails on it ("implicit function
# instantiation requires go1.18 or later"): so does `go test`'s own vet. This
# wrapper rewrites that version in the configuration the go command hands to
# vet for those packages only, then runs the real vet.
#
# Environment (tests/tools/run-go-tests.sh sets both):
#   WALWATCH_VET          the real vet ($(go env GOTOOLDIR)/vet of the Go in use)
#   WALWATCH_VET_LANG     IMPORT_PATH_PREFIX=goX.Y, e.g.
#                         github.com/clusterpedia-io/api/=go1.21
#
# The protocol (cmd/go, `go help vet`): the go command runs the tool with
# -V=full (an ID for its build cache: this wrapper's differs from vet's, so
# no result of one is taken for the other's), with -flags (passed through),
# and with flags and a JSON file (vet.cfg) per package, last; the file has
# "ImportPath" and "GoVersion" fields, one per line (json.MarshalIndent).
set -euo pipefail

vet=${WALWATCH_VET:?vet-with-lang.sh: set WALWATCH_VET to the real vet}
lang=${WALWATCH_VET_LANG:?vet-with-lang.sh: set WALWATCH_VET_LANG to IMPORT_PATH_PREFIX=goX.Y}
prefix=${lang%=*}
version=${lang##*=}

if [[ ${1:-} == -V=full ]]; then
  echo "$("$vet" -V=full) walwatch-vet-with-lang:$lang"
  exit 0
fi

cfg=${!#}
if (($# > 0)) && [[ $cfg == *.cfg && -f $cfg ]] &&
   grep -qF "\"ImportPath\": \"$prefix" "$cfg"; then
  patched=${cfg%.cfg}-lang.cfg
  sed -E "s/^([[:space:]]*\"GoVersion\": )\"[^\"]*\"/\\1\"$version\"/" "$cfg" >"$patched"
  set -- "${@:1:$#-1}" "$patched"
fi
exec "$vet" "$@"
