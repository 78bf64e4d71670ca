#!/usr/bin/env bash
# Offline checks of packaging/ against a walwatch binary (ctest label unit):
#   1. `kubectl kustomize packaging/kubernetes` renders;
#   2. yamllint, with packaging/kubernetes/.yamllint, finds no errors;
#   3. check_manifests.py: the rendered objects, the Dockerfile, the alerts,
#      the Grafana dashboard and the systemd files agree with the binary's
#      flags (`walwatch --help`) and metric names (see its docstring).
# Prints each check as PASS/FAIL; exits non-zero if any failed.
#
# Usage: tests/packaging/check_manifests.sh path/to/walwatch
# Needs: kubectl (client only, no cluster), yamllint, python3 with PyYAML
# (Debian: yamllint python3-yaml).
set -euo pipefail

if [[ $# -ne 1 || ! -x "$1" ]]; then
  echo "usage: $0 path/to/walwatch" >&2
  exit 2
fi
BINARY=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KUSTOMIZE_DIR="$ROOT/packaging/kubernetes"

failed=0

if ! command -v kubectl >/dev/null 2>&1; then
  echo "FAIL: kubectl is not installed"
  exit 1
fi
if ! command -v yamllint >/dev/null 2>&1; then
  echo "FAIL: yamllint is not installed (apt-get install yamllint)"
  exit 1
fi
PYTHON=""
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import yaml' 2>/dev/null; then
    PYTHON=$py
    break
  fi
done
if [[ -z "$PYTHON" ]]; then
  echo "FAIL: no python3 with PyYAML (apt-get install python3-yaml)"
  exit 1
fi

tmp=$(mktemp -d /tmp/walwatch-manifests.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if kubectl kustomize "$KUSTOMIZE_DIR" >"$tmp/rendered.yaml" 2>"$tmp/kustomize.err"; then
  echo "PASS: kubectl kustomize packaging/kubernetes renders ($(grep -c '^kind:' "$tmp/rendered.yaml") objects)"
else
  echo "FAIL: kubectl kustomize packaging/kubernetes:"
  sed 's/^/      /' "$tmp/kustomize.err"
  exit 1
fi

if yamllint -f parsable -c "$KUSTOMIZE_DIR/.yamllint" "$KUSTOMIZE_DIR" >"$tmp/yamllint.out" 2>&1; then
  echo "PASS: yamllint packaging/kubernetes"
  [[ -s "$tmp/yamllint.out" ]] && sed 's/^/      /' "$tmp/yamllint.out"
else
  echo "FAIL: yamllint packaging/kubernetes:"
  sed 's/^/      /' "$tmp/yamllint.out"
  failed=1
fi

"$PYTHON" "$ROOT/tests/packaging/check_manifests.py" \
  --root "$ROOT" --binary "$BINARY" --rendered "$tmp/rendered.yaml" || failed=1

exit "$failed"
