#include "watchserver/loopback_address.h"

#include <arpa/inet.h>

#include "cdc/base/text.h"

namespace walwatch {

bool ParseLoopbackAddress(std::string_view text, std::string* host,
                          uint16_t* port) {
  std::string_view host_text;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find("]:");
    if (close == std::string_view::npos) return false;
    host_text = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
    if (host_text != "::1") return false;
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return false;
    host_text = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    in_addr addr{};
    const std::string host_string(host_text);
    if (inet_pton(AF_INET, host_string.c_str(), &addr) != 1) return false;
    if ((ntohl(addr.s_addr) >> 24) != 127) return false;
  }
  uint64_t p;
  if (!ParseUnsigned(port_text, &p) || p > 65535) return false;
  *host = std::string(host_text);
  *port = static_cast<uint16_t>(p);
  return true;
}

}  // namespace walwatch
