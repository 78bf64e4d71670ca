#!/usr/bin/env bash
# Offline checks of packaging/ against a walwatch binary (ctest label unit):
#   1. packaging/kubernetes renders: with `kubectl kustomize` where kubectl
#      is installed, and always with render_kustomization.py (PyYAML), which
#      must then give the same objects; without kubectl (a plain Debian 12
#      has none that fits) the python rendering alone is checked, and one
#      line says so;
#   2. yamllint, with packaging/kubernetes/.yamllint, finds no errors;
#   3. check_manifests.py: the rendered objects, the Dockerfile, the alerts,
#      the Grafana dashboard and the systemd files agree with the binary's
#      flags (`walwatch --help`; see its docstring). The metric names they
#      use are checked against a real scrape of /metrics by
#      ClaimsTest.PackagingAndDocsNameOnlyScrapedMetrics (label integration:
#      it needs PostgreSQL).
# Prints each check as PASS/FAIL; exits non-zero if any failed.
#
# Usage: tests/packaging/check_manifests.sh path/to/walwatch
# Needs: yamllint, python3 with PyYAML (Debian: yamllint python3-yaml);
# kubectl (client only, no cluster) if present.
set -euo pipefail

if [[ $# -ne 1 || ! -x "$1" ]]; then
  echo "usage: $0 path/to/walwatch" >&2
  exit 2
fi
BINARY=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KUSTOMIZE_DIR="$ROOT/packaging/kubernetes"

failed=0

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

if ! "$PYTHON" "$ROOT/tests/packaging/render_kustomization.py" "$KUSTOMIZE_DIR" \
    >"$tmp/rendered.yaml" 2>"$tmp/render.err"; then
  echo "FAIL: render_kustomization.py packaging/kubernetes:"
  sed 's/^/      /' "$tmp/render.err"
  exit 1
fi
echo "PASS: render_kustomization.py packaging/kubernetes renders ($(grep -c '^kind:' "$tmp/rendered.yaml") objects)"
if command -v kubectl >/dev/null 2>&1; then
  if kubectl kustomize "$KUSTOMIZE_DIR" >"$tmp/kubectl.yaml" 2>"$tmp/kustomize.err"; then
    echo "PASS: kubectl kustomize packaging/kubernetes renders"
  else
    echo "FAIL: kubectl kustomize packaging/kubernetes:"
    sed 's/^/      /' "$tmp/kustomize.err"
    exit 1
  fi
  # The same objects (kubectl 1.20's kustomize doubles blank lines inside
  # block scalars: runs of newlines are compared as one).
  if "$PYTHON" - "$tmp/rendered.yaml" "$tmp/kubectl.yaml" <<'PY'
import json, re, sys, yaml
def norm(path):
    def n(x):
        if isinstance(x, dict): return {k: n(v) for k, v in x.items()}
        if isinstance(x, list): return [n(v) for v in x]
        if isinstance(x, str): return re.sub(r"\n+", "\n", x)
        return x
    with open(path) as f:
        return sorted(json.dumps(n(d), sort_keys=True) for d in yaml.safe_load_all(f) if d)
sys.exit(0 if norm(sys.argv[1]) == norm(sys.argv[2]) else 1)
PY
  then
    echo "PASS: render_kustomization.py renders what kubectl kustomize renders"
  else
    echo "FAIL: render_kustomization.py and kubectl kustomize render different objects"
    diff "$tmp/rendered.yaml" "$tmp/kubectl.yaml" | head -40 | sed 's/^/      /'
    failed=1
  fi
else
  echo "SKIP: kubectl kustomize: kubectl is not installed (the objects rendered by render_kustomization.py are checked)"
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
