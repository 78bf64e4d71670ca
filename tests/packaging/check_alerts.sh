#!/usr/bin/env bash
# The alerts of packaging/kubernetes/prometheusrule.yaml, evaluated by
# Prometheus's own rule engine (promtool, Debian package prometheus):
#   1. `promtool check rules` accepts the rule groups (PromQL and templates);
#   2. `promtool test rules tests/packaging/alerts_test.yaml`: each alert
#      fires in the condition its runbook describes, with its labels and
#      rendered summary, and stays quiet in the healthy or flapping cases;
#   3. every alert of the file has at least one case in which it fires, so a
#      new alert cannot land untested.
# The descriptions and runbook links are static text; they are dropped from
# the copy the unit test evaluates (promtool compares annotations whole), and
# check_manifests.py checks the runbook anchors.
#
# Usage: tests/packaging/check_alerts.sh
# Needs: promtool (apt-get install prometheus), python3 with PyYAML.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)

if ! command -v promtool >/dev/null 2>&1; then
  echo "FAIL: promtool is not installed (apt-get install prometheus)"
  exit 1
fi
if ! python3 -c 'import yaml' 2>/dev/null; then
  echo "FAIL: no python3 with PyYAML (apt-get install python3-yaml)"
  exit 1
fi

tmp=$(mktemp -d /tmp/walwatch-alerts.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The PrometheusRule's spec is a Prometheus rule file: write it out twice,
# whole (for check rules) and with the summary as the only annotation.
python3 - "$ROOT/packaging/kubernetes/prometheusrule.yaml" \
    "$ROOT/tests/packaging/alerts_test.yaml" "$tmp" <<'EOF'
import sys, yaml

rule_path, test_path, out = sys.argv[1:]
with open(rule_path) as f:
    spec = yaml.safe_load(f)["spec"]
with open(f"{out}/walwatch.rules.yaml", "w") as f:
    yaml.safe_dump(spec, f, sort_keys=False)

alerts = []
for group in spec["groups"]:
    for rule in group["rules"]:
        if "alert" in rule:
            alerts.append(rule["alert"])
            rule["annotations"] = {"summary": rule["annotations"]["summary"]}
with open(f"{out}/walwatch.summary.rules.yaml", "w") as f:
    yaml.safe_dump(spec, f, sort_keys=False)

with open(test_path) as f:
    tests = yaml.safe_load(f)
tests["rule_files"] = ["walwatch.summary.rules.yaml"]
with open(f"{out}/alerts_test.yaml", "w") as f:
    yaml.safe_dump(tests, f, sort_keys=False)

fired = set()
for case in tests["tests"]:
    for a in case.get("alert_rule_test", []):
        if a.get("exp_alerts"):
            fired.add(a["alertname"])
missing = [a for a in alerts if a not in fired]
if missing:
    print("FAIL: alerts with no test case in which they fire: " + ", ".join(missing))
    sys.exit(1)
print(f"PASS: each of the {len(alerts)} alerts has a case in which it fires")
EOF

failed=0
if promtool check rules "$tmp/walwatch.rules.yaml" >"$tmp/check.out" 2>&1; then
  echo "PASS: promtool check rules ($(grep -o '[0-9]* rules found' "$tmp/check.out"))"
else
  echo "FAIL: promtool check rules:"
  sed 's/^/      /' "$tmp/check.out"
  failed=1
fi

if (cd "$tmp" && promtool test rules alerts_test.yaml) >"$tmp/test.out" 2>&1; then
  echo "PASS: promtool test rules tests/packaging/alerts_test.yaml"
else
  echo "FAIL: promtool test rules tests/packaging/alerts_test.yaml:"
  sed 's/^/      /' "$tmp/test.out"
  failed=1
fi
exit "$failed"
