#include "tests/unit/support/pgoutput_fixture.h"

#include <string>
#include <vector>

namespace walwatch::testing_pgoutput {

using State = ColumnValue::State;

std::vector<RelColumn> PodColumns() {
  return {{"id", kInt8Oid, true},       {"group", kTextOid, false},
          {"version", kTextOid, false}, {"resource", kTextOid, false},
          {"kind", kTextOid, false},    {"cluster", kTextOid, false},
          {"namespace", kTextOid, false}, {"name", kTextOid, false},
          {"owner_uid", kTextOid, false}, {"uid", kTextOid, false},
          {"object", kJsonbOid, false}};
}

Tuple PodRow(const std::string& name, const std::string& object) {
  return {Text("7"),    Text(""),      Text("v1"), Text("pods"),
          Text("Pod"),  Text("c1"),    Text("ns"), Text(name),
          Text(""),     Text("u-" + name), Text(object)};
}

std::vector<RelColumn> KeyedByClusterAndUid() {
  std::vector<RelColumn> cols = PodColumns();
  for (RelColumn& c : cols) c.key = c.name == "cluster" || c.name == "uid";
  return cols;
}

Tuple KeyOnly(const std::string& name) {
  Tuple t(PodColumns().size(), kNull);
  t[5] = Text("c1");
  t[9] = Text("u-" + name);
  return t;
}

void ExpectNoColumns(const RowImage& image) {
  for (const ColumnValue& f : image.fields) {
    EXPECT_EQ(f, (ColumnValue{State::kAbsent, ""}));
  }
}

PgoutputDecoderTest::PgoutputDecoderTest()
    : mapping_(DefaultTableMapping()), decoder_(mapping_) {}

LogicalRecord PgoutputDecoderTest::DecodeOk(const std::string& message,
                                            uint64_t wal_start) {
  LogicalRecord r;
  std::string err = decoder_.Decode(message, wal_start, &r);
  EXPECT_EQ(err, "") << "message of " << message.size() << " bytes, type "
                     << (message.empty() ? '-' : message[0]);
  return r;
}

std::string PgoutputDecoderTest::DecodeError(const std::string& message,
                                             uint64_t wal_start) {
  LogicalRecord r;
  std::string err = decoder_.Decode(message, wal_start, &r);
  EXPECT_NE(err, "") << "accepted a message of " << message.size()
                     << " bytes, type "
                     << (message.empty() ? '-' : message[0]);
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  return err;
}

void PgoutputDecoderTest::AnnouncePods() {
  DecodeOk(Relation(kResourcesRel, "public", "resources", PodColumns()));
}

}  // namespace walwatch::testing_pgoutput
