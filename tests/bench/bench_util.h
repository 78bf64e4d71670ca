// Small pieces the bench programs share: the wall clock that bench_writer
// stamps objects with and the clients compare against, and the end
// condition a client reads from bench_writer's --out file.
#ifndef WALWATCH_TESTS_BENCH_BENCH_UTIL_H_
#define WALWATCH_TESTS_BENCH_BENCH_UTIL_H_

#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace walwatch::bench {

// CLOCK_REALTIME in nanoseconds: the writer's stamp and the reader's clock.
inline int64_t RealtimeNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// bench_writer's --out: last_seq_W=N lines, one per writer. Empty until the
// file exists; *present says whether it does.
inline std::vector<uint64_t> ReadFinalSeqs(const std::string& file,
                                           bool* present) {
  std::vector<uint64_t> seqs;
  std::ifstream in(file);
  *present = static_cast<bool>(in);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("last_seq_", 0) != 0) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    size_t w = std::strtoull(line.c_str() + 9, nullptr, 10);
    if (seqs.size() <= w) seqs.resize(w + 1, 0);
    seqs[w] = std::strtoull(line.c_str() + eq + 1, nullptr, 10);
  }
  return seqs;
}

}  // namespace walwatch::bench

#endif  // WALWATCH_TESTS_BENCH_BENCH_UTIL_H_
