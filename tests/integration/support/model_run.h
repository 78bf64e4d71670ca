// The randomized model test, written once for every database
// (model_database.h): many watchers with random filters and start modes
// read walwatch while writer threads run random Clusterpedia-shaped
// statements; when the writers stop and every watcher has caught up, each
// watcher's state, rebuilt from its events alone, must equal what the
// database holds for the same filter.
//
// Seeded and reproducible in its choices (the interleaving of threads is
// not): WALWATCH_MODEL_SEED (default 20240611), WALWATCH_MODEL_SECONDS
// (writing time; the default is the test's), WALWATCH_MODEL_WATCHERS (24),
// WALWATCH_MODEL_WRITERS (3), WALWATCH_MODEL_CATCHUP_SECONDS (default 300):
// after the writers stop, every watcher must reach the RV of the last write
// (GET /walwatch/v1/freshrv) within that long, through its events or the
// bookmarks walwatch sends every second (--bookmark-interval 1s); the test
// waits for that, not for a fixed time. WALWATCH_MODEL_DROP_EVERY=N makes
// every watcher drop every Nth event, to see the test fail.
// WALWATCH_MODEL_LABEL_CHANGES=0 keeps each object's labels on updates, so
// that no MODIFIED moves an object into or out of a label selection.
//
// Thread safety: for the test's thread.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_RUN_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_RUN_H_

#include <cstdint>

#include "tests/integration/support/model_database.h"

namespace walwatch::itest {

struct ModelConfig {
  uint64_t seed = 20240611;
  int seconds = 60;
  int watchers = 24;
  int writers = 3;
  int catchup_seconds = 300;
  int drop_every = 0;
  // 0: updates keep an object's labels, so no object enters or leaves a
  // label selection by a MODIFIED (isolates everything else from that).
  int label_changes = 1;

  // `defaults`, with the WALWATCH_MODEL_* variables that are set.
  static ModelConfig FromEnvironment(ModelConfig defaults);
  static ModelConfig FromEnvironment();
};

// Runs the randomized model test on `db`; its failures are the running
// test's (a fatal one returns at once, having stopped every thread).
void RunRandomModel(ModelDatabase& db, const ModelConfig& config);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_MODEL_RUN_H_
