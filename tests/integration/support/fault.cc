#include "tests/integration/support/fault.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace walwatch::itest {

namespace {

constexpr char kMemberRvAnnotationKey[] =
    "walwatch.clusterpedia.io/member-resource-version";
constexpr char kClusterAnnotationKey[] = "shadow.clusterpedia.io/cluster-name";

}  // namespace

// ---------------------------------------------------------------------------
// TcpProxy

struct TcpProxy::Impl {
  struct Pair {
    int client = -1;    // TCP, from walwatch
    int upstream = -1;  // Unix, to PostgreSQL
    std::string to_upstream, to_client;
  };
  std::string upstream_path;  // under mu
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<bool> refusing{false};
  std::atomic<bool> stalled{false};
  std::mutex mu;
  std::condition_variable cv;
  bool cut_requested = false;
  size_t cut_count = 0;
  bool cut_done = false;
  std::vector<Pair> pairs;  // proxy thread only
  std::atomic<size_t> active{0};
  std::atomic<size_t> stalled_waiting{0};
  std::atomic<size_t>* accepted = nullptr;

  static void Reset(int fd) {
    if (fd < 0) return;
    linger l{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
  }
  static void SetNonBlocking(int fd) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  int ConnectUpstream() {
    std::string path;
    {
      std::lock_guard<std::mutex> lock(mu);
      path = upstream_path;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  // Moves bytes from `from` into `buffer`; false on EOF or error.
  static bool ReadInto(int from, std::string* buffer) {
    char buf[65536];
    for (;;) {
      ssize_t n = read(from, buf, sizeof buf);
      if (n > 0) {
        buffer->append(buf, static_cast<size_t>(n));
        if (buffer->size() > (4u << 20)) return true;  // back-pressure
        continue;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
  }
  static bool Flush(int to, std::string* buffer) {
    while (!buffer->empty()) {
      ssize_t n = write(to, buffer->data(), buffer->size());
      if (n > 0) {
        buffer->erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
  }
  void Close(Pair& p, bool reset) {
    if (reset) {
      Reset(p.client);
    } else {
      Flush(p.client, &p.to_client);
      close(p.client);
    }
    if (!reset) Flush(p.upstream, &p.to_upstream);
    close(p.upstream);
    p.client = p.upstream = -1;
  }
  void Loop() {
    while (!stop.load()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (cut_requested) {
          cut_count = pairs.size();
          for (auto& p : pairs) Close(p, /*reset=*/true);
          pairs.clear();
          active = 0;
          cut_requested = false;
          cut_done = true;
          cv.notify_all();
        }
      }
      std::vector<pollfd> fds;
      if (stalled.load()) {
        // Which connections have sent bytes that nothing forwards: their
        // client waits on the partition.
        size_t waiting = 0;
        for (auto& p : pairs) {
          pollfd c{p.client, POLLIN, 0};
          waiting += poll(&c, 1, 0) > 0 && (c.revents & POLLIN);
        }
        stalled_waiting = waiting;
        pollfd w{wake[0], POLLIN, 0};
        if (poll(&w, 1, 50) > 0) {
          char b[64];
          while (read(wake[0], b, sizeof b) > 0) {
          }
        }
        continue;
      }
      fds.push_back({listen_fd, POLLIN, 0});
      fds.push_back({wake[0], POLLIN, 0});
      for (auto& p : pairs) {
        short c = 0, u = 0;
        if (p.to_upstream.size() < (4u << 20)) c |= POLLIN;
        if (p.to_client.size() < (4u << 20)) u |= POLLIN;
        if (!p.to_client.empty()) c |= POLLOUT;
        if (!p.to_upstream.empty()) u |= POLLOUT;
        fds.push_back({p.client, c, 0});
        fds.push_back({p.upstream, u, 0});
      }
      int r = poll(fds.data(), fds.size(), 200);
      if (r < 0 && errno != EINTR) break;
      if (r <= 0) continue;
      if (fds[1].revents) {
        char b[64];
        while (read(wake[0], b, sizeof b) > 0) {
        }
      }
      std::vector<bool> dead(pairs.size(), false);
      for (size_t i = 0; i < pairs.size(); ++i) {
        Pair& p = pairs[i];
        short cr = fds[2 + 2 * i].revents, ur = fds[3 + 2 * i].revents;
        bool ok = true;
        if (cr & (POLLIN | POLLHUP | POLLERR)) ok &= ReadInto(p.client, &p.to_upstream);
        if (ur & (POLLIN | POLLHUP | POLLERR)) ok &= ReadInto(p.upstream, &p.to_client);
        ok &= Flush(p.upstream, &p.to_upstream);
        ok &= Flush(p.client, &p.to_client);
        if (!ok) dead[i] = true;
      }
      for (size_t i = pairs.size(); i-- > 0;) {
        if (dead[i]) {
          Close(pairs[i], /*reset=*/false);
          pairs.erase(pairs.begin() + static_cast<long>(i));
        }
      }
      if (fds[0].revents & POLLIN) {
        for (;;) {
          int c = accept4(listen_fd, nullptr, nullptr,
                          SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (c < 0) break;
          ++*accepted;
          if (refusing.load()) {
            Reset(c);
            continue;
          }
          int u = ConnectUpstream();
          if (u < 0) {
            Reset(c);
            continue;
          }
          SetNonBlocking(u);
          Pair p;
          p.client = c;
          p.upstream = u;
          pairs.push_back(std::move(p));
        }
      }
      active = pairs.size();
    }
    for (auto& p : pairs) Close(p, /*reset=*/true);
    pairs.clear();
  }
};

TcpProxy::TcpProxy(std::string upstream_unix_socket)
    : impl_(std::make_unique<Impl>()) {
  impl_->upstream_path = std::move(upstream_unix_socket);
  impl_->accepted = &accepted_;
  impl_->listen_fd =
      socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (impl_->listen_fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(impl_->listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) !=
          0 ||
      listen(impl_->listen_fd, 64) != 0) {
    throw std::runtime_error(std::string("proxy bind/listen: ") +
                             strerror(errno));
  }
  socklen_t len = sizeof addr;
  getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (pipe2(impl_->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  impl_->thread = std::thread([this] { impl_->Loop(); });
}

TcpProxy::~TcpProxy() {
  impl_->stop = true;
  (void)!write(impl_->wake[1], "x", 1);
  impl_->thread.join();
  close(impl_->listen_fd);
  close(impl_->wake[0]);
  close(impl_->wake[1]);
}

size_t TcpProxy::CutAll() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cut_requested = true;
  impl_->cut_done = false;
  (void)!write(impl_->wake[1], "x", 1);
  impl_->cv.wait_for(lock, std::chrono::seconds(10),
                     [&] { return impl_->cut_done; });
  return impl_->cut_count;
}

void TcpProxy::SetUpstream(std::string unix_socket) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->upstream_path = std::move(unix_socket);
}

void TcpProxy::SetRefusing(bool refusing) { impl_->refusing = refusing; }

void TcpProxy::SetStalled(bool stalled) {
  impl_->stalled_waiting = 0;
  impl_->stalled = stalled;
  (void)!write(impl_->wake[1], "x", 1);
}

size_t TcpProxy::active() const { return impl_->active.load(); }

size_t TcpProxy::waiting_while_stalled() const {
  return impl_->stalled.load() ? impl_->stalled_waiting.load() : 0;
}

// ---------------------------------------------------------------------------
// FaultWriter

std::string ExpectedEvent::Describe() const {
  return type + " " + kind + " " + cluster + "/" + ns + "/" + name +
         " seq=" + std::to_string(seq) + " (write #" + std::to_string(write) +
         ")";
}

FaultWriter::FaultWriter(Options options)
    : options_(std::move(options)), rng_(options_.seed) {
  const char* clusters[] = {"c1", "c2"};
  const char* namespaces[] = {"ns-a", "ns-b"};
  for (int i = 0; i < 64; ++i) {
    Object o;
    if (i % 2 == 0) {
      o.kind = "Pod";
      o.resource = "pods";
      o.version = "v1";
    } else {
      o.kind = "Deployment";
      o.resource = "deployments";
      o.group = "apps";
      o.version = "v1";
    }
    o.cluster = clusters[(i / 2) % 2];
    o.ns = namespaces[(i / 4) % 2];
    o.name = "obj-" + std::to_string(i / 8) + "-" + std::to_string(i);
    objects_.push_back(std::move(o));
  }
}

FaultWriter::~FaultWriter() { Stop(); }

nlohmann::json FaultWriter::ObjectFor(const Object& o, uint64_t seq) const {
  std::string data;
  std::string unit = std::to_string(seq * 2654435761u % 1000003) + ":";
  while (data.size() < options_.payload_bytes) data += unit;
  data.resize(options_.payload_bytes);
  return {
      {"apiVersion", o.group.empty() ? o.version : o.group + "/" + o.version},
      {"kind", o.kind},
      {"metadata",
       {{"name", o.name},
        {"namespace", o.ns},
        {"uid", o.uid},
        {"resourceVersion", std::to_string(seq)},
        {"labels", {{"app", "fault"}, {"quote", "a \"b\" \\ c"}}},
        {"annotations", {{kClusterAnnotationKey, o.cluster}}}}},
      {"spec", {{"seq", seq}, {"data", data}}}};
}

void FaultWriter::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void FaultWriter::Pause() {
  std::unique_lock<std::mutex> lock(mu_);
  paused_ = true;
  cv_.wait(lock, [&] { return !busy_; });
}

void FaultWriter::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = false;
  cv_.notify_all();
}

void FaultWriter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void FaultWriter::ForgetAllObjects() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& o : objects_) o.exists = false;
}

::testing::AssertionResult FaultWriter::WriteTail() {
  if (thread_.joinable()) {
    return ::testing::AssertionFailure() << "WriteTail before Stop";
  }
  std::unique_ptr<FaultStore> conn;
  try {
    conn = Connect();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "tail write: " << e.what();
  }
  static const struct {
    const char* kind;
    const char* resource;
    const char* group;
    const char* cluster;
    const char* ns;
  } kTails[] = {{"Pod", "pods", "", "c1", "ns-b"},
                {"Deployment", "deployments", "apps", "c2", "ns-a"}};
  for (const auto& t : kTails) {
    Object o;
    o.kind = t.kind;
    o.resource = t.resource;
    o.group = t.group;
    o.version = "v1";
    o.cluster = t.cluster;
    o.ns = t.ns;
    uint64_t seq = next_seq_++;
    o.name = "tail-" + std::to_string(seq);
    o.uid = "uid-tail-" + std::to_string(seq);
    o.seq = seq;
    o.stored = ObjectFor(o, seq);
    try {
      conn->Insert(RowOf(o));
    } catch (const std::exception& e) {
      return ::testing::AssertionFailure() << "tail write: " << e.what();
    }
    ExpectedEvent e;
    e.type = "ADDED";
    e.kind = o.kind;
    e.cluster = o.cluster;
    e.ns = o.ns;
    e.name = o.name;
    e.seq = seq;
    e.object = o.stored;
    std::lock_guard<std::mutex> lock(mu_);
    e.write = log_.size();
    log_.push_back(std::move(e));
  }
  return ::testing::AssertionSuccess();
}

bool FaultWriter::WaitForWrites(size_t n, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [&] {
    return log_.size() >= n || !fatal_.empty() || stop_;
  }) && log_.size() >= n;
}

size_t FaultWriter::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_.size();
}

size_t FaultWriter::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_.size();
}

std::vector<std::string> FaultWriter::error_messages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

std::string FaultWriter::fatal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fatal_;
}

std::vector<ExpectedEvent> FaultWriter::Log(size_t from) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (from >= log_.size()) return {};
  return std::vector<ExpectedEvent>(log_.begin() + static_cast<long>(from),
                                    log_.end());
}

std::unique_ptr<FaultStore> FaultWriter::Connect() const {
  return options_.connect ? options_.connect()
                          : PgFaultStore(options_.conninfo);
}

bool FaultWriter::Reconnect(std::unique_ptr<FaultStore>* conn) {
  conn->reset();
  auto deadline = Clock::now() + options_.reconnect_timeout;
  std::string last;
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        fatal_ = "stopped while reconnecting: " + last;
        return false;
      }
    }
    try {
      *conn = Connect();
      return true;
    } catch (const std::exception& e) {
      last = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::lock_guard<std::mutex> lock(mu_);
  fatal_ = "cannot reconnect within " +
           std::to_string(options_.reconnect_timeout.count()) + " s: " + last;
  return false;
}

void FaultWriter::Loop() {
  std::unique_ptr<FaultStore> conn;
  if (!Reconnect(&conn)) return;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !paused_; });
      if (stop_) return;
      busy_ = true;
    }
    bool ok = WriteOne(&conn);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      cv_.notify_all();
    }
    if (!ok) return;
    if (options_.pause.count() > 0) std::this_thread::sleep_for(options_.pause);
  }
}

FaultStore::Row FaultWriter::RowOf(const Object& o) {
  return {o.group, o.version, o.resource, o.kind, o.cluster,
          o.ns,    o.name,    o.uid,      o.seq,  o.stored.dump()};
}

namespace {

class PgStore : public FaultStore {
 public:
  explicit PgStore(const std::string& conninfo) : conn_(conninfo) {}

  void Insert(const Row& r) override {
    conn_.Query(
        "INSERT INTO resources (\"group\", version, resource, kind, cluster, "
        "namespace, name, uid, resource_version, object, created_at, "
        "synced_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, "
        "now(), now())",
        {r.group, r.version, r.resource, r.kind, r.cluster, r.ns, r.name, r.uid,
         std::to_string(r.seq), r.object});
  }
  bool Update(const Row& r) override {
    std::vector<std::string> p = Key(r);
    p.push_back(r.object);
    p.push_back(std::to_string(r.seq));
    p.push_back(r.uid);
    return conn_
               .Query(std::string("UPDATE resources SET created_at = now(), "
                                  "object = $7::jsonb, resource_version = $8, "
                                  "uid = $9, synced_at = now() ") +
                          kWhere + " RETURNING 1",
                      p)
               .size() == 1;
  }
  bool Delete(const Row& r) override {
    return conn_
               .Query(std::string("DELETE FROM resources ") + kWhere +
                          " RETURNING 1",
                      Key(r))
               .size() == 1;
  }
  bool RecordEvent(const Row& r, const std::string& reason,
                   const std::string& value) override {
    // Written so that it also works when a test has changed `events` to
    // text.
    return conn_
               .Query(
                   "UPDATE resources SET events = (COALESCE(events::jsonb, "
                   "'{}'::jsonb) || jsonb_build_object($1::text, $2::text)), "
                   "event_resource_versions = "
                   "(COALESCE(event_resource_versions, '{}'::jsonb) || "
                   "jsonb_build_object($1::text, $2::text)) "
                   "WHERE cluster = $3 AND uid = $4 RETURNING 1",
                   {reason, value, r.cluster, r.uid})
               .size() == 1;
  }
  std::optional<std::string> StoredSeq(const Row& r) override {
    auto rows = conn_.Query(
        std::string("SELECT object->'spec'->>'seq' FROM resources ") + kWhere,
        Key(r));
    if (rows.empty()) return std::nullopt;
    return rows[0][0];
  }

 private:
  static constexpr char kWhere[] =
      "WHERE cluster = $1 AND \"group\" = $2 AND version = $3 AND "
      "resource = $4 AND namespace = $5 AND name = $6";
  static std::vector<std::string> Key(const Row& r) {
    return {r.cluster, r.group, r.version, r.resource, r.ns, r.name};
  }
  PgConnection conn_;
};

}  // namespace

std::unique_ptr<FaultStore> PgFaultStore(const std::string& conninfo) {
  return std::make_unique<PgStore>(conninfo);
}

bool FaultWriter::WriteOne(std::unique_ptr<FaultStore>* conn) {
  size_t index = rng_() % objects_.size();
  Object& o = objects_[index];
  enum class Op { kInsert, kUpdate, kDelete, kRecord } op;
  if (!o.exists) {
    op = Op::kInsert;
  } else {
    int r = static_cast<int>(rng_() % 100);
    op = r < 10 ? Op::kDelete : r < 20 ? Op::kRecord : Op::kUpdate;
  }
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = next_seq_++;
  }
  Object next = o;
  if (op == Op::kInsert) {
    next.uid = "uid-" + std::to_string(index) + "-" + std::to_string(seq);
  }
  if (op == Op::kInsert || op == Op::kUpdate) {
    next.seq = seq;
    next.stored = ObjectFor(next, seq);
    next.exists = true;
  }
  if (op == Op::kDelete) next.exists = false;
  FaultStore::Row row = RowOf(next);
  if (op == Op::kDelete || op == Op::kRecord) row = RowOf(o);

  auto run = [&](FaultStore& c) {
    switch (op) {
      case Op::kInsert:
        c.Insert(row);
        return true;
      case Op::kUpdate:
        return c.Update(row);
      case Op::kDelete:
        return c.Delete(row);
      case Op::kRecord:
        return c.RecordEvent(row, "reason" + std::to_string(seq % 5),
                             std::to_string(seq));
    }
    return false;
  };

  bool committed = false;
  try {
    if (!run(**conn)) {
      std::lock_guard<std::mutex> lock(mu_);
      fatal_ = "write #" + std::to_string(seq) + " on " + o.name +
               " matched no row (the writer's model is wrong)";
      return false;
    }
    committed = true;
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      errors_.push_back(e.what());
    }
    // Learn whether it committed: read the row back on a new connection.
    auto deadline = Clock::now() + options_.reconnect_timeout;
    for (;;) {
      if (!Reconnect(conn)) return false;
      try {
        const std::optional<std::string> stored_seq = (*conn)->StoredSeq(row);
        switch (op) {
          case Op::kInsert:
          case Op::kUpdate:
            committed = stored_seq && *stored_seq == std::to_string(seq);
            break;
          case Op::kDelete:
            committed = !stored_seq;
            break;
          case Op::kRecord:
            committed = false;  // no event either way
            break;
        }
        break;
      } catch (const std::exception& e2) {
        std::lock_guard<std::mutex> lock(mu_);
        errors_.push_back(std::string("(reading back) ") + e2.what());
      }
      if (Clock::now() > deadline) {
        std::lock_guard<std::mutex> lock(mu_);
        fatal_ = "cannot read back write #" + std::to_string(seq);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (!committed || op == Op::kRecord) return true;
  ExpectedEvent e;
  e.type = op == Op::kInsert ? "ADDED" : op == Op::kUpdate ? "MODIFIED"
                                                           : "DELETED";
  e.kind = o.kind;
  e.cluster = o.cluster;
  e.ns = o.ns;
  e.name = o.name;
  e.seq = op == Op::kDelete ? o.seq : seq;
  e.object = op == Op::kDelete ? o.stored : next.stored;
  std::lock_guard<std::mutex> lock(mu_);
  e.write = log_.size();
  log_.push_back(std::move(e));
  o = std::move(next);
  cv_.notify_all();
  return true;
}

// ---------------------------------------------------------------------------
// FaultWatcher

bool WatchFilter::Matches(const ExpectedEvent& e) const {
  return e.kind == kind && (cluster.empty() || e.cluster == cluster) &&
         (ns.empty() || e.ns == ns);
}

FaultWatcher::FaultWatcher(std::string socket_path, WatchFilter filter,
                           uint64_t start_rv, Policy policy,
                           std::chrono::seconds reconnect_timeout)
    : socket_path_(std::move(socket_path)),
      filter_(std::move(filter)),
      start_rv_(start_rv),
      policy_(policy),
      reconnect_timeout_(reconnect_timeout) {}

FaultWatcher::~FaultWatcher() { Stop(); }

bool FaultWatcher::OpenLocked(WatchClient* client, uint64_t rv,
                              Clock::time_point deadline, std::string* error) {
  auto r = client->Open(socket_path_, WatchTarget(filter_.path, rv),
                        std::min(deadline, In(std::chrono::seconds(10))));
  if (!r) {
    *error = r.message();
    return false;
  }
  if (client->status() != 200) {
    *error = "HTTP " + std::to_string(client->status()) + " " + client->body();
    return false;
  }
  return true;
}

::testing::AssertionResult FaultWatcher::Start() {
  auto deadline = In(std::chrono::seconds(20));
  std::string error;
  for (;;) {
    client_ = std::make_unique<WatchClient>();
    if (OpenLocked(client_.get(), start_rv_, deadline, &error)) break;
    // 504: walwatch has not reached the start RV yet; ask again.
    if (client_->status() != 504 || Clock::now() > deadline) {
      return ::testing::AssertionFailure()
             << "cannot watch " << filter_.path << " from RV " << start_rv_
             << ": " << error;
    }
    ++record_.retries_504;
  }
  thread_ = std::thread([this] { Loop(); });
  return ::testing::AssertionSuccess();
}

void FaultWatcher::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void FaultWatcher::Loop() {
  uint64_t last_rv = start_rv_;
  auto finish = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  };
  while (!stop_.load()) {
    WatchEvent e;
    auto r = client_->Next(&e, In(std::chrono::milliseconds(100)));
    if (r == WatchClient::Result::kTimeout) continue;
    if (r == WatchClient::Result::kEvent) {
      std::lock_guard<std::mutex> lock(mu_);
      if (e.type == "ERROR") {
        record_.error_event = e;
        finished_ = true;
        cv_.notify_all();
        return;
      }
      if (e.type == "BOOKMARK") {
        record_.bookmark_rvs.push_back(e.rv());
        continue;
      }
      last_rv = e.rv();
      record_.events.push_back(std::move(e));
      cv_.notify_all();
      continue;
    }
    std::string how = r == WatchClient::Result::kEnd
                          ? "end"
                          : "error: " + client_->error();
    {
      std::lock_guard<std::mutex> lock(mu_);
      record_.stream_ends.push_back(how);
      if (policy_ == Policy::kStayOpen) {
        record_.problems.push_back("the watch stream ended (" + how +
                                   ") after " +
                                   std::to_string(record_.events.size()) +
                                   " events");
      }
    }
    if (policy_ == Policy::kStayOpen) return finish();
    // Reconnect from the last RV, as a client-go reflector does.
    auto deadline = Clock::now() + reconnect_timeout_;
    std::string error;
    bool open = false;
    while (!stop_.load() && Clock::now() < deadline) {
      auto client = std::make_unique<WatchClient>();
      if (OpenLocked(client.get(), last_rv, deadline, &error)) {
        client_ = std::move(client);
        open = true;
        break;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (client->status() == 504) {
          ++record_.retries_504;
        } else if (client->status() != 0) {
          record_.problems.push_back("reconnect from RV " +
                                     std::to_string(last_rv) + ": " + error);
        } else {
          ++record_.open_failures;
        }
        if (client->status() != 0 && client->status() != 504) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!open) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stop_.load()) {
        record_.problems.push_back("could not reconnect from RV " +
                                   std::to_string(last_rv) + ": " + error);
      }
      finished_ = true;
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++record_.reconnects;
  }
  finish();
}

size_t FaultWatcher::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return record_.events.size();
}

bool FaultWatcher::expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return record_.error_event.has_value();
}

bool FaultWatcher::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

bool FaultWatcher::WaitForEvents(size_t n, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [&] {
    return record_.events.size() >= n || finished_;
  }) && record_.events.size() >= n;
}

bool FaultWatcher::WaitForExpired(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return finished_; });
  return record_.error_event.has_value();
}

FaultWatcher::Record FaultWatcher::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return record_;
}

// ---------------------------------------------------------------------------
// Checking

namespace {

struct Received {
  std::string key;  // type kind cluster/ns/name seq=N
  uint64_t rv;
  nlohmann::json object;  // normalized to the stored form
  std::string problem;    // malformed
};

std::string KeyOf(const std::string& type, const std::string& kind,
                  const std::string& cluster, const std::string& ns,
                  const std::string& name, uint64_t seq) {
  return type + " " + kind + " " + cluster + "/" + ns + "/" + name +
         " seq=" + std::to_string(seq);
}

Received Normalize(const WatchEvent& e) {
  Received r;
  r.rv = e.rv();
  try {
    nlohmann::json o = e.object;
    const auto& md = o.at("metadata");
    std::string cluster =
        md.at("annotations").at(kClusterAnnotationKey).get<std::string>();
    uint64_t seq = o.at("spec").at("seq").get<uint64_t>();
    r.key = KeyOf(e.type, o.at("kind").get<std::string>(), cluster,
                  md.value("namespace", ""), md.at("name").get<std::string>(),
                  seq);
    auto& ann = o["metadata"]["annotations"];
    if (!ann.contains(kMemberRvAnnotationKey)) {
      r.problem = "no " + std::string(kMemberRvAnnotationKey) + " annotation";
    } else {
      o["metadata"]["resourceVersion"] = ann[kMemberRvAnnotationKey];
      ann.erase(kMemberRvAnnotationKey);
    }
    r.object = std::move(o);
  } catch (const std::exception& ex) {
    r.key = "malformed " + e.type;
    r.problem = std::string("malformed event: ") + ex.what() + ": " +
                e.raw.substr(0, 300);
  }
  return r;
}

std::string Window(const std::vector<std::string>& v, size_t at) {
  std::string s;
  size_t from = at >= 3 ? at - 3 : 0;
  for (size_t i = from; i < std::min(v.size(), at + 4); ++i) {
    s += std::string(i == at ? "  >> #" : "     #") + std::to_string(i) +
         " " + v[i] + "\n";
  }
  return s;
}

::testing::AssertionResult Compare(const std::vector<ExpectedEvent>& all,
                                   const FaultWatcher& watcher,
                                   bool prefix_then_410) {
  const auto record = watcher.Snapshot();
  std::vector<const ExpectedEvent*> expected;
  for (const auto& e : all) {
    if (watcher.filter().Matches(e)) expected.push_back(&e);
  }
  std::vector<std::string> want, got;
  for (const auto* e : expected) {
    want.push_back(KeyOf(e->type, e->kind, e->cluster, e->ns, e->name, e->seq));
  }
  std::vector<Received> received;
  for (const auto& e : record.events) {
    received.push_back(Normalize(e));
    got.push_back(received.back().key + " rv=" +
                  std::to_string(received.back().rv));
  }
  std::ostringstream out;
  bool ok = true;
  out << "watch " << watcher.filter().path << " from RV " << watcher.start_rv()
      << ": expected " << want.size()
      << (prefix_then_410 ? " events (or a prefix, then 410)" : " events")
      << ", received " << received.size() << " (reconnects "
      << record.reconnects << ", 504 retries " << record.retries_504
      << ", stream ends [";
  for (const auto& s : record.stream_ends) out << s << "; ";
  out << "])\n";
  for (const auto& p : record.problems) {
    ok = false;
    out << "  problem: " << p << "\n";
  }
  if (prefix_then_410) {
    if (!record.error_event) {
      ok = false;
      out << "  no 410 ERROR event arrived\n";
    } else {
      const auto& obj = record.error_event->object;
      if (obj.value("code", 0) != 410 || obj.value("reason", "") != "Expired") {
        ok = false;
        out << "  the ERROR event is not 410 Expired: "
            << record.error_event->raw << "\n";
      }
    }
  } else if (record.error_event) {
    ok = false;
    out << "  unexpected ERROR event: " << record.error_event->raw << "\n";
  }
  // Lost, duplicated, unexpected, reordered.
  std::map<std::string, size_t> want_index, got_count;
  for (size_t i = 0; i < want.size(); ++i) want_index[want[i]] = i;
  for (const auto& r : received) ++got_count[r.key];
  size_t lost = 0, dup = 0, unexpected = 0, reordered = 0;
  std::string first_lost, first_dup, first_unexpected, first_reordered;
  size_t limit = want.size();
  if (prefix_then_410) limit = std::min(want.size(), received.size());
  for (size_t i = 0; i < limit; ++i) {
    if (!got_count.count(want[i]) && lost++ == 0) first_lost = want[i];
  }
  for (const auto& [k, n] : got_count) {
    if (n > 1 && dup++ == 0) first_dup = k + " x" + std::to_string(n);
    if (!want_index.count(k) && unexpected++ == 0) first_unexpected = k;
  }
  long prev = -1;
  for (const auto& r : received) {
    auto it = want_index.find(r.key);
    if (it == want_index.end()) continue;
    long idx = static_cast<long>(it->second);
    if (idx < prev && reordered++ == 0) first_reordered = r.key;
    prev = std::max(prev, idx);
  }
  if (lost || dup || unexpected || reordered) {
    ok = false;
    out << "  lost " << lost << (lost ? " (first: " + first_lost + ")" : "")
        << ", duplicated " << dup
        << (dup ? " (first: " + first_dup + ")" : "") << ", unexpected "
        << unexpected
        << (unexpected ? " (first: " + first_unexpected + ")" : "")
        << ", out of order " << reordered
        << (reordered ? " (first: " + first_reordered + ")" : "") << "\n";
  }
  if (!prefix_then_410 && received.size() != want.size()) ok = false;
  if (received.size() > want.size()) ok = false;
  // The first position where the sequences differ.
  size_t n = std::min(want.size(), received.size());
  size_t diff = n;
  for (size_t i = 0; i < n; ++i) {
    if (want[i] != received[i].key) {
      diff = i;
      break;
    }
  }
  if (diff < n || (!prefix_then_410 && want.size() != received.size())) {
    ok = false;
    out << "  first difference at event #" << diff << "\n  expected:\n"
        << Window(want, diff) << "  received:\n"
        << Window(got, diff);
  }
  // Objects, RVs.
  size_t wrong_objects = 0, malformed = 0, rv_not_increasing = 0;
  std::string first_wrong, first_rv;
  uint64_t last = watcher.start_rv();
  for (size_t i = 0; i < received.size(); ++i) {
    const auto& r = received[i];
    if (!r.problem.empty() && malformed++ == 0) {
      out << "  event #" << i << ": " << r.problem << "\n";
    }
    if (r.rv <= last && rv_not_increasing++ == 0) {
      first_rv = "event #" + std::to_string(i) + " " + r.key + " rv " +
                 std::to_string(r.rv) + " after " + std::to_string(last);
    }
    last = std::max(last, r.rv);
    if (i < n && want[i] == r.key && r.object != expected[i]->object &&
        wrong_objects++ == 0) {
      first_wrong = "event #" + std::to_string(i) + " " + r.key +
                    "\n    received (normalized): " + r.object.dump() +
                    "\n    stored: " + expected[i]->object.dump();
    }
  }
  if (malformed || wrong_objects || rv_not_increasing) {
    ok = false;
    out << "  malformed " << malformed << ", wrong objects " << wrong_objects
        << (wrong_objects ? " (first: " + first_wrong + ")" : "")
        << ", RVs not increasing " << rv_not_increasing
        << (rv_not_increasing ? " (first: " + first_rv + ")" : "") << "\n";
  }
  for (uint64_t b : record.bookmark_rvs) {
    if (b < watcher.start_rv()) {
      ok = false;
      out << "  bookmark RV " << b << " below the start RV\n";
      break;
    }
  }
  if (ok) return ::testing::AssertionSuccess() << out.str();
  return ::testing::AssertionFailure() << out.str();
}

}  // namespace

::testing::AssertionResult ExactlyOnceInOrder(
    const std::vector<ExpectedEvent>& all, const FaultWatcher& watcher) {
  return Compare(all, watcher, /*prefix_then_410=*/false);
}

::testing::AssertionResult PrefixThenExpired(
    const std::vector<ExpectedEvent>& all, const FaultWatcher& watcher) {
  return Compare(all, watcher, /*prefix_then_410=*/true);
}

// ---------------------------------------------------------------------------
// Helpers

namespace {
uint64_t StatusKb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stoull(line.substr(field.size() + 1)) * 1024;
    }
  }
  return 0;
}
}  // namespace

uint64_t ProcessRssBytes(pid_t pid) { return StatusKb(pid, "VmRSS"); }
uint64_t ProcessPeakRssBytes(pid_t pid) { return StatusKb(pid, "VmHWM"); }

void RssSampler::Start(pid_t pid) {
  Stop();
  running_ = true;
  thread_ = std::thread([this, pid] {
    while (running_) {
      max_ = std::max<uint64_t>(max_, ProcessRssBytes(pid));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

void RssSampler::Stop() {
  if (!thread_.joinable()) return;
  running_ = false;
  thread_.join();
}

size_t HugeTransactionRows() {
  const char* v = std::getenv("WALWATCH_FAULT_HUGE_ROWS");
  return v && *v ? std::stoul(v) : 100000;
}

namespace {

// Whether the servers of this process lack wal2json (the tests run one
// server build at a time): learned from the first marker's slot.
std::atomic<int> markers_use_pgoutput{-1};

uint64_t PgoutputMarker(const std::string& conninfo,
                        const std::string& marker_table) {
  const std::string publication = marker_table + "_publication";
  {
    PgConnection c(conninfo);
    if (c.QueryValue("SELECT count(*) FROM pg_publication WHERE pubname = $1",
                     {publication}) == "0") {
      c.Exec("CREATE PUBLICATION " + publication + " FOR TABLE " +
             marker_table);
    }
  }
  return PgoutputMarkerCommitLsn(conninfo, marker_table, publication);
}

}  // namespace

uint64_t MarkerCommitLsn(const std::string& conninfo,
                         const std::string& marker_table) {
  if (markers_use_pgoutput.load() == -1) {
    const char* plugin = std::getenv("WALWATCH_TEST_OBSERVER_PLUGIN");
    if (plugin && std::string(plugin) == "pgoutput") markers_use_pgoutput = 1;
  }
  if (markers_use_pgoutput.load() == 1) {
    return PgoutputMarker(conninfo, marker_table);
  }
  static std::atomic<int> counter{0};
  std::string slot = "fault_marker_" + std::to_string(getpid()) + "_" +
                     std::to_string(counter++);
  PgConnection c(conninfo);
  try {
    c.Query("SELECT pg_create_logical_replication_slot($1, 'wal2json', true)",
            {slot});
    markers_use_pgoutput = 0;
  } catch (const PgError& e) {
    // "could not access file "wal2json": No such file or directory"
    if (markers_use_pgoutput.load() == 0 ||
        std::string(e.what()).find("\"wal2json\"") == std::string::npos) {
      throw;
    }
    markers_use_pgoutput = 1;
    return PgoutputMarker(conninfo, marker_table);
  }
  std::string xid = c.QueryValue("INSERT INTO " + marker_table +
                                 " DEFAULT VALUES RETURNING "
                                 "pg_current_xact_id()::text");
  uint32_t low = static_cast<uint32_t>(std::stoull(xid));
  auto rows = c.Query(
      "SELECT data FROM pg_logical_slot_get_changes($1, NULL, NULL, "
      "'format-version', '2', 'include-xids', '1', 'include-lsn', '1', "
      "'add-tables', 'public.resources')",
      {slot});
  for (const auto& row : rows) {
    if (!row[0]) continue;
    auto change = nlohmann::json::parse(*row[0]);
    if (change.value("action", "") == "C" && change.value("xid", 0u) == low) {
      return ParseLsn(change.at("lsn").get<std::string>());
    }
  }
  throw PgError("MarkerCommitLsn: the commit of transaction " + xid +
                " was not decoded");
}

std::optional<uint64_t> PgoutputCommitLsn(const std::string& bytea_text) {
  // \x, then 43 (C), flags (1 byte), the commit LSN (8 bytes, big-endian).
  if (bytea_text.size() < 2 + 2 * 10 ||
      bytea_text.compare(0, 4, "\\x43") != 0) {
    return std::nullopt;
  }
  return std::stoull(bytea_text.substr(2 + 2 * 2, 16), nullptr, 16);
}

uint64_t PgoutputMarkerCommitLsn(const std::string& conninfo,
                                 const std::string& marker_table,
                                 const std::string& publication) {
  static std::atomic<int> counter{0};
  std::string slot = "fault_marker_" + std::to_string(getpid()) + "_" +
                     std::to_string(counter++);
  PgConnection c(conninfo);
  c.Query("SELECT pg_create_logical_replication_slot($1, 'pgoutput', true)",
          {slot});
  std::string xid = c.QueryValue("INSERT INTO " + marker_table +
                                 " DEFAULT VALUES RETURNING "
                                 "pg_current_xact_id()::text");
  auto rows = c.Query(
      "SELECT xid::text, data FROM pg_logical_slot_get_binary_changes($1, "
      "NULL, NULL, 'proto_version', '1', 'publication_names', $2)",
      {slot, publication});
  for (const auto& row : rows) {
    if (!row[0] || !row[1]) continue;
    // xid is the 32-bit one; pg_current_xact_id() carries the epoch.
    if (std::stoull(*row[0]) != (std::stoull(xid) & 0xFFFFFFFFu)) continue;
    if (auto lsn = PgoutputCommitLsn(*row[1])) return *lsn;
  }
  throw PgError("PgoutputMarkerCommitLsn: the commit of transaction " + xid +
                " was not decoded (does publication " + publication +
                " publish " + marker_table + "?)");
}

}  // namespace walwatch::itest
