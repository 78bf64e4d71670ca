#include "watchserver/watch_cli.h"

#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <limits>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "cdc/base/cli_args.h"

namespace walwatch {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using json = nlohmann::json;

namespace {

constexpr const char kUsage[] =
    "usage: walwatch watch PATH [--socket PATH] [--selector SEL] "
    "[--field-selector SEL] [--rv N] [-o table|json]\n"
    "  PATH is a watch path such as /api/v1/pods or\n"
    "  /clusters/c1/apis/apps/v1/namespaces/default/deployments.\n"
    "  --socket defaults to $WALWATCH_SOCKET or /run/walwatch/walwatch.sock.\n";

std::string Escape(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string Str(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* key : path) {
    if (!cur->is_object()) return "";
    auto it = cur->find(key);
    if (it == cur->end()) return "";
    cur = &*it;
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

struct Printer {
  std::ostream& out;
  std::ostream& err;
  bool table;
  bool header_done = false;

  void Row(const std::string& type, const std::string& cluster,
           const std::string& ns, const std::string& name,
           const std::string& rv) {
    out << std::left << std::setw(9) << type << " " << std::setw(16)
        << (cluster.empty() ? "-" : cluster) << " " << std::setw(20)
        << (ns.empty() ? "-" : ns) << " " << std::setw(40) << name << " "
        << rv << "\n";
  }

  // Returns false when the stream must end (an ERROR event).
  bool Line(const std::string& line) {
    if (line.empty()) return true;
    json ev = json::parse(line, nullptr, false);
    if (ev.is_discarded() || !ev.is_object()) {
      err << "walwatch watch: not a watch event: " << line.substr(0, 200)
          << "\n";
      return true;
    }
    std::string type = Str(ev, {"type"});
    if (type == "ERROR") {
      const json& st = ev["object"];
      err << "error: " << st.value("code", 0) << " "
          << st.value("reason", std::string()) << ": "
          << st.value("message", std::string());
      if (st.value("code", 0) == 410) {
        err << " (the watch fell out of walwatch's window: list again and "
               "watch from the list's resourceVersion)";
      }
      err << "\n";
      if (!table) out << line << "\n";
      return false;
    }
    if (!table) {
      out << line << "\n" << std::flush;
      return true;
    }
    if (!header_done) {
      Row("TYPE", "CLUSTER", "NAMESPACE", "NAME", "RV");
      header_done = true;
    }
    const json& obj = ev["object"];
    Row(type,
        Str(obj, {"metadata", "annotations",
                  "shadow.clusterpedia.io/cluster-name"}),
        Str(obj, {"metadata", "namespace"}), Str(obj, {"metadata", "name"}),
        Str(obj, {"metadata", "resourceVersion"}));
    out << std::flush;
    return true;
  }
};

}  // namespace

int RunWatchCli(int argc, const char* const* argv, std::ostream& out,
                std::ostream& err) {
  std::string path, selector, field_selector, rv, output = "table";
  const char* env_socket = std::getenv("WALWATCH_SOCKET");
  std::string socket = env_socket && *env_socket ? env_socket
                                                 : "/run/walwatch/walwatch.sock";
  for (ArgCursor a(argc, argv, 1); !a.Done(); a.Next()) {
    bool ok = true;
    if (a.arg() == "-h" || a.arg() == "--help") {
      out << kUsage;
      return 0;
    } else if (a.Is("--socket")) {
      ok = a.Value(&socket);
    } else if (a.Is("--selector") || a.Is("-l")) {
      ok = a.Value(&selector);
    } else if (a.Is("--field-selector")) {
      ok = a.Value(&field_selector);
    } else if (a.Is("--rv")) {
      ok = a.Value(&rv);
    } else if (a.Is("-o") || a.Is("--output")) {
      ok = a.Value(&output);
    } else if (!a.arg().empty() && a.arg()[0] == '/' && path.empty()) {
      path = a.arg();
    } else {
      err << "walwatch watch: unexpected argument \"" << a.arg() << "\"\n"
          << kUsage;
      return 2;
    }
    if (!ok) {
      err << "walwatch watch: " << a.arg() << " needs a value\n";
      return 2;
    }
  }
  if (path.empty()) {
    err << "walwatch watch: missing PATH\n" << kUsage;
    return 2;
  }
  if (output != "table" && output != "json") {
    err << "walwatch watch: -o must be table or json\n";
    return 2;
  }
  std::string target = path + (path.find('?') == std::string::npos ? "?" : "&") +
                       "watch=1";
  if (!rv.empty()) target += "&resourceVersion=" + Escape(rv);
  if (!selector.empty()) target += "&labelSelector=" + Escape(selector);
  if (!field_selector.empty()) {
    target += "&fieldSelector=" + Escape(field_selector);
  }

  asio::io_context io;
  asio::local::stream_protocol::socket sock(io);
  beast::error_code ec;
  sock.connect(asio::local::stream_protocol::endpoint(socket), ec);
  if (ec) {
    err << "walwatch watch: cannot connect to " << socket << ": "
        << ec.message() << "\n";
    return 1;
  }
  http::request<http::empty_body> req(http::verb::get, target, 11);
  req.set(http::field::host, "walwatch");
  req.set(http::field::accept, "application/json");
  http::write(sock, req, ec);
  if (ec) {
    err << "walwatch watch: cannot send the request: " << ec.message() << "\n";
    return 1;
  }

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // Not boost::none: Boost 1.74 compares a Content-Length with the empty
  // optional and finds it over the limit (a Status answer would fail).
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(sock, buffer, parser, ec);
  if (ec) {
    err << "walwatch watch: bad response: " << ec.message() << "\n";
    return 1;
  }
  const int status = parser.get().result_int();
  Printer printer{out, err, output == "table"};
  std::string pending, body;
  char chunk[64 * 1024];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    // read_some, not read: read would wait for 64 KiB of events, and a
    // quiet or filtered stream would print nothing for minutes.
    http::read_some(sock, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      if (ec == http::error::end_of_stream || ec == asio::error::eof) break;
      err << "walwatch watch: stream broke: " << ec.message() << "\n";
      return 1;
    }
    size_t n = sizeof(chunk) - parser.get().body().size;
    if (status != 200) {
      body.append(chunk, n);
      continue;
    }
    pending.append(chunk, n);
    size_t start = 0, nl;
    while ((nl = pending.find('\n', start)) != std::string::npos) {
      if (!printer.Line(pending.substr(start, nl - start))) return 1;
      start = nl + 1;
    }
    pending.erase(0, start);
  }
  if (status != 200) {
    json st = json::parse(body, nullptr, false);
    if (st.is_object() && st.value("kind", "") == "Status") {
      err << "error: " << status << " " << st.value("reason", std::string())
          << ": " << st.value("message", std::string()) << "\n";
    } else {
      err << "error: HTTP " << status << ": " << body.substr(0, 500) << "\n";
    }
    return 1;
  }
  if (!pending.empty() && !printer.Line(pending)) return 1;
  return 0;
}

}  // namespace walwatch
