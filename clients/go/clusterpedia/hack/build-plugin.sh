#!/usr/bin/env bash
# Builds the walwatch storage as a Clusterpedia storage plugin (a Go plugin,
# -buildmode=plugin) with Clusterpedia's own hack/builder.sh, against a
# checkout of the Clusterpedia release the APIServer runs.
#
#   clients/go/clusterpedia/hack/build-plugin.sh CLUSTERPEDIA_REPO [OUTPUT_DIR]
#
# writes OUTPUT_DIR/plugins/walwatch-storage.so (OUTPUT_DIR defaults to the
# current directory). Build the APIServer from the same checkout with the
# same Go toolchain (builder.sh apiserver, or Clusterpedia's builder image):
# a Go plugin loads only into a program built with the same toolchain and
# the same version of every package they share.
#
# Why more than builder.sh alone:
#   - builder.sh copies the plugin's vendor/ into a GOPATH and lays
#     Clusterpedia's vendor/ and staging/ over it. This module's replace of
#     the client module (../) cannot be vendored from a copy, so the
#     vendoring is done here, in place.
#   - Laid over a newer version of a module, an older one leaves the newer
#     one's extra files behind, and the mix does not compile. So every
#     module Clusterpedia vendors itself (and its api module, from staging)
#     is removed from this vendor/ first: the plugin is built against
#     Clusterpedia's versions of everything they share, as a plugin must be.
# Needs: go (the toolchain the APIServer is built with), git, a C compiler
# (plugins need cgo).
set -euo pipefail

if (($# < 1)); then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
CLUSTERPEDIA_REPO=$(cd "$1" && pwd)
OUTPUT_DIR=$(mkdir -p "${2:-.}" && cd "${2:-.}" && pwd)
MODULE_DIR=$(cd "$(dirname "$0")/.." && pwd)

if [[ ! -f "$CLUSTERPEDIA_REPO/hack/builder.sh" || ! -f "$CLUSTERPEDIA_REPO/vendor/modules.txt" ]]; then
  echo "build-plugin: $CLUSTERPEDIA_REPO is not a Clusterpedia checkout with vendor/ (hack/builder.sh, vendor/modules.txt)" >&2
  exit 1
fi

work=$(mktemp -d /tmp/walwatch-plugin.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The plugin's own tree: the module without its tests, the client module
# replaced by its absolute path, so that go mod vendor can resolve it.
cp "$MODULE_DIR/go.mod" "$MODULE_DIR/go.sum" "$MODULE_DIR/main.go" "$work/"
cp -r "$MODULE_DIR/walwatchstorage" "$work/"
rm -f "$work"/walwatchstorage/*_test.go
client_dir=$(cd "$MODULE_DIR/.." && pwd)
(cd "$work" && go mod edit -replace "github.com/walwatch/walwatch/clients/go=$client_dir" && go mod vendor)

# Clusterpedia's versions win: drop what it vendors, and its api module.
grep '^# ' "$CLUSTERPEDIA_REPO/vendor/modules.txt" | awk '{print $2}' | while read -r module; do
  rm -rf "${work:?}/vendor/$module"
done
rm -rf "$work/vendor/github.com/clusterpedia-io"

# builder.sh wants its plugin in a git repository (it asks git for the
# repository's root).
(cd "$work" && git init -q && git add -A && git -c user.name=build -c user.email=build@localhost commit -qm plugin)
(cd "$work" && CLUSTERPEDIA_REPO="$CLUSTERPEDIA_REPO" OUTPUT_DIR="$OUTPUT_DIR" \
  bash "$CLUSTERPEDIA_REPO/hack/builder.sh" plugins walwatch-storage.so)
echo "build-plugin: $OUTPUT_DIR/plugins/walwatch-storage.so" >&2
