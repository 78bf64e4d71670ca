#include "cdc/postgres/slots_cli.h"

#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <iostream>
#include <string>
#include <vector>

#include "cdc/base/cli_args.h"
#include "cdc/base/text.h"
#include "cdc/postgres/pg_checks.h"
#include "cdc/postgres/pg_conn.h"

namespace walwatch {

namespace {

constexpr const char kUsage[] =
    "usage: walwatch slots list [--conninfo C] [--prefix P]\n"
    "       walwatch slots drop --inactive-for DURATION [--prefix P] "
    "[--dry-run] [--conninfo C]\n"
    "  --prefix defaults to \"walwatch\"; --conninfo to $WALWATCH_CONNINFO or "
    "the PG* variables.\n";

struct SlotRow {
  std::string name, plugin, database, wal_status;
  bool active = false;
  long long retained = -1;
  double idle_seconds = -1;  // -1: unknown
};

std::string Human(long long bytes) {
  if (bytes < 0) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream s;
  s << std::fixed << std::setprecision(u ? 1 : 0) << v << units[u];
  return s.str();
}

std::string HumanDuration(double seconds) {
  if (seconds < 0) return "unknown";
  long long s = static_cast<long long>(seconds);
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  if (s < 172800) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string ReadSlots(PGconn* conn, const std::string& prefix,
                      std::vector<SlotRow>* rows, bool* idle_known) {
  std::string err;
  PgResult v = PgQuery(conn, "SELECT current_setting('server_version_num')::int",
                       {}, &err);
  if (!v) return err;
  bool pg17 = std::atoi(PQgetvalue(v.get(), 0, 0)) >= 170000;
  // LIKE with the prefix escaped.
  std::string like;
  for (char c : prefix) {
    if (c == '%' || c == '_' || c == '\\') like += '\\';
    like += c;
  }
  like += '%';
  std::string idle =
      pg17 ? "extract(epoch FROM now() - s.inactive_since)"
           : "(SELECT extract(epoch FROM now() - w.modification) FROM "
             "pg_ls_waldir() w WHERE w.name = "
             "pg_walfile_name(s.confirmed_flush_lsn))";
  std::string base =
      "SELECT s.slot_name, coalesce(s.plugin, ''), coalesce(s.database::text, "
      "''), s.active, coalesce(s.wal_status, ''), "
      "coalesce((pg_current_wal_lsn() - s.restart_lsn)::bigint, -1), ";
  std::string tail =
      " FROM pg_replication_slots s WHERE s.slot_type = 'logical' AND "
      "s.slot_name LIKE $1 ORDER BY s.slot_name";
  PgResult r = PgQuery(conn, base + "coalesce(" + idle + ", -1)" + tail,
                       {like}, &err);
  *idle_known = true;
  if (!r && !pg17 && err.find("permission denied") != std::string::npos) {
    // pg_ls_waldir() needs pg_monitor: list without the idle time.
    *idle_known = false;
    r = PgQuery(conn, base + "-1" + tail, {like}, &err);
  }
  if (!r) return err;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    SlotRow row;
    row.name = PQgetvalue(r.get(), i, 0);
    row.plugin = PQgetvalue(r.get(), i, 1);
    row.database = PQgetvalue(r.get(), i, 2);
    row.active = std::string(PQgetvalue(r.get(), i, 3)) == "t";
    row.wal_status = PQgetvalue(r.get(), i, 4);
    row.retained = std::atoll(PQgetvalue(r.get(), i, 5));
    row.idle_seconds = std::atof(PQgetvalue(r.get(), i, 6));
    if (row.active) row.idle_seconds = 0;
    rows->push_back(row);
  }
  return "";
}

}  // namespace

int RunSlotsCli(int argc, const char* const* argv, std::ostream& out,
                std::ostream& err) {
  if (argc < 2) {
    err << kUsage;
    return 2;
  }
  std::string command = argv[1];
  if (command == "-h" || command == "--help") {
    out << kUsage;
    return 0;
  }
  const char* env = std::getenv("WALWATCH_CONNINFO");
  std::string conninfo = env ? env : "";
  std::string prefix = "walwatch", inactive_text;
  bool dry_run = false;
  for (ArgCursor a(argc, argv, 2); !a.Done(); a.Next()) {
    bool ok = true;
    if (a.Is("--conninfo")) {
      ok = a.Value(&conninfo);
    } else if (a.Is("--prefix")) {
      ok = a.Value(&prefix);
    } else if (a.Is("--inactive-for")) {
      ok = a.Value(&inactive_text);
    } else if (a.arg() == "--dry-run") {
      dry_run = true;
    } else if (a.arg() == "-h" || a.arg() == "--help") {
      out << kUsage;
      return 0;
    } else {
      err << "walwatch slots: unexpected argument \"" << a.arg() << "\"\n"
          << kUsage;
      return 2;
    }
    if (!ok) {
      err << "walwatch slots: " << a.arg() << " needs a value\n";
      return 2;
    }
  }
  if (command != "list" && command != "drop") {
    err << "walwatch slots: unknown command \"" << command << "\"\n" << kUsage;
    return 2;
  }
  std::chrono::milliseconds inactive_for{0};
  if (command == "drop") {
    if (inactive_text.empty() || !ParseDuration(inactive_text, &inactive_for)) {
      err << "walwatch slots drop: --inactive-for needs a duration such as "
             "24h\n";
      return 2;
    }
    if (prefix.empty()) {
      err << "walwatch slots drop: --prefix must not be empty\n";
      return 2;
    }
  }

  PgConn conn = ConnectPg(conninfo, false, 10);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    err << "walwatch slots: cannot connect to PostgreSQL: "
        << ExplainPgError(PgError(conn.get())) << "\n";
    return 1;
  }
  std::vector<SlotRow> rows;
  bool idle_known = true;
  if (std::string e = ReadSlots(conn.get(), prefix, &rows, &idle_known);
      !e.empty()) {
    err << "walwatch slots: cannot list slots: " << e << "\n";
    return 1;
  }
  if (command == "list") {
    out << std::left << std::setw(40) << "SLOT" << " " << std::setw(10)
        << "PLUGIN" << " " << std::setw(16) << "DATABASE" << " "
        << std::setw(7) << "ACTIVE" << " " << std::setw(11) << "WAL_STATUS"
        << " " << std::setw(10) << "RETAINED" << " INACTIVE_FOR\n";
    for (const SlotRow& r : rows) {
      out << std::left << std::setw(40) << r.name << " " << std::setw(10)
          << r.plugin << " " << std::setw(16) << r.database << " "
          << std::setw(7) << (r.active ? "yes" : "no") << " " << std::setw(11)
          << r.wal_status << " " << std::setw(10) << Human(r.retained) << " "
          << (r.active ? "-" : HumanDuration(r.idle_seconds)) << "\n";
    }
    if (!idle_known) {
      err << "note: INACTIVE_FOR needs pg_monitor before PostgreSQL 17 "
             "(GRANT pg_monitor TO <role>)\n";
    }
    return 0;
  }

  if (!idle_known) {
    err << "walwatch slots drop: cannot tell how long slots were inactive: "
           "the role needs pg_monitor before PostgreSQL 17 (GRANT pg_monitor "
           "TO <role>)\n";
    return 1;
  }
  const double threshold = inactive_for.count() / 1000.0;
  int dropped = 0, failed = 0, would_drop = 0;
  for (const SlotRow& r : rows) {
    if (r.active || r.plugin != "wal2json" || r.idle_seconds < threshold) {
      continue;
    }
    if (dry_run) {
      out << "would drop " << r.name << " (inactive for "
          << HumanDuration(r.idle_seconds) << ", retains " << Human(r.retained)
          << ")\n";
      ++would_drop;
      continue;
    }
    std::string e = DropSlot(conn.get(), r.name);
    if (!e.empty()) {
      // It may have become active in between: never force it.
      err << "walwatch slots drop: " << e << "\n";
      ++failed;
      continue;
    }
    out << "dropped " << r.name << " (inactive for "
        << HumanDuration(r.idle_seconds) << ", retained " << Human(r.retained)
        << ")\n";
    ++dropped;
  }
  if (dropped == 0 && failed == 0 && would_drop == 0) {
    out << "no inactive slot with prefix \"" << prefix << "\" for at least "
        << inactive_text << "\n";
  }
  return failed ? 1 : 0;
}

}  // namespace walwatch
