# walwatch developer loop. Everything real is in CMake and tests/tools/.
#   make        configure + build build/walwatch
#   make run    the live demo (tests/tools/run-demo.sh); WATCH=/path?watch=1 picks the stream,
#               DB=mariadb runs it on MariaDB's binlog instead of PostgreSQL
#   make test   deps, build, throwaway PostgreSQL, ctest (tests/tools/run-tests.sh)
#   make package  a .deb with the binary and the systemd unit (CPack)
#   make deps   install the Debian packages that are missing, and a Go >= 1.26 for
#               clients/go if there is none (tests/tools/install-go.sh, into ~/.cache/walwatch)
#   make fuzz   libFuzzer targets (ASan+UBSan), FUZZ_RUNS=1000000 each (tests/fuzz/run-fuzz.sh)
#   make bench  benchmarks with their peers (pg_recvlogical, etcd, kine) in one
#               run, sized for 30 minutes on 2 cores: rewrites BENCHMARKS.md and
#               tests/bench/plots/, appends to tests/bench/HISTORY.md (tests/bench/run-bench.sh)
#   make soak   1,000 watchers, steady writes, SOAK_MINUTES=10; RSS and fds must stay flat (tests/bench/soak.sh);
#               then 2,000 reflector clients for 5 min (tests/bench/reflector_soak.sh)
BUILD_DIR ?= build
JOBS ?= 2

.PHONY: all run test test-fault bench soak package clean deps fuzz

all:
	@cmake -S . -B $(BUILD_DIR) || { echo "cmake failed; missing packages? try: make deps" >&2; exit 1; }
	cmake --build $(BUILD_DIR) -j$(JOBS) --target walwatch

run:
	DB='$(DB)' tests/tools/run-demo.sh '$(WATCH)'

test:
	tests/tools/run-tests.sh

# The fault suite: PostgreSQL restarts, cut connections, lost slots,
# TRUNCATE, DDL, a huge transaction: 32 ctest tests, each on a private
# cluster, and 12 on MariaDB (`ctest -N -L fault`). The PostgreSQL ones
# measured at 6e899a9 on 2 idle cores: 520 s in all from a clean build/
# (ctest itself 158 s).
test-fault:
	CTEST_ARGS="-L fault" tests/tools/run-tests.sh

bench:
	tests/bench/run-bench.sh

# Not in CI: 1,000 watchers for SOAK_MINUTES (10), then 2,000 reflector-like
# clients for 5 minutes of Clusterpedia-shaped writes; both append to
# tests/bench/HISTORY.md.
soak:
	tests/bench/soak.sh; a=$$?; tests/bench/reflector_soak.sh; b=$$?; exit $$((a || b))

fuzz:
	tests/fuzz/run-fuzz.sh

# A .deb (CPack) with the binary, the systemd unit and the schema SQL, made
# from the walwatch that `make` builds in $(BUILD_DIR) (nothing else is
# compiled); the package lands in $(BUILD_DIR). tests/tools/check-package.sh
# (ctest label `package`, part of `make test`) checks what it contains.
package: all
	cd $(BUILD_DIR) && cpack -G DEB --config CPackConfig.cmake

deps:
	tests/tools/install-deps.sh
	@tests/tools/install-go.sh >/dev/null

clean:
	rm -rf $(BUILD_DIR)
