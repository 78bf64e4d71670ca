// Whether a connection kept idle has been ended by its server.
//
// A database sends an idle session nothing unasked, but the message of a
// server that ends it (a restart, an idle timeout, a KILL) and then the end
// of the stream. So any byte, end of file or error waiting on an idle
// connection's socket means the connection is over: the caller connects
// again rather than fail its next request on it. A server gone without a
// word (a cut network) is still found only by the next statement.
//
// Thread safety: a pure function of the socket; the caller owns it.
#ifndef WALWATCH_CDC_BASE_IDLE_SOCKET_H_
#define WALWATCH_CDC_BASE_IDLE_SOCKET_H_

namespace walwatch {

// True if anything is waiting on `fd` (input, end of file, hang-up or an
// error), or `fd` is not open. Does not block and reads nothing.
bool IdleSocketEnded(int fd);

}  // namespace walwatch

#endif  // WALWATCH_CDC_BASE_IDLE_SOCKET_H_
