# Debian package of walwatch: the systemd unit, its defaults file, the schema
# SQL and the docs, and CPack's DEB settings. Included from the top-level
# CMakeLists.txt after install(TARGETS walwatch RUNTIME DESTINATION bin):
#
#   include(packaging/cpack.cmake)
#
# Then, in any build directory where walwatch is built (`make package` uses
# build/, the one `make` and `make test` use):
#
#   cmake --build . --target walwatch
#   cpack -G DEB            # -> walwatch_<version>-1_<arch>.deb
#
# cpack packages what is built and builds nothing itself (see
# CMAKE_SKIP_INSTALL_ALL_DEPENDENCY below), so a build with the tests is
# packaged without compiling them or anything else again. Only install()
# rules reach the package, and the tests have none: the package is the same
# with or without them.
#
# The package installs under /usr (bin/walwatch,
# lib/systemd/system/walwatch.service, share/walwatch/*.sql and mysql/*.sql,
# share/doc/walwatch and its examples/) plus the conffile
# /etc/default/walwatch; its postinst
# creates the walwatch system user. Dependencies come from dpkg-shlibdeps.
#
# Note: `cmake --install` of a build that includes this file writes
# /etc/default/walwatch (an absolute destination); use DESTDIR when not
# installing into the system.

get_filename_component(_walwatch_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(_walwatch_pkg "${CMAKE_CURRENT_LIST_DIR}")

# cpack (and `make install`) run the `preinstall` target, which by default
# depends on `all`: with the tests configured, packaging would first compile
# every test. Off: they install what is already built, and a walwatch that
# was not built is an install error naming the missing file.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

# --- Files -----------------------------------------------------------------

install(FILES "${_walwatch_pkg}/systemd/walwatch.service"
        DESTINATION lib/systemd/system)
# May hold a password: readable by root only (systemd reads it as root).
install(FILES "${_walwatch_pkg}/systemd/walwatch.default"
        DESTINATION /etc/default
        RENAME walwatch
        PERMISSIONS OWNER_READ OWNER_WRITE)
install(FILES
          "${_walwatch_root}/schema/clusterpedia.sql"
          "${_walwatch_root}/schema/replica_identity.sql"
          "${_walwatch_root}/schema/roles.sql"
          "${_walwatch_root}/schema/publication.sql"
          "${_walwatch_root}/schema/clusterpedia-resources.mapping.json"
        DESTINATION share/walwatch)
# MySQL/MariaDB: the table and the account's grants.
install(FILES
          "${_walwatch_root}/schema/mysql/clusterpedia.sql"
          "${_walwatch_root}/schema/mysql/roles.sql"
        DESTINATION share/walwatch/mysql)
install(FILES
          "${_walwatch_root}/README.md"
          "${_walwatch_root}/watchserver/PROTOCOL.md"
        DESTINATION share/doc/walwatch)
# The unit's drop-in for MySQL/MariaDB, to copy into
# /etc/systemd/system/walwatch.service.d/ (it says how).
install(FILES "${_walwatch_pkg}/systemd/walwatch-mysql.conf"
        DESTINATION share/doc/walwatch/examples)

# --- CPack -----------------------------------------------------------------

set(WALWATCH_PACKAGE_MAINTAINER "walwatch maintainers <walwatch@example.org>"
    CACHE STRING "Maintainer field of the Debian package")

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "walwatch")
set(CPACK_PACKAGE_VENDOR "walwatch")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${WALWATCH_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "PostgreSQL logical replication to Kubernetes watch streams")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
# Absolute destinations (/etc/default) go into the package, not the build
# machine's /etc.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build/" "/build-[^/]*/" "\\\\.swp$")

set(CPACK_DEBIAN_PACKAGE_NAME "walwatch")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${WALWATCH_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION "database")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_RELEASE "1")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")
# The extended description; CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY
# first, indents every line and turns empty lines into " .".
set(_walwatch_march_note "")
if(WALWATCH_MARCH)
  set(_walwatch_march_note "

Built with -march=${WALWATCH_MARCH} (x86-64-v3 needs a CPU with AVX2).")
endif()
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"walwatch reads a PostgreSQL table's changes through logical replication
(the wal2json plugin) and serves them on a Unix socket as Kubernetes watch
events ordered by commit, with the commit LSN as resourceVersion. It gives
Clusterpedia's APIServer a watch on its resources table.${_walwatch_march_note}")
# libpq5, libsimdjson14, libprometheus-cpp-core1.0, libstdc++6, libc6, ...
# from the binary (dpkg-shlibdeps), plus what the maintainer scripts use.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql-15-wal2json")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${_walwatch_pkg}/debian/conffiles"
    "${_walwatch_pkg}/debian/postinst"
    "${_walwatch_pkg}/debian/prerm"
    "${_walwatch_pkg}/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
