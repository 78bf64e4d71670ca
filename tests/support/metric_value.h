// MetricValue: one sample read from a scrape of walwatch's /metrics (the
// Prometheus text format), the one reader of it in tests/. The unit tests
// read the scrapes of a server in the test process, the integration and
// fault tests those of a walwatch binary over its ops listener.
//
// Header-only: for tests only. Thread safety: a pure function.
#ifndef WALWATCH_TESTS_SUPPORT_METRIC_VALUE_H_
#define WALWATCH_TESTS_SUPPORT_METRIC_VALUE_H_

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace walwatch::test_support {

// The value of the sample `series` in `scrape`: its name alone for an
// unlabelled series ("walwatch_connections"), or its name with its labels
// as walwatch exposes them ("walwatch_watchers{group=\"\",...}"). The first
// line that is `series`, a space, then a number; nullopt if there is none.
// A name never matches a longer name, nor a labelled series of it.
inline std::optional<double> MetricValue(std::string_view scrape,
                                         std::string_view series) {
  while (!scrape.empty()) {
    const size_t eol = scrape.find('\n');
    const std::string_view line = scrape.substr(0, eol);
    scrape.remove_prefix(eol == std::string_view::npos ? scrape.size()
                                                       : eol + 1);
    if (line.size() <= series.size() + 1 ||
        line.substr(0, series.size()) != series || line[series.size()] != ' ') {
      continue;
    }
    const std::string value(line.substr(series.size() + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace walwatch::test_support

#endif  // WALWATCH_TESTS_SUPPORT_METRIC_VALUE_H_
