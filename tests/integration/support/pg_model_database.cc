#include "tests/integration/support/pg_model_database.h"

#include <stdexcept>

namespace walwatch::itest {

void PgModelSql::Insert(const ModelObjectSpec& spec) {
  last_xid_ = InsertModelRow(conn_, spec);
}

void PgModelSql::Update(const ModelObjectSpec& spec) {
  last_xid_ = UpdateModelRow(conn_, spec);
}

void PgModelSql::Delete(const Resource& r) { last_xid_ = DeleteRow(conn_, r); }

void PgModelSql::RecordKubeEvent(const Resource& r, const std::string& reason) {
  last_xid_ = itest::RecordKubeEvent(conn_, r, reason);
}

size_t PgModelSql::RemoveCluster(const std::string& cluster,
                                 const ModelResource* resource) {
  auto rows =
      resource == nullptr
          ? conn_.Query(
                "DELETE FROM resources WHERE cluster = $1 "
                "RETURNING pg_current_xact_id()::text",
                {cluster})
          : conn_.Query(
                "DELETE FROM resources WHERE cluster = $1 AND \"group\" = $2 "
                "AND version = $3 AND resource = $4 "
                "RETURNING pg_current_xact_id()::text",
                {cluster, resource->group, resource->version,
                 resource->resource});
  if (!rows.empty() && rows[0][0]) last_xid_ = std::stoull(*rows[0][0]);
  return rows.size();
}

uint64_t PgModelSql::LastCommitRv() {
  if (last_xid_ == 0) throw std::runtime_error("LastCommitRv: no write yet");
  if (!commit_lsn_) {
    throw std::runtime_error("LastCommitRv: this connection has no observer");
  }
  return commit_lsn_(last_xid_);
}

std::optional<ModelSql::Row> PgModelSql::Find(const Resource& r) {
  auto rows = conn_.Query(
      "SELECT uid, object::text FROM resources WHERE cluster = $1 AND "
      "\"group\" = $2 AND version = $3 AND resource = $4 AND "
      "namespace = $5 AND name = $6",
      {r.cluster, r.group, r.version, r.resource, r.ns, r.name});
  if (rows.empty() || !rows[0][0] || !rows[0][1]) return std::nullopt;
  return Row{*rows[0][0], *rows[0][1]};
}

ModelState PgModelSql::State(const ModelFilter& filter) {
  return QueryModelState(conn_, filter);
}

::testing::AssertionResult PgModelSql::ListWithHandoff(
    const std::string& socket_path, const ModelFilter& filter, ListedState* out,
    Clock::time_point deadline) {
  return itest::ListWithHandoff(conn_, socket_path, filter, out, deadline);
}

}  // namespace walwatch::itest
