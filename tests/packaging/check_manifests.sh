#!/usr/bin/env bash
# Offline checks of packaging/ against a walwatch binary (ctest label unit):
#   1. packaging/kubernetes renders, as it is (PostgreSQL), with its
#      mysql Component turned on (MySQL/MariaDB) and with its helm Component
#      (Clusterpedia installed by its chart): with `kubectl kustomize`
#      where kubectl is installed, and always with render_kustomization.py
#      (PyYAML), which must then give the same objects; without kubectl (a
#      plain Debian 12 has none that fits) the python rendering alone is
#      checked, and one line says so;
#   2. yamllint, with packaging/kubernetes/.yamllint, finds no errors;
#   3. check_manifests.py, on each rendering: the objects, the Dockerfile, the alerts,
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

# Renders DIR (LABEL in messages) into $tmp/NAME.yaml, with
# render_kustomization.py and, where installed, kubectl kustomize, which
# must give the same objects. Returns 1 if DIR does not render.
render() {
  local dir=$1 label=$2 name=$3
  if ! "$PYTHON" "$ROOT/tests/packaging/render_kustomization.py" "$dir" \
      >"$tmp/$name.yaml" 2>"$tmp/render.err"; then
    echo "FAIL: render_kustomization.py $label:"
    sed 's/^/      /' "$tmp/render.err"
    return 1
  fi
  echo "PASS: render_kustomization.py $label renders ($(grep -c '^kind:' "$tmp/$name.yaml") objects)"
  if ! command -v kubectl >/dev/null 2>&1; then
    echo "SKIP: kubectl kustomize $label: kubectl is not installed (the objects rendered by render_kustomization.py are checked)"
    return 0
  fi
  if kubectl kustomize "$dir" >"$tmp/$name.kubectl.yaml" 2>"$tmp/kustomize.err"; then
    echo "PASS: kubectl kustomize $label renders"
  else
    echo "FAIL: kubectl kustomize $label:"
    sed 's/^/      /' "$tmp/kustomize.err"
    return 1
  fi
  # The same objects (kubectl 1.20's kustomize doubles blank lines inside
  # block scalars: runs of newlines are compared as one).
  if "$PYTHON" - "$tmp/$name.yaml" "$tmp/$name.kubectl.yaml" <<'PY'
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
    echo "PASS: render_kustomization.py renders what kubectl kustomize renders ($label)"
  else
    echo "FAIL: render_kustomization.py and kubectl kustomize render different objects ($label)"
    diff "$tmp/$name.yaml" "$tmp/$name.kubectl.yaml" | head -40 | sed 's/^/      /'
    failed=1
  fi
}

render "$KUSTOMIZE_DIR" packaging/kubernetes rendered || exit 1

# render_component NAME: packaging/kubernetes with its commented
# `# components:` and `#   - NAME` lines turned on, as its
# kustomization.yaml tells an operator to, rendered to rendered-NAME.yaml.
# Fails (and says so) when those lines are missing.
render_component() {
  local name=$1
  mkdir "$tmp/$name"
  cp -r "$KUSTOMIZE_DIR/." "$tmp/$name/"
  sed -i -e 's/^# components:$/components:/' -e "s/^#   - $name\$/  - $name/" \
    "$tmp/$name/kustomization.yaml"
  if ! grep -q "^  - $name\$" "$tmp/$name/kustomization.yaml"; then
    echo "FAIL: packaging/kubernetes/kustomization.yaml has no commented '# components:' / '#   - $name' lines to turn on"
    failed=1
    return 1
  fi
  render "$tmp/$name" "packaging/kubernetes with components: [$name]" \
    "rendered-$name" || exit 1
}

# MySQL/MariaDB: the mysql Component.
render_component mysql || true

# Clusterpedia installed by its Helm chart: the helm Component. It changes
# the APIServer's password Secret to the chart's, and nothing of walwatch's:
# the rendering must differ from the plain one in that Secret's name alone.
if render_component helm; then
  if "$PYTHON" - "$tmp/rendered.yaml" "$tmp/rendered-helm.yaml" <<'PY'
import sys, yaml
def objects(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]
plain, helm = objects(sys.argv[1]), objects(sys.argv[2])
def secret(objs):
    for o in objs:
        if o.get("kind") == "StatefulSet":
            for c in o["spec"]["template"]["spec"]["containers"]:
                for e in c.get("env", []):
                    if e["name"] == "DB_PASSWORD":
                        ref = e["valueFrom"]["secretKeyRef"]
                        e["valueFrom"]["secretKeyRef"] = {"key": ref["key"], "name": "SECRET"}
                        return ref["name"]
ok = (secret(plain), secret(helm)) == ("internalstorage-password", "clusterpedia-internalstorage")
sys.exit(0 if ok and plain == helm else 1)
PY
  then
    echo "PASS: the helm Component changes the APIServer's password Secret to the chart's, and nothing else"
  else
    echo "FAIL: the helm Component must change DB_PASSWORD's Secret from internalstorage-password to clusterpedia-internalstorage, and nothing else"
    failed=1
  fi
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
if [[ -e "$tmp/rendered-mysql.yaml" ]]; then
  echo "--- packaging/kubernetes with components: [mysql]"
  "$PYTHON" "$ROOT/tests/packaging/check_manifests.py" \
    --root "$ROOT" --binary "$BINARY" --rendered "$tmp/rendered-mysql.yaml" || failed=1
fi

exit "$failed"
