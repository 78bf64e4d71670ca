// The latency histogram bench_writer and fanout_client share: microseconds
// from 1 us to 100 s in log bins under 1 % wide (Boost.Histogram), and the
// quantile read from it (the upper edge of the bin that reaches q).
#ifndef WALWATCH_TESTS_BENCH_LATENCY_HISTOGRAM_H_
#define WALWATCH_TESTS_BENCH_LATENCY_HISTOGRAM_H_

#include <boost/histogram.hpp>

namespace walwatch::bench {

namespace bh = boost::histogram;

using LatencyHistogram = decltype(bh::make_histogram(
    bh::axis::regular<double, bh::axis::transform::log>(1, 1.0, 1e8)));

inline LatencyHistogram MakeHistogram() {
  return bh::make_histogram(
      bh::axis::regular<double, bh::axis::transform::log>(2000, 1.0, 1e8));
}

inline double Quantile(const LatencyHistogram& h, double q) {
  double total = 0;
  for (auto&& x : bh::indexed(h, bh::coverage::all)) total += *x;
  if (total == 0) return 0;
  double seen = 0;
  for (auto&& x : bh::indexed(h, bh::coverage::all)) {
    seen += *x;
    if (seen >= q * total) return x.bin().upper();
  }
  return 0;
}

}  // namespace walwatch::bench

#endif  // WALWATCH_TESTS_BENCH_LATENCY_HISTOGRAM_H_
