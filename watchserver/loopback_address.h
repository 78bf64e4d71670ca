// The one rule for the address of walwatch's optional TCP listener
// (--tcp-listen, HttpServerOptions::tcp_listen). The listener serves the same
// unauthenticated API as the Unix socket, so it must not be reachable from
// outside the host.
//
// Accepted, and nothing else:
//  * "A.B.C.D:PORT" with A.B.C.D a dotted-quad address in 127.0.0.0/8;
//  * "[::1]:PORT", IPv6 loopback, in brackets and in this spelling only
//    (unbracketed, "::1:8080" is itself an IPv6 address: ambiguous);
//  * PORT: decimal digits, 0 to 65535. 0 asks the kernel for a free port,
//    which tests use; the --tcp-listen flag refuses it (kubectl must be
//    told the port).
// Host names ("localhost") are refused: what they resolve to can change.
//
// Thread safety: a pure function; any thread.
#ifndef WALWATCH_WATCHSERVER_LOOPBACK_ADDRESS_H_
#define WALWATCH_WATCHSERVER_LOOPBACK_ADDRESS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace walwatch {

// Parses `text` by the rule above. On success sets *host to the numeric
// address without brackets ("127.0.0.1", "::1") and *port; otherwise
// returns false and leaves both unchanged.
bool ParseLoopbackAddress(std::string_view text, std::string* host,
                          uint16_t* port);

}  // namespace walwatch

#endif  // WALWATCH_WATCHSERVER_LOOPBACK_ADDRESS_H_
