#include "tests/integration/support/wal_witness.h"

#include <chrono>
#include <utility>

#include <nlohmann/json.hpp>

namespace walwatch::itest {
namespace {

// Records per read: a few MB of wal2json at most, so that one read neither
// holds the test's memory nor the slot's decoding for long.
constexpr size_t kRecordsPerPoll = 2000;

// The columns walwatch maps (schema/clusterpedia-resources.mapping.json):
// an UPDATE that changes none of them gives no event.
const char* const kMappedColumns[] = {"group",   "version",   "resource",
                                      "kind",    "cluster",   "namespace",
                                      "name",    "uid",       "object"};

// name -> value of a wal2json v2 tuple ("columns" or "identity").
std::map<std::string, nlohmann::json> Tuple(const nlohmann::json& change,
                                            const char* member) {
  std::map<std::string, nlohmann::json> out;
  auto it = change.find(member);
  if (it == change.end() || !it->is_array()) return out;
  for (const auto& col : *it) {
    out[col.at("name").get<std::string>()] = col.value("value", nlohmann::json());
  }
  return out;
}

std::string KeyOf(const std::map<std::string, nlohmann::json>& row) {
  auto text = [&](const char* name) {
    auto it = row.find(name);
    return it != row.end() && it->second.is_string() ? it->second.get<std::string>()
                                                      : std::string();
  };
  return text("resource") + "|" + text("cluster");
}

}  // namespace

WalWitness::WalWitness(const std::string& conninfo, const std::string& slot)
    : conn_(conninfo), observer_(&conn_, slot) {
  observer_.SetRecordHandler([this](const std::string& r) { Record(r); });
  thread_ = std::thread([this] { Loop(); });
}

WalWitness::~WalWitness() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void WalWitness::Loop() {
  while (!stop_) {
    size_t n = 0;
    try {
      n = observer_.Poll(kRecordsPerPoll);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = e.what();
      return;
    }
    if (n < kRecordsPerPoll) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

void WalWitness::CatchUp() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty()) throw PgError("WalWitness: reading the slot failed: " + error_);
  }
  // Each read decodes up to the WAL's end at its start; a read that
  // returns fewer records than asked reached it.
  while (observer_.Poll(kRecordsPerPoll) >= kRecordsPerPoll) {
  }
}

void WalWitness::Record(const std::string& record) {
  auto change = nlohmann::json::parse(record);
  const std::string action = change.value("action", "");
  if (action == "B") {
    open_.clear();
    open_gave_events_ = false;
    return;
  }
  if (action == "C") {
    if (!open_gave_events_) return;
    const uint64_t lsn = ParseLsn(change.at("lsn").get<std::string>());
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& key : open_) commits_[key].insert(lsn);
    ++transactions_;
    return;
  }
  if (action != "I" && action != "U" && action != "D") return;
  if (change.value("table", "") != "resources") return;
  auto columns = Tuple(change, "columns");
  auto identity = Tuple(change, "identity");
  if (action == "U") {
    bool changed = false;
    for (const char* name : kMappedColumns) {
      auto now = columns.find(name);
      if (now == columns.end()) continue;  // TOAST-omitted: unchanged
      auto before = identity.find(name);
      if (before == identity.end() || before->second != now->second) changed = true;
    }
    if (!changed) return;
  }
  if (!columns.empty()) open_.insert(KeyOf(columns));
  if (!identity.empty()) open_.insert(KeyOf(identity));
  open_gave_events_ = true;
}

bool WalWitness::Witnessed(const std::string& resource, const std::string& cluster,
                           uint64_t r, uint64_t f) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string prefix = resource + "|";
  for (auto it = commits_.lower_bound(prefix);
       it != commits_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    if (!cluster.empty() && it->first != prefix + cluster) continue;
    auto c = it->second.upper_bound(r);
    if (c != it->second.end() && *c <= f) return true;
  }
  return false;
}

size_t WalWitness::transactions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return transactions_;
}

}  // namespace walwatch::itest
