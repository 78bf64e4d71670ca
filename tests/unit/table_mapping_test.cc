#include "schema/table_mapping.h"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace walwatch {
namespace {

// A complete mapping with `table`, `schema` and one column overridable.
std::string Mapping(const std::string& table_json,
                    const std::string& schema_json = "\"public\"",
                    const std::string& extra_columns = "") {
  std::string doc = "{";
  if (!schema_json.empty()) doc += "\"schema\": " + schema_json + ", ";
  if (!table_json.empty()) doc += "\"table\": " + table_json + ", ";
  doc += R"("columns": {"group": "g", "version": "v", "resource": "r",
            "kind": "k", "cluster": "c", "namespace": "ns", "name": "n",
            "uid": "u", "object": "obj")" +
         extra_columns + "}}";
  return doc;
}

TEST(TableMapping, DefaultMapsClusterpediaResources) {
  TableMapping m = DefaultTableMapping();
  EXPECT_EQ(m.schema, "public");
  EXPECT_EQ(m.table, "resources");
  EXPECT_EQ(m.QualifiedTable(), "public.resources");
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    // Clusterpedia's column names are the field names.
    EXPECT_EQ(m.columns[i], kMappedFieldNames[i]);
    EXPECT_EQ(m.FieldOfColumn(kMappedFieldNames[i]), static_cast<int>(i));
  }
  EXPECT_EQ(m.column(MappedField::kObject), "object");
  EXPECT_EQ(m.column(MappedField::kUid), "uid");
  EXPECT_EQ(m.column(MappedField::kGroup), "group");
  EXPECT_EQ(m.FieldOfColumn("object"),
            static_cast<int>(MappedField::kObject));
  // Columns walwatch does not need are not mapped.
  for (const char* unmapped : {"id", "owner_uid", "resource_version",
                               "events", "created_at", "synced_at",
                               "deleted_at", "", "Object"}) {
    EXPECT_EQ(m.FieldOfColumn(unmapped), -1) << unmapped;
  }
}

TEST(TableMapping, DefaultEqualsTheShippedFile) {
  std::ifstream in(std::string(WALWATCH_SOURCE_DIR) +
                   "/schema/clusterpedia-resources.mapping.json");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  TableMapping parsed;
  ASSERT_EQ(ParseTableMapping(ss.str(), &parsed), "");
  TableMapping def = DefaultTableMapping();
  EXPECT_EQ(parsed.schema, def.schema);
  EXPECT_EQ(parsed.table, def.table);
  EXPECT_EQ(parsed.columns, def.columns);
}

TEST(TableMapping, ParsesCustomMapping) {
  TableMapping m;
  ASSERT_EQ(ParseTableMapping(Mapping("\"objects\"", "\"k8s\""), &m), "");
  EXPECT_EQ(m.schema, "k8s");
  EXPECT_EQ(m.table, "objects");
  EXPECT_EQ(m.QualifiedTable(), "k8s.objects");
  EXPECT_EQ(m.column(MappedField::kGroup), "g");
  EXPECT_EQ(m.column(MappedField::kNamespace), "ns");
  EXPECT_EQ(m.column(MappedField::kObject), "obj");
  EXPECT_EQ(m.FieldOfColumn("obj"), static_cast<int>(MappedField::kObject));
  EXPECT_EQ(m.FieldOfColumn("u"), static_cast<int>(MappedField::kUid));
  EXPECT_EQ(m.FieldOfColumn("object"), -1);
}

TEST(TableMapping, SchemaDefaultsToPublic) {
  TableMapping m;
  m.schema = "junk";
  ASSERT_EQ(ParseTableMapping(Mapping("\"objects\"", ""), &m), "");
  EXPECT_EQ(m.schema, "public");
  EXPECT_EQ(m.QualifiedTable(), "public.objects");
}

TEST(TableMapping, TopLevelCommentIsAllowed) {
  TableMapping m;
  std::string doc = Mapping("\"objects\"");
  doc.insert(1, "\"comment\": \"why\", ");
  EXPECT_EQ(ParseTableMapping(doc, &m), "");
  EXPECT_EQ(m.table, "objects");
}

// Parses `doc` expecting an error that mentions `needle`; checks that the
// output mapping is left untouched.
void ExpectError(const std::string& doc, const std::string& needle) {
  TableMapping m;
  m.table = "untouched";
  std::string err = ParseTableMapping(doc, &m);
  EXPECT_FALSE(err.empty()) << doc;
  EXPECT_NE(err.find(needle), std::string::npos)
      << "error \"" << err << "\" lacks \"" << needle << "\" for " << doc;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  EXPECT_EQ(m.table, "untouched");
}

TEST(TableMapping, RejectsNonObjects) {
  ExpectError("", "not a JSON object");
  ExpectError("not json", "not a JSON object");
  ExpectError("[]", "not a JSON object");
  ExpectError("\"resources\"", "not a JSON object");
  ExpectError("{\"table\": \"x\"", "not a JSON object");
}

TEST(TableMapping, RejectsMissingFields) {
  ExpectError(Mapping(""), "\"table\"");
  ExpectError(R"({"table": "t"})", "\"columns\"");
  ExpectError(R"({"table": "t", "columns": []})", "\"columns\"");
  ExpectError(R"({"table": "t", "columns": "object"})", "\"columns\"");
  // Every field must be mapped.
  for (size_t i = 0; i < kMappedFieldCount; ++i) {
    std::string cols;
    for (size_t j = 0; j < kMappedFieldCount; ++j) {
      if (j == i) continue;
      if (!cols.empty()) cols += ", ";
      cols += std::string("\"") + kMappedFieldNames[j] + "\": \"c" +
              std::to_string(j) + "\"";
    }
    ExpectError(R"({"table": "t", "columns": {)" + cols + "}}",
                std::string("\"") + kMappedFieldNames[i] + "\"");
  }
}

TEST(TableMapping, RejectsUnknownColumnField) {
  ExpectError(Mapping("\"t\"", "\"public\"", R"(, "owner": "owner_uid")"),
              "unknown field \"owner\"");
  ExpectError(Mapping("\"t\"", "\"public\"", R"(, "Object": "x")"),
              "unknown field \"Object\"");
  // A control character in the name stays escaped: the message is one line
  // (found by the wal2json fuzz target).
  TableMapping m;
  std::string err = ParseTableMapping(
      Mapping("\"t\"", "\"public\"", R"(, "\nmespace": "x")"), &m);
  EXPECT_NE(err.find("unknown field \"\\nmespace\""), std::string::npos)
      << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST(TableMapping, RejectsNonStrings) {
  ExpectError(Mapping("5"), "\"table\" must be a string");
  ExpectError(Mapping("null"), "\"table\" must be a string");
  ExpectError(Mapping("[\"t\"]"), "\"table\" must be a string");
  ExpectError(Mapping("\"t\"", "1"), "\"schema\" must be a string");
  ExpectError(Mapping("\"t\"", "null"), "\"schema\" must be a string");
  ExpectError(
      R"({"table": "t", "columns": {"group": "g", "version": "v", "resource": "r",
          "kind": "k", "cluster": "c", "namespace": "ns", "name": "n",
          "uid": 7, "object": "obj"}})",
      "\"uid\" must be a string");
  ExpectError(
      R"({"table": "t", "columns": {"group": "g", "version": "v", "resource": "r",
          "kind": "k", "cluster": "c", "namespace": "ns", "name": "n",
          "uid": "u", "object": {"column": "obj"}}})",
      "\"object\" must be a string");
}

TEST(TableMapping, RejectsNamesWal2JsonWouldMisread) {
  // add-tables splits on ',' and '.', and '*' is its wildcard.
  for (const char* bad : {"a,b", "a.b", "*", "res*", "a\\\\b", "a\\\"b", ""}) {
    std::string quoted = std::string("\"") + bad + "\"";
    ExpectError(Mapping(quoted), "\"table\" must be a plain identifier");
    ExpectError(Mapping("\"t\"", quoted),
                "\"schema\" must be a plain identifier");
  }
  ExpectError(Mapping("\"" + std::string(64, 'x') + "\""),
              "\"table\" must be a plain identifier");
  TableMapping m;
  EXPECT_EQ(ParseTableMapping(Mapping("\"" + std::string(63, 'x') + "\""), &m),
            "");
  EXPECT_EQ(m.table, std::string(63, 'x'));
}

TEST(TableMapping, RejectsAColumnMappedTwice) {
  // FieldOfColumn gives one field per column, so the decoder would fill only
  // the first of two fields mapped to one column and leave the other absent
  // in every row, silently.
  TableMapping m;
  std::string err = ParseTableMapping(
      R"({"table": "t", "columns": {"group": "g", "version": "v",
          "resource": "r", "kind": "k", "cluster": "c", "namespace": "ns",
          "name": "n", "uid": "n", "object": "obj"}})",
      &m);
  EXPECT_NE(err, "");
  EXPECT_NE(err.find("\"n\""), std::string::npos) << err;
}

}  // namespace
}  // namespace walwatch
