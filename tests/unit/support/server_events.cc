#include "tests/unit/support/server_events.h"

#include <chrono>
#include <cstring>
#include <string_view>

#include "cdc/base/logging.h"
#include "tests/support/metric_value.h"

namespace walwatch::server_test {

EventPtr MakeEvent(const EventSpec& spec, uint64_t rv, uint64_t commit_lsn,
                   bool last_in_txn, const Event* prev, WireArena* arena) {
  std::string api_version =
      spec.group.empty() ? spec.version : spec.group + "/" + spec.version;
  std::string w = "{\"type\":";
  AppendJsonString(&w, EventTypeName(spec.type));
  w += ",\"object\":{\"apiVersion\":";
  AppendJsonString(&w, api_version);
  w += ",\"kind\":";
  AppendJsonString(&w, spec.kind);
  w += ",\"metadata\":{\"name\":";
  AppendJsonString(&w, spec.name);
  if (!spec.ns.empty()) {
    w += ",\"namespace\":";
    AppendJsonString(&w, spec.ns);
  }
  w += ",\"resourceVersion\":\"" + std::to_string(rv) + "\"";
  w += ",\"annotations\":{\"shadow.clusterpedia.io/cluster-name\":";
  AppendJsonString(&w, spec.cluster);
  if (!spec.padding.empty()) {
    w += ",\"walwatch.test/padding\":";
    AppendJsonString(&w, spec.padding);
  }
  w += "}}}}\n";
  Event::Strings strings;
  strings.group = spec.group;
  strings.version = spec.version;
  strings.resource = spec.resource;
  strings.kind = spec.kind;
  strings.cluster = spec.cluster;
  strings.ns = spec.ns;
  strings.name = spec.name;
  strings.labels = &spec.labels;
  LabelList prev_labels;
  if (prev != nullptr) {
    prev_labels = prev->labels().ToList();
    strings.prev_labels = &prev_labels;
  }
  MutableEventPtr event;
  if (arena == nullptr) {
    event = Event::Make(strings, w, prev ? prev->wire() : "");
  } else {
    FilterFields::Values values{spec.group,  spec.version, spec.resource,
                                spec.kind,   spec.cluster, spec.ns,
                                &spec.labels};
    FilterFieldsPtr fields = FilterFields::Make(values);
    FilterFieldsPtr prev_fields;
    if (prev != nullptr) {
      values.labels = &prev_labels;
      prev_fields = FilterFields::Make(values);
    }
    const std::string_view prev_wire = prev ? prev->wire() : "";
    event = Event::Allocate(std::move(fields), std::move(prev_fields),
                            spec.name, w.size(), prev_wire.size(), arena);
    std::memcpy(event->mutable_wire(), w.data(), w.size());
    if (!prev_wire.empty()) {
      std::memcpy(event->mutable_prev_wire(), prev_wire.data(),
                  prev_wire.size());
    }
  }
  event->rv = rv;
  event->commit_lsn = commit_lsn;
  event->last_in_txn = last_in_txn;
  event->type = spec.type;
  event->commit_time_us =
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  return event;
}

std::string Line(const EventPtr& event) {
  std::string_view wire = event->wire();
  return std::string(wire.substr(0, wire.size() - 1));
}

EventPtr StateEvent(EventSpec spec, uint64_t state_rv) {
  spec.type = EventType::kAdded;
  return MakeEvent(spec, state_rv, state_rv, /*last_in_txn=*/true);
}

EventPtr StatePod(const std::string& name, uint64_t state_rv) {
  EventSpec spec;
  spec.name = name;
  return StateEvent(spec, state_rv);
}

std::string BookmarkLine(uint64_t rv, const std::string& kind,
                         const std::string& api_version,
                         bool initial_events_end) {
  std::string line = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"" + kind +
                     "\",\"apiVersion\":\"" + api_version +
                     "\",\"metadata\":{\"resourceVersion\":\"" +
                     std::to_string(rv) + "\"";
  if (initial_events_end) {
    line += ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}";
  }
  return line + "}}}";
}

Parsed ParseLine(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  Parsed p;
  if (j.is_discarded()) return p;
  p.type = j.value("type", "");
  p.object = j["object"];
  const nlohmann::json& metadata = p.object["metadata"];
  if (metadata.contains("name")) p.name = metadata["name"];
  if (metadata.contains("resourceVersion")) {
    p.rv = std::stoull(metadata["resourceVersion"].get<std::string>());
  }
  return p;
}

std::optional<std::vector<std::string>> DecodeChunks(std::string_view body) {
  std::vector<std::string> chunks;
  while (true) {
    const size_t eol = body.find("\r\n");
    if (eol == std::string_view::npos || eol == 0 || eol > 15) {
      return std::nullopt;
    }
    size_t size = 0;
    for (char c : body.substr(0, eol)) {
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0) return std::nullopt;
      size = size * 16 + static_cast<size_t>(digit);
    }
    body.remove_prefix(eol + 2);
    if (size == 0) {
      if (body != "\r\n") return std::nullopt;
      return chunks;
    }
    if (body.size() < size + 2 || body.substr(size, 2) != "\r\n") {
      return std::nullopt;
    }
    chunks.emplace_back(body.substr(0, size));
    body.remove_prefix(size + 2);
  }
}

double Sample(const std::string& scrape, const std::string& name_and_labels) {
  return test_support::MetricValue(scrape, name_and_labels).value_or(-1);
}

double Terminated(const std::string& scrape, const std::string& reason) {
  return Sample(
      scrape, "walwatch_watchers_terminated_total{reason=\"" + reason + "\"}");
}

}  // namespace walwatch::server_test
