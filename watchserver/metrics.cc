#include "watchserver/metrics.h"

#include <map>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "cdc/base/mutex.h"

namespace walwatch {

const char* WatchEndReasonName(WatchEndReason reason) {
  switch (reason) {
    case WatchEndReason::kTimeout: return "timeout";
    case WatchEndReason::kClientClosed: return "client_closed";
    case WatchEndReason::kExpired: return "expired";
    case WatchEndReason::kBacklog: return "backlog";
    case WatchEndReason::kBarrier: return "barrier";
    case WatchEndReason::kShutdown: return "shutdown";
    case WatchEndReason::kError: return "error";
  }
  return "unknown";
}

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry =
      std::make_shared<prometheus::Registry>();

  prometheus::Family<prometheus::Gauge>& watchers =
      prometheus::BuildGauge()
          .Name("walwatch_watchers")
          .Help("Open watch streams, by resource.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& terminated =
      prometheus::BuildCounter()
          .Name("walwatch_watchers_terminated_total")
          .Help("Watch streams ended, by reason.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& sent =
      prometheus::BuildCounter()
          .Name("walwatch_events_sent_total")
          .Help("Watch events written to watchers, by type.")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& latency_family =
      prometheus::BuildHistogram()
          .Name("walwatch_commit_to_write_seconds")
          .Help("Time from a transaction's commit to its event being written "
                "to a watcher's socket, once per write (its oldest event), "
                "for events committed while the watch ran.")
          .Register(*registry);
  prometheus::Histogram& latency = latency_family.Add(
      {}, prometheus::Histogram::BucketBoundaries{
              0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
              5, 10, 30});
  std::array<prometheus::Counter*, 4> sent_by_type{};
  prometheus::Counter& state_stalls =
      prometheus::BuildCounter()
          .Name("walwatch_initial_state_stalls_total")
          .Help("Initial states ended with 410 because, over an "
                "--initial-state-stall-timeout of their reader waiting, the "
                "client took none of them or less than "
                "--initial-state-min-rate; their state readers were given "
                "back.")
          .Register(*registry)
          .Add({});

  // walwatch_watchers' series, with the watches each counts. A series goes
  // when its last watch ends: any resource path may be watched, so series
  // kept at 0 would grow with every path a client ever tried.
  struct WatcherSeries {
    prometheus::Gauge* gauge = nullptr;
    uint64_t watches = 0;
  };
  Mutex watchers_mu;
  std::map<std::tuple<std::string, std::string, std::string>, WatcherSeries>
      watcher_series GUARDED_BY(watchers_mu);

  struct Hook {
    std::function<double()> read;
    prometheus::Gauge* gauge = nullptr;
    prometheus::Counter* counter = nullptr;
    double last = 0;
  };
  Mutex mu;
  std::vector<Hook> hooks GUARDED_BY(mu);
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters;

  prometheus::Family<prometheus::Gauge>& GaugeFamily(const std::string& name,
                                                     const std::string& help) {
    auto it = gauges.find(name);
    if (it != gauges.end()) return *it->second;
    auto& f = prometheus::BuildGauge().Name(name).Help(help).Register(*registry);
    gauges[name] = &f;
    return f;
  }
  prometheus::Family<prometheus::Counter>& CounterFamily(
      const std::string& name, const std::string& help) {
    auto it = counters.find(name);
    if (it != counters.end()) return *it->second;
    auto& f =
        prometheus::BuildCounter().Name(name).Help(help).Register(*registry);
    counters[name] = &f;
    return f;
  }

  // A hook that sets the series of `family` labelled {label="value"} (no
  // label if `label` is empty) from `read` at each scrape.
  template <typename Series>
  void AddHookLocked(prometheus::Family<Series>& family,
                     const std::string& label, const std::string& value,
                     std::function<double()> read) REQUIRES(mu) {
    prometheus::Labels labels;
    if (!label.empty()) labels[label] = value;
    Series& series = family.Add(labels);
    Hook h;
    h.read = std::move(read);
    if constexpr (std::is_same_v<Series, prometheus::Gauge>) {
      h.gauge = &series;
    } else {
      static_assert(std::is_same_v<Series, prometheus::Counter>);
      h.counter = &series;
    }
    hooks.push_back(std::move(h));
  }
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {
  for (EventType t :
       {EventType::kAdded, EventType::kModified, EventType::kDeleted}) {
    impl_->sent_by_type[static_cast<size_t>(t)] =
        &impl_->sent.Add({{"type", EventTypeName(t)}});
  }
  impl_->sent_by_type[3] = &impl_->sent.Add({{"type", "BOOKMARK"}});
  // Every reason's series from the start, at 0: a counter whose series is
  // born at 1 shows no increase() for its first end, and the alerts on
  // terminations would miss it.
  for (WatchEndReason reason :
       {WatchEndReason::kTimeout, WatchEndReason::kClientClosed,
        WatchEndReason::kExpired, WatchEndReason::kBacklog,
        WatchEndReason::kBarrier, WatchEndReason::kShutdown,
        WatchEndReason::kError}) {
    impl_->terminated.Add({{"reason", WatchEndReasonName(reason)}});
  }
}

Metrics::~Metrics() = default;

void Metrics::WatchStarted(const std::string& group, const std::string& version,
                           const std::string& resource) {
  MutexLock lock(&impl_->watchers_mu);
  Impl::WatcherSeries& series =
      impl_->watcher_series[std::make_tuple(group, version, resource)];
  if (!series.gauge) {
    series.gauge = &impl_->watchers.Add(
        {{"group", group}, {"version", version}, {"resource", resource}});
  }
  ++series.watches;
  series.gauge->Increment();
}

void Metrics::WatchEnded(const std::string& group, const std::string& version,
                         const std::string& resource, WatchEndReason reason) {
  {
    MutexLock lock(&impl_->watchers_mu);
    auto it =
        impl_->watcher_series.find(std::make_tuple(group, version, resource));
    if (it != impl_->watcher_series.end()) {
      if (--it->second.watches == 0) {
        impl_->watchers.Remove(it->second.gauge);
        impl_->watcher_series.erase(it);
      } else {
        it->second.gauge->Decrement();
      }
    }
  }
  impl_->terminated.Add({{"reason", WatchEndReasonName(reason)}}).Increment();
}

void Metrics::EventsSent(EventType type, uint64_t count) {
  impl_->sent_by_type[static_cast<size_t>(type)]->Increment(
      static_cast<double>(count));
}

void Metrics::BookmarksSent(uint64_t count) {
  impl_->sent_by_type[3]->Increment(static_cast<double>(count));
}

void Metrics::InitialStateStalled() { impl_->state_stalls.Increment(); }

void Metrics::ObserveCommitToWrite(double seconds) {
  impl_->latency.Observe(seconds);
}

void Metrics::AddGauge(const std::string& name, const std::string& help,
                       std::function<double()> read) {
  AddLabeledGauge(name, help, "", "", std::move(read));
}

void Metrics::AddCounter(const std::string& name, const std::string& help,
                         std::function<double()> read) {
  AddLabeledCounter(name, help, "", "", std::move(read));
}

void Metrics::AddLabeledCounter(const std::string& name,
                                const std::string& help,
                                const std::string& label,
                                const std::string& value,
                                std::function<double()> read) {
  MutexLock lock(&impl_->mu);
  impl_->AddHookLocked(impl_->CounterFamily(name, help), label, value,
                       std::move(read));
}

void Metrics::AddLabeledGauge(const std::string& name, const std::string& help,
                              const std::string& label,
                              const std::string& value,
                              std::function<double()> read) {
  MutexLock lock(&impl_->mu);
  impl_->AddHookLocked(impl_->GaugeFamily(name, help), label, value,
                       std::move(read));
}

std::string Metrics::Scrape() {
  {
    MutexLock lock(&impl_->mu);
    for (Impl::Hook& h : impl_->hooks) {
      double v = h.read();
      if (h.gauge) {
        h.gauge->Set(v);
      } else if (v > h.last) {
        h.counter->Increment(v - h.last);
        h.last = v;
      }
    }
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, impl_->registry->Collect());
  return out.str();
}

std::shared_ptr<prometheus::Registry> Metrics::registry() {
  return impl_->registry;
}

}  // namespace walwatch
