// Metrics holds walwatch's Prometheus registry (prometheus-cpp) and the
// instruments the watch sessions update. Values owned elsewhere (the
// replication stream's counters, the event log's size) are copied in by
// refresh hooks just before each scrape, so the hot paths keep plain atomics;
// metric_hooks.h registers those.
//
// Names follow Prometheus conventions: walwatch_ prefix, _total counters,
// _bytes and _seconds units. watchserver/PROTOCOL.md and README.md list them.
//
// Thread safety: every method may be called from any thread.
#ifndef WALWATCH_WATCHSERVER_METRICS_H_
#define WALWATCH_WATCHSERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cdc/model/event.h"

namespace prometheus {
class Registry;
}

namespace walwatch {

// Why a watch ended; one label value of walwatch_watchers_terminated_total.
enum class WatchEndReason {
  kTimeout,        // timeoutSeconds (or the default) elapsed
  kClientClosed,   // the client went away
  kExpired,        // its cursor fell out of the retained log: 410
  kBacklog,        // its unsent backlog passed the bound: 410
  kBarrier,        // TRUNCATE, a lost slot or an oversized transaction: 410
  kShutdown,       // walwatch stopped
  kError,          // a write failed or the state could not be read
};
const char* WatchEndReasonName(WatchEndReason reason);

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Sessions.
  void WatchStarted(const std::string& group, const std::string& version,
                    const std::string& resource);
  void WatchEnded(const std::string& group, const std::string& version,
                  const std::string& resource, WatchEndReason reason);
  void EventsSent(EventType type, uint64_t count);
  void BookmarksSent(uint64_t count);
  // A state reader gave its worker back because the client took none of
  // the initial state for --initial-state-stall-timeout.
  void InitialStateStalled();
  // Seconds from a transaction's commit to its event being written.
  void ObserveCommitToWrite(double seconds);

  // A gauge or counter whose value is read at scrape time. `help` is the
  // metric's HELP text. Counters must never decrease.
  void AddGauge(const std::string& name, const std::string& help,
                std::function<double()> read);
  void AddCounter(const std::string& name, const std::string& help,
                  std::function<double()> read);
  // Same, with one label (for example the event type).
  void AddLabeledCounter(const std::string& name, const std::string& help,
                         const std::string& label, const std::string& value,
                         std::function<double()> read);
  void AddLabeledGauge(const std::string& name, const std::string& help,
                       const std::string& label, const std::string& value,
                       std::function<double()> read);

  // Runs the read hooks and serializes everything in the text format.
  std::string Scrape();

  std::shared_ptr<prometheus::Registry> registry();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_METRICS_H_
