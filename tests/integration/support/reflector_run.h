// The consumer's test (issue 18, part 6), written once for every database
// (model_database.h): many clients written the way client-go's reflector
// works read walwatch while Clusterpedia-shaped writers run. Each client
// lists (RV=0 initial state, or WatchList ending with the
// k8s.io/initial-events-end bookmark), then watches with bookmarks and a
// random timeoutSeconds, resumes from the last RV it received, and relists
// on 410. One hot resource (pods) overruns a small --max-log-bytes several
// times; the others are quiet.
//
// Checked: when the writers stop, every client's state equals SQL for its
// filter; no two different versions of one object (uid + cluster) share an
// RV; RVs never decrease along a stream; clients of quiet resources get no
// 410 at all; every 410 Expired names a floor above the RV it refuses, and
// a resume's 410 names the client's own last RV; every 410 Expired is
// witnessed by the database's own log (EventWitness: the WAL, the binlog,
// read by the test itself): a transaction that gave an event of the
// client's selection committed above the RV refused and at or below the
// floor named, so the client really lost an event; no watch of a known
// resource type is answered 404.
//
// "Quiet" assumes that a quiet client resumes before the hot resource has
// written a whole log after its quiet resource's next event. At make test's
// 48 clients that holds with room to spare. At thousands of clients on 2
// cores a resume can take longer than the 1 MiB log lasts (about 2 s of
// this writer), and then the quiet resource's own event is evicted and its
// 410s are right. For that, WALWATCH_REFLECTOR_QUIET_410=witnessed (the
// soak, tests/bench/reflector_soak.sh) allows a quiet client the 410
// Expired that the log witnesses, and nothing else. The summary also counts
// the 410s that a client-side witness accounts for (some client received
// the event), and gives each kind of request's wait for its response header
// (an initial state is read before its 200).
//
// Knobs: WALWATCH_REFLECTOR_SEED, WALWATCH_REFLECTOR_CLIENTS (default 48),
// WALWATCH_REFLECTOR_SECONDS (writing time, default 30; the defaults are
// the test's), WALWATCH_REFLECTOR_CATCHUP_SECONDS (the bound on every
// client reaching the last write's RV after the writers stop, default 300;
// the test waits for the condition, not for this long),
// WALWATCH_REFLECTOR_MAX_LOG (walwatch's --max-log-bytes, default 1Mi),
// WALWATCH_REFLECTOR_HOT_PAD (bytes of padding in each pod, default 1500:
// larger pods turn the log over faster), WALWATCH_REFLECTOR_QUIET_410
// ("none" or "witnessed", above), WALWATCH_REFLECTOR_LAGGARDS (clients
// that fall behind the log on purpose; default the test's). `make soak` runs it
// long and wide (tests/bench/reflector_soak.sh).
//
// Thread safety: for the test's thread.
#ifndef WALWATCH_TESTS_INTEGRATION_SUPPORT_REFLECTOR_RUN_H_
#define WALWATCH_TESTS_INTEGRATION_SUPPORT_REFLECTOR_RUN_H_

#include <cstdint>
#include <string>

#include "tests/integration/support/model_database.h"

namespace walwatch::itest {

struct ReflectorConfig {
  uint64_t seed = 20261204;
  int clients = 48;
  int seconds = 30;
  int catchup_seconds = 300;
  std::string max_log = "1Mi";
  int hot_pad = 1500;
  std::string quiet_410 = "none";
  // Clients of the hot resource, beyond `clients`, that before each resume
  // wait until the hot writer has written `lag_bytes` more (or the writers
  // stop; a condition, not a time): their resumes fall behind the log and
  // must get a 410 Expired the database's log witnesses, then relist.
  int laggards = 0;
  uint64_t lag_bytes = 2 << 20;

  // `defaults`, with the WALWATCH_REFLECTOR_* variables that are set.
  static ReflectorConfig FromEnvironment(ReflectorConfig defaults);
  static ReflectorConfig FromEnvironment();
};

// What a run saw, for a test that checks more than RunReflectors does.
struct ReflectorOutcome {
  int expired = 0;          // 410 Expired (an RV refused, a floor named)
  int witnessed = 0;        // of them, witnessed by the database's log
  int laggard_expired = 0;  // of them, to the laggards
  int other_410 = 0;        // every other 410 (fell behind, barriers, HTTP 410)
};

// Runs the reflector-style consumer test on `db`; its failures are the
// running test's (a fatal one returns at once, having stopped every
// thread).
ReflectorOutcome RunReflectors(ModelDatabase& db,
                               const ReflectorConfig& config);

}  // namespace walwatch::itest

#endif  // WALWATCH_TESTS_INTEGRATION_SUPPORT_REFLECTOR_RUN_H_
