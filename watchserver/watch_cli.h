// `walwatch watch PATH ...`: tails a watch on walwatch's socket the way
// `kubectl get -w` does, for operators debugging a deployment.
//
//   walwatch watch /api/v1/pods [--socket PATH] [--selector SEL]
//                  [--field-selector SEL] [--rv N] [-o table|json]
//
// The table shows TYPE, CLUSTER, NAMESPACE, NAME and RV per event. An error
// answer (a Status) or a 410 ERROR event is printed clearly and the command
// exits 1; the end of the stream exits 0.
//
// Thread safety: RunWatchCli blocks the calling thread, with synchronous
// reads on a socket of its own, until the stream ends; it shares nothing.
#ifndef WALWATCH_WATCHSERVER_WATCH_CLI_H_
#define WALWATCH_WATCHSERVER_WATCH_CLI_H_

#include <iosfwd>

namespace walwatch {

// argv[0] is "watch". Returns the process exit code.
int RunWatchCli(int argc, const char* const* argv, std::ostream& out,
                std::ostream& err);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_WATCH_CLI_H_
