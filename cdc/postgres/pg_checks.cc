#include "cdc/postgres/pg_checks.h"

#include "cdc/base/text.h"
#include "cdc/model/resource_catalog.h"
#include "cdc/postgres/lsn.h"
#include "cdc/postgres/pg_conn.h"

namespace walwatch {

bool IsClientTlsError(const std::string& e) {
  return Contains(e, "certificate") || Contains(e, "private key") ||
         (Contains(e, "SSL error") && Contains(e, "alert"));
}

std::string ExplainPgError(const std::string& e) {
  if (Contains(e, "password authentication failed") ||
      Contains(e, "no password supplied")) {
    return e + " (fix: correct the password in --conninfo, PGPASSWORD or "
               "~/.pgpass)";
  }
  if (Contains(e, "may not be used as an output plugin")) {
    return e + " (fix: add wal2json to output_plugin_libraries in "
               "postgresql.conf, e.g. output_plugin_libraries = 'pgoutput, "
               "test_decoding, wal2json', then reload PostgreSQL)";
  }
  if (Contains(e, "wal2json") &&
      (Contains(e, "could not access file") || Contains(e, "No such file"))) {
    return e + " (fix: install the wal2json output plugin on the PostgreSQL "
               "server, e.g. apt-get install postgresql-15-wal2json)";
  }
  if (Contains(e, "logical decoding requires wal_level") ||
      Contains(e, "wal_level >= logical")) {
    return e + " (fix: set wal_level = logical in postgresql.conf and "
               "restart PostgreSQL)";
  }
  if (Contains(e, "has been invalidated")) {
    return e + " (the slot fell behind max_slot_wal_keep_size; walwatch "
               "recreates it and watchers must relist)";
  }
  if (Contains(e, "must be superuser or replication role") ||
      Contains(e, "permission denied to start WAL sender") ||
      Contains(e, "must have REPLICATION") ||
      Contains(e, "permission denied to use replication slots")) {
    return e + " (fix: ALTER ROLE <user> REPLICATION, see schema/roles.sql)";
  }
  if (Contains(e, "no pg_hba.conf entry for replication")) {
    return e + " (fix: allow replication connections for this user in "
               "pg_hba.conf: host replication <user> <addr> scram-sha-256)";
  }
  // TLS (sslmode, sslcert, sslkey, sslrootcert in --conninfo). libpq's
  // own checks first, then the server's answers.
  if (Contains(e, "private key file")) {
    return e +
           " (fix: sslkey in --conninfo the private key of sslcert, a "
           "file walwatch's user can read, mode 0600, or 0640 if root "
           "owns it)";
  }
  if (Contains(e, "root certificate file")) {
    return e +
           " (fix: sslrootcert in --conninfo the CA certificate that "
           "signed the server's, a file walwatch's user can read)";
  }
  if (Contains(e, "certificate file")) {
    return e +
           " (fix: sslcert in --conninfo a PEM certificate file "
           "walwatch's user can read)";
  }
  if (Contains(e, "requires a valid client certificate")) {
    return e +
           " (fix: sslcert and sslkey in --conninfo, a client "
           "certificate signed by a CA in the server's ssl_ca_file, with "
           "the user's name as its CN, and its key; a missing sslcert file "
           "is skipped by libpq as if none were named)";
  }
  if (Contains(e, "certificate authentication failed")) {
    return e +
           " (fix: the client certificate's CN must be the user in "
           "--conninfo, or pg_ident.conf must map it to that user)";
  }
  if (Contains(e, "SSL error") && Contains(e, "alert")) {
    return e +
           " (the server refused walwatch's client certificate; fix: "
           "sslcert in --conninfo a certificate signed by a CA in the "
           "server's ssl_ca_file, valid now, and sslkey its key)";
  }
  if (Contains(e, "certificate verify failed")) {
    return e +
           " (fix: sslrootcert in --conninfo the CA certificate that "
           "signed the server's)";
  }
  if (Contains(e, "server certificate for") &&
      Contains(e, "does not match host name")) {
    return e +
           " (fix: host in --conninfo a name the server's certificate "
           "carries, or that name in its subjectAltName)";
  }
  if (Contains(e, "all replication slots are in use")) {
    return e + " (fix: raise max_replication_slots, or drop orphaned slots)";
  }
  if (Contains(e, "number of requested standby connections exceeds")) {
    return e + " (fix: raise max_wal_senders)";
  }
  return e;
}

namespace {

// `text` between two `quote`s, each `quote` in it doubled.
std::string Quote(const std::string& text, char quote) {
  std::string q(1, quote);
  for (char c : text) {
    if (c == quote) q += quote;
    q += c;
  }
  return q + quote;
}

}  // namespace

std::string QuoteIdent(const std::string& name) { return Quote(name, '"'); }

std::string QuoteLiteral(const std::string& text) {
  return Quote(text, '\'');
}

std::string CheckDatabase(PGconn* conn, const TableMapping& mapping,
                          const StopSignal* stop) {
  std::string err;
  PgResult r = PgQuery(conn, "SELECT current_setting('wal_level')", {}, &err, stop);
  if (!r) return "cannot read wal_level: " + err;
  std::string wal_level = PQgetvalue(r.get(), 0, 0);
  if (wal_level != "logical") {
    return "wal_level is " + wal_level +
           ", walwatch needs logical (fix: set wal_level = logical in "
           "postgresql.conf and restart PostgreSQL)";
  }
  const std::string table = mapping.QualifiedTable();
  r = PgQuery(conn,
              "SELECT c.oid, c.relreplident FROM pg_class c JOIN pg_namespace "
              "n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND "
              "c.relname = $2 AND c.relkind IN ('r', 'p')",
              {mapping.schema, mapping.table}, &err, stop);
  if (!r) return "cannot look up table " + table + ": " + err;
  if (PQntuples(r.get()) == 0) {
    return "table " + table +
           " does not exist (fix: create it with schema/clusterpedia.sql, "
           "or point --mapping at the table to watch)";
  }
  std::string oid = PQgetvalue(r.get(), 0, 0);
  std::string identity = PQgetvalue(r.get(), 0, 1);
  if (identity != "f") {
    const char* name = identity == "d" ? "DEFAULT"
                       : identity == "n" ? "NOTHING"
                                         : "USING INDEX";
    return "table " + table + " has REPLICA IDENTITY " + name +
           ", walwatch needs FULL to see old rows (fix: ALTER TABLE " +
           QuoteIdent(mapping.schema) + "." + QuoteIdent(mapping.table) +
           " REPLICA IDENTITY FULL; see schema/replica_identity.sql)";
  }
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    const std::string& col = mapping.columns[i];
    r = PgQuery(conn,
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = $1::oid AND attname = $2 AND attnum > 0 "
                "AND NOT attisdropped",
                {oid, col}, &err, stop);
    if (!r) return "cannot read the columns of " + table + ": " + err;
    if (PQntuples(r.get()) == 0) {
      return "table " + table + " has no column \"" + col +
             "\" (mapped as " + kMappedFieldNames[i] +
             "; fix: correct the table mapping)";
    }
    std::string type = PQgetvalue(r.get(), 0, 0);
    if (static_cast<MappedField>(i) == MappedField::kObject &&
        type != "jsonb" && type != "json") {
      return "column \"" + col + "\" of " + table + " is " + type +
             ", the object column must be json or jsonb (fix: correct the "
             "table mapping)";
    }
  }
  r = PgQuery(conn, "SELECT has_table_privilege($1::oid, 'SELECT')", {oid},
              &err, stop);
  if (r && std::string(PQgetvalue(r.get(), 0, 0)) != "t") {
    return "the connecting role may not SELECT from " + table +
           " (fix: GRANT SELECT ON " + table + " TO <role>; see "
           "schema/roles.sql)";
  }
  return "";
}

std::string ReadSlot(PGconn* conn, const std::string& slot,
                     const SlotSpec& spec, SlotState* out,
                     const StopSignal* stop) {
  std::string err;
  const bool has_failover = PQserverVersion(conn) >= 170000;
  PgResult r = PgQuery(
      conn,
      std::string("SELECT coalesce(plugin, ''), coalesce(database::text, ''), "
                  "coalesce(confirmed_flush_lsn::text, ''), "
                  "coalesce(wal_status, ''), current_database(), ") +
          (has_failover ? "failover, synced" : "false, false") +
          " FROM pg_replication_slots WHERE slot_name = $1",
      {slot}, &err, stop);
  if (!r) return "cannot read replication slot " + slot + ": " + err;
  *out = SlotState();
  if (PQntuples(r.get()) == 0) return "";
  out->exists = true;
  out->plugin = PQgetvalue(r.get(), 0, 0);
  out->database = PQgetvalue(r.get(), 0, 1);
  std::string cf = PQgetvalue(r.get(), 0, 2);
  out->wal_status = PQgetvalue(r.get(), 0, 3);
  std::string current_db = PQgetvalue(r.get(), 0, 4);
  out->failover = std::string_view(PQgetvalue(r.get(), 0, 5)) == "t";
  out->synced = std::string_view(PQgetvalue(r.get(), 0, 6)) == "t";
  if (out->plugin != spec.plugin) {
    return "replication slot " + slot + " uses plugin \"" + out->plugin +
           "\", not " + spec.plugin +
           " (fix: choose another --slot, give --plugin " + out->plugin +
           ", or drop the slot)";
  }
  if (out->database != current_db) {
    return "replication slot " + slot + " belongs to database \"" +
           out->database + "\", not \"" + current_db +
           "\" (fix: choose another --slot)";
  }
  if (!cf.empty()) {
    auto lsn = ParseLsn(cf);
    if (!lsn) return "replication slot " + slot + " has a bad LSN " + cf;
    out->confirmed_flush = *lsn;
  }
  return "";
}

std::string CreateSlot(PGconn* conn, const std::string& slot,
                       const SlotSpec& spec, const StopSignal* stop) {
  if (spec.failover && PQserverVersion(conn) < 170000) {
    return "cannot create replication slot " + slot +
           " as a failover slot: the server is older than PostgreSQL 17 "
           "(fix: leave out --slot-failover)";
  }
  std::string err;
  PgResult r =
      spec.failover
          ? PgQuery(conn,
                    "SELECT pg_create_logical_replication_slot($1, $2, "
                    "false, false, true)",
                    {slot, spec.plugin}, &err, stop)
          : PgQuery(conn, "SELECT pg_create_logical_replication_slot($1, $2)",
                    {slot, spec.plugin}, &err, stop);
  if (!r) return "cannot create replication slot " + slot + ": " + ExplainPgError(err);
  return "";
}

std::string EnsurePublication(PGconn* conn, const std::string& publication,
                              const TableMapping& m, const StopSignal* stop) {
  std::string err;
  PgResult r = PgQuery(
      conn,
      "SELECT p.pubinsert AND p.pubupdate AND p.pubdelete AND p.pubtruncate, "
      "EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = "
      "p.pubname AND t.schemaname = $2 AND t.tablename = $3) "
      "FROM pg_publication p WHERE p.pubname = $1",
      {publication, m.schema, m.table}, &err, stop);
  if (!r) return "cannot read publication " + publication + ": " + err;
  const std::string table = QuoteIdent(m.schema) + "." + QuoteIdent(m.table);
  const std::string fix = " (fix: CREATE PUBLICATION " +
                          QuoteIdent(publication) + " FOR TABLE " + table +
                          " on the primary, as schema/publication.sql does)";
  if (PQntuples(r.get()) == 1) {
    if (std::string_view(PQgetvalue(r.get(), 0, 1)) != "t") {
      return "publication " + publication + " does not publish " + table +
             " (fix: ALTER PUBLICATION " + QuoteIdent(publication) +
             " ADD TABLE " + table + ")";
    }
    if (std::string_view(PQgetvalue(r.get(), 0, 0)) != "t") {
      return "publication " + publication +
             " leaves out some of insert, update, delete and truncate (fix: "
             "ALTER PUBLICATION " + QuoteIdent(publication) +
             " SET (publish = 'insert, update, delete, truncate'))";
    }
    return "";
  }
  r = PgQuery(conn, "SELECT pg_is_in_recovery()", {}, &err, stop);
  if (r && std::string_view(PQgetvalue(r.get(), 0, 0)) == "t") {
    return "publication " + publication +
           " does not exist, and this server is a standby" + fix;
  }
  r = PgQuery(conn,
              "CREATE PUBLICATION " + QuoteIdent(publication) +
                  " FOR TABLE " + table,
              {}, &err, stop);
  if (!r) {
    return "publication " + publication + " does not exist, and walwatch "
           "cannot create it: " + err + fix;
  }
  return "";
}

std::string DropSlot(PGconn* conn, const std::string& slot,
                     const StopSignal* stop) {
  std::string err;
  PgResult r = PgQuery(conn, "SELECT pg_drop_replication_slot($1)", {slot},
                       &err, stop);
  if (!r) return "cannot drop replication slot " + slot + ": " + err;
  return "";
}

// The table's resources, read from the index rather than the heap:
// Clusterpedia's indexes lead with ("group", "version", "resource"), so a
// recursive query that asks for the next triple above the last one reads
// one index entry per resource (a loose index scan, which PostgreSQL's
// planner does not do by itself for a DISTINCT), and one more per resource
// for its kind. A DISTINCT over every row took 0.2 s for 400,000 warm rows,
// and seconds for millions on a cold cache; this took 1-5 ms. A resource has
// one kind.
std::string LoadCatalog(PGconn* conn, const TableMapping& m,
                        ResourceCatalog* catalog, const StopSignal* stop) {
  const std::string table = QuoteIdent(m.schema) + "." + QuoteIdent(m.table);
  const std::string g = QuoteIdent(m.column(MappedField::kGroup));
  const std::string v = QuoteIdent(m.column(MappedField::kVersion));
  const std::string r = QuoteIdent(m.column(MappedField::kResource));
  const std::string kind = QuoteIdent(m.column(MappedField::kKind));
  std::string err;
  // The loose index scan needs a btree index that leads with the three
  // columns, and no NULL in them; else (a table of one's own --mapping) it
  // would scan the table once per resource, or stop at a NULL.
  PgResult fit = PgQuery(
      conn,
      "WITH a AS (SELECT attname, attnum, attnotnull FROM pg_attribute WHERE "
      "attrelid = $1::regclass AND attname IN ($2, $3, $4) AND attnum > 0 "
      "AND NOT attisdropped) "
      "SELECT (SELECT count(*) FROM a WHERE attnotnull) = 3 AND EXISTS ("
      "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
      "JOIN pg_am am ON am.oid = c.relam WHERE i.indrelid = $1::regclass "
      "AND am.amname = 'btree' AND i.indpred IS NULL "
      "AND i.indkey[0] = (SELECT attnum FROM a WHERE attname = $2) "
      "AND i.indkey[1] = (SELECT attnum FROM a WHERE attname = $3) "
      "AND i.indkey[2] = (SELECT attnum FROM a WHERE attname = $4))",
      {table, m.column(MappedField::kGroup), m.column(MappedField::kVersion),
       m.column(MappedField::kResource)},
      &err, stop);
  if (!fit) {
    return "cannot read the columns of " + m.QualifiedTable() + ": " + err;
  }
  std::string sql;
  if (std::string(PQgetvalue(fit.get(), 0, 0)) == "t") {
    const std::string gvr = g + ", " + v + ", " + r;
    sql = "WITH RECURSIVE d AS ((SELECT " + gvr + " FROM " + table +
          " ORDER BY " + gvr +
          " LIMIT 1) UNION ALL SELECT n.* FROM d, "
          "LATERAL (SELECT " +
          gvr + " FROM " + table + " AS t WHERE (t." + g + ", t." + v + ", t." +
          r + ") > (d." + g + ", d." + v + ", d." + r + ") ORDER BY " + gvr +
          " LIMIT 1) AS n) SELECT d." + g + ", d." + v + ", d." + r +
          ", (SELECT k." + kind + " FROM " + table + " AS k WHERE k." + g +
          " = d." + g + " AND k." + v + " = d." + v + " AND k." + r + " = d." +
          r + " LIMIT 1) FROM d";
  } else {
    sql = "SELECT DISTINCT " + g + ", " + v + ", " + r + ", " + kind +
          " FROM " + table;
  }
  PgResult rows = PgQuery(conn, sql, {}, &err, stop);
  if (!rows) {
    return "cannot list the resources in " + m.QualifiedTable() + ": " + err;
  }
  for (int i = 0; i < PQntuples(rows.get()); ++i) {
    catalog->Add({PQgetvalue(rows.get(), i, 0), PQgetvalue(rows.get(), i, 1),
                  PQgetvalue(rows.get(), i, 2)},
                 PQgetvalue(rows.get(), i, 3));
  }
  return "";
}

}  // namespace walwatch
