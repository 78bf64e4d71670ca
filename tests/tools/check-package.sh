#!/usr/bin/env bash
# Builds the Debian package from an existing build directory, as `make
# package` does, into a temporary directory, and checks it: the files and
# their modes (dpkg-deb -c), the control fields and maintainer scripts
# (dpkg-deb -I/-f), and that the packaged binary runs and is the one built.
# Nothing is installed on this machine: the package is unpacked with
# dpkg-deb -x into the temporary directory, which is removed afterwards.
#
# Usage: tests/tools/check-package.sh BUILD_DIR WALWATCH_BINARY
#   BUILD_DIR        a configured build directory (its CPackConfig.cmake)
#   WALWATCH_BINARY  the walwatch built there (must be built already)
#
# Run by ctest as the test `package_deb` (label package; part of `make test`).
# Exit status: 0 if every check passed, 1 otherwise (each failure printed).
set -euo pipefail

if (($# != 2)); then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
BUILD_DIR=$(cd "$1" && pwd)
BINARY=$2

for tool in cpack dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || {
    echo "check-package: $tool is missing (dpkg-dev: make deps)" >&2
    exit 1
  }
done
[[ -f "$BUILD_DIR/CPackConfig.cmake" ]] || {
  echo "check-package: no $BUILD_DIR/CPackConfig.cmake" >&2
  exit 1
}

TMP=$(mktemp -d /tmp/walwatch-check-package.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# cpack runs from the build directory (CPack's install step needs it) but
# writes the package and its staging tree under $TMP.
if ! (cd "$BUILD_DIR" && cpack -G DEB --config CPackConfig.cmake -B "$TMP/out") \
    >"$TMP/cpack.log" 2>&1; then
  cat "$TMP/cpack.log" >&2
  echo "check-package: cpack failed" >&2
  exit 1
fi
debs=("$TMP"/out/*.deb)
if ((${#debs[@]} != 1)) || [[ ! -f "${debs[0]}" ]]; then
  cat "$TMP/cpack.log" >&2
  echo "check-package: expected one .deb in $TMP/out, got: ${debs[*]}" >&2
  exit 1
fi
DEB=${debs[0]}
echo "check-package: $(basename "$DEB")"

# --- Contents ----------------------------------------------------------------
# dpkg-deb -c prints: MODE OWNER/GROUP SIZE DATE TIME ./PATH
dpkg-deb -c "$DEB" >"$TMP/contents"
# The entry for PATH ("./usr/bin/walwatch"), or nothing.
entry() { awk -v p="$1" '$6 == p' "$TMP/contents"; }
expect_file() {
  local path=$1 mode=$2 line
  line=$(entry "$path")
  if [[ -z "$line" ]]; then
    fail "$path is not in the package"
    return
  fi
  [[ "$line" == "$mode root/root "* ]] || fail "$path: want $mode root/root, got: $line"
}
expect_file ./usr/bin/walwatch -rwxr-xr-x
expect_file ./usr/lib/systemd/system/walwatch.service -rw-r--r--
# May hold the PostgreSQL password: root only.
expect_file ./etc/default/walwatch -rw-------
for f in clusterpedia.sql replica_identity.sql roles.sql publication.sql \
    clusterpedia-resources.mapping.json; do
  expect_file "./usr/share/walwatch/$f" -rw-r--r--
done
for f in clusterpedia.sql roles.sql; do
  expect_file "./usr/share/walwatch/mysql/$f" -rw-r--r--
done
expect_file ./usr/share/doc/walwatch/README.md -rw-r--r--
expect_file ./usr/share/doc/walwatch/PROTOCOL.md -rw-r--r--
expect_file ./usr/share/doc/walwatch/examples/walwatch-mysql.conf -rw-r--r--
# Nothing from the build tree (tests, demo writer) and nothing outside the
# three roots.
while read -r line; do
  path=$(awk '{print $6}' <<<"$line")
  case "$path" in
    ./ | ./usr/* | ./etc/ | ./etc/default/ | ./etc/default/walwatch) ;;
    *) fail "unexpected path in the package: $line" ;;
  esac
  case "$path" in
    *test* | *demo_writer* | *.a | *.o) fail "build artefact in the package: $line" ;;
  esac
done <"$TMP/contents"

# --- Control -----------------------------------------------------------------
field() { dpkg-deb -f "$DEB" "$1"; }
[[ "$(field Package)" == walwatch ]] || fail "Package: $(field Package)"
[[ "$(field Architecture)" == "$(dpkg --print-architecture)" ]] ||
  fail "Architecture: $(field Architecture)"
version=$(sed -n 's/^project(walwatch VERSION \([0-9.]*\).*/\1/p' \
  "$(dirname "$0")/../../CMakeLists.txt")
[[ "$(field Version)" == "$version-1" ]] ||
  fail "Version: $(field Version), want $version-1 (CMakeLists.txt project version)"
[[ -n "$(field Maintainer)" ]] || fail "no Maintainer"
[[ "$(field Section)" == database ]] || fail "Section: $(field Section)"
depends=$(field Depends)
# libpq5 and the others come from dpkg-shlibdeps on the binary; adduser is
# what postinst uses to create the walwatch user.
# One package name per line, versions dropped.
dep_names=$(tr ',' '\n' <<<"$depends" | sed 's/^ *//; s/[ (].*//')
for dep in libpq5 libc6 libstdc++6 adduser; do
  grep -qxF "$dep" <<<"$dep_names" || fail "Depends lacks $dep: $depends"
done
for prefix in libsimdjson libprometheus-cpp-core; do
  grep -q "^$prefix" <<<"$dep_names" || fail "Depends lacks $prefix*: $depends"
done
[[ "$(field Suggests)" == *postgresql-15-wal2json* ]] ||
  fail "Suggests: $(field Suggests)"
dpkg-deb -I "$DEB" >"$TMP/info"
for script in postinst prerm postrm conffiles; do
  grep -Eq "^ +[0-9]+ bytes, +[0-9]+ lines +\*? *$script( |$)" "$TMP/info" ||
    fail "control member $script missing: $(cat "$TMP/info")"
done
mkdir "$TMP/control"
dpkg-deb -e "$DEB" "$TMP/control"
[[ "$(cat "$TMP/control/conffiles")" == /etc/default/walwatch ]] ||
  fail "conffiles: $(cat "$TMP/control/conffiles")"
for script in postinst prerm postrm; do
  [[ -x "$TMP/control/$script" ]] || fail "$script is not executable"
  sh -n "$TMP/control/$script" || fail "$script is not valid sh"
done

# --- The unpacked files --------------------------------------------------------
mkdir "$TMP/root"
dpkg-deb -x "$DEB" "$TMP/root"
unit="$TMP/root/usr/lib/systemd/system/walwatch.service"
if [[ -f "$unit" ]]; then
  exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
  [[ "$exec_start" == /usr/bin/walwatch ]] || fail "ExecStart is '$exec_start'"
  [[ -x "$TMP/root$exec_start" ]] || fail "ExecStart $exec_start is not in the package"
  grep -q '^EnvironmentFile=-/etc/default/walwatch$' "$unit" ||
    fail "the unit does not read /etc/default/walwatch"
fi
# The packaged binary runs with the libraries Depends names, and is the
# walwatch of this build (stripped, so compare what it prints).
if [[ ! -x "$TMP/root/usr/bin/walwatch" ]]; then
  :  # reported above
elif "$TMP/root/usr/bin/walwatch" --help >"$TMP/help.packaged" 2>&1; then
  "$BINARY" --help >"$TMP/help.built" 2>&1 || fail "$BINARY --help failed"
  cmp -s "$TMP/help.packaged" "$TMP/help.built" ||
    fail "the packaged walwatch --help differs from $BINARY's: a stale build?"
  grep -q '^Usage: walwatch' "$TMP/help.packaged" || fail "--help: no usage line"
else
  cat "$TMP/help.packaged" >&2
  fail "the packaged walwatch --help failed"
fi
# Stripped (CPACK_STRIP_FILES): no .debug_info section, no symbol table.
if command -v readelf >/dev/null && [[ -f "$TMP/root/usr/bin/walwatch" ]]; then
  ! readelf -S "$TMP/root/usr/bin/walwatch" | grep -q '\.symtab' ||
    fail "the packaged walwatch is not stripped"
fi

if ((failures > 0)); then
  echo "check-package: $failures check(s) failed; contents:" >&2
  cat "$TMP/contents" >&2
  exit 1
fi
echo "check-package: ok ($(wc -l <"$TMP/contents") entries; Depends: $depends)"
