// What PgoutputDecoder refuses, on messages written by
// tests/unit/support/pgoutput_builder.h: two-phase messages, unknown message
// and column kinds, and malformed input: every cut of every kind of message,
// trailing bytes, corrupted and random bytes are errors of one line, never a
// crash, and the decoder stays usable.
#include "cdc/postgres/pgoutput_decoder.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <simdjson.h>

#include "tests/unit/support/pgoutput_fixture.h"

namespace walwatch {
namespace {

using namespace testing_pgoutput;  // NOLINT: the tests' language
using State = ColumnValue::State;

TEST_F(PgoutputDecoderTest, TwoPhaseMessagesAreRefused) {
  // Begin Prepare, Prepare, Commit Prepared, Rollback Prepared, Stream
  // Prepare: walwatch never enables two_phase.
  const std::string gid("gid-1\0", 6);
  const std::string begin_prepare =
      std::string(PgMessage('b').Int64(0x100).Int64(0x130).Int64(0).Int32(7)) + gid;
  const std::string prepare =
      std::string(PgMessage('P').Int8(0).Int64(0x100).Int64(0x130).Int64(0).Int32(7)) +
      gid;
  const std::string commit_prepared =
      std::string(PgMessage('K').Int8(0).Int64(0x200).Int64(0x230).Int64(0).Int32(7)) +
      gid;
  const std::string rollback_prepared =
      std::string(
          PgMessage('r').Int8(0).Int64(0x130).Int64(0x230).Int64(0).Int64(0).Int32(7)) +
      gid;
  const std::string stream_prepare =
      std::string(PgMessage('p').Int8(0).Int64(0x100).Int64(0x130).Int64(0).Int32(7)) +
      gid;
  for (const std::string& m :
       {begin_prepare, prepare, commit_prepared, rollback_prepared, stream_prepare}) {
    SCOPED_TRACE(std::string(1, m[0]));
    DecodeError(m);
  }
}

TEST_F(PgoutputDecoderTest, UnknownMessagesAndColumnKindsAreErrors) {
  AnnouncePods();
  for (char type : {'X', 'Z', 'w', 'k', '\0', '{'}) {
    DecodeError(std::string(1, type) + std::string(20, '\0'));
  }
  DecodeError("");
  // Binary columns: walwatch asks for text.
  Tuple row = PodRow("p");
  row[7] = Datum{'b', "p"};
  DecodeError(Insert(kResourcesRel, row));
  row[7] = Datum{'x', ""};
  DecodeError(Insert(kResourcesRel, row));
  // An Insert's tuple must be 'N', an Update's old one 'K' or 'O', a
  // Delete's 'K' or 'O'.
  std::string ins = Insert(kResourcesRel, PodRow("p"));
  ins[5] = 'O';
  DecodeError(ins);
  std::string del = Delete(kResourcesRel, 'O', PodRow("p"));
  del[5] = 'N';
  DecodeError(del);
  std::string upd = Update(kResourcesRel, 'O', PodRow("a"), PodRow("b"));
  upd[5] = 'X';
  DecodeError(upd);
  // Still usable.
  EXPECT_EQ(DecodeOk(Insert(kResourcesRel, PodRow("p"))).columns[MappedField::kName].text,
            "p");
}

// ---------------------------------------------------------------------------
// Malformed input: every cut of every kind of message is an error, never a
// crash, and the decoder stays usable.

struct Sample {
  const char* what;
  bool in_stream;       // decoded inside a stream block
  std::string message;  // valid there
};

std::vector<Sample> Samples() {
  std::string big(19447, 'x');
  big.front() = '{';
  big.back() = '}';
  return {
      {"begin", false, Begin(0x1558570, PgTime(kDayStartUs), 746)},
      {"commit", false, Commit(0x1558570, 0x15585A0, PgTime(kDayStartUs))},
      {"origin", false, Origin(0x99, "node")},
      {"relation", false,
       Relation(kOtherRel, "public", "other", KeyedByClusterAndUid())},
      {"type", false, Type(16500, "public", "mood")},
      {"message", false, LogicalMessage(true, 0x99, "prefix", "content")},
      {"insert", false, Insert(kResourcesRel, PodRow("p"))},
      {"insert with nulls and toast", false,
       Insert(kResourcesRel, {Text("1"), kNull, kUnchanged, Text("x"), kNull,
                              kNull, kNull, kNull, kNull, kNull, kUnchanged})},
      {"update", false, Update(kResourcesRel, 'O', PodRow("a"), PodRow("b"))},
      {"update, key", false, Update(kResourcesRel, 'K', KeyOnly("a"), PodRow("b"))},
      {"update, new only", false, Update(kResourcesRel, 0, {}, PodRow("b"))},
      {"update, big object", false,
       Update(kResourcesRel, 'O', PodRow("a"), PodRow("b", big))},
      {"delete", false, Delete(kResourcesRel, 'O', PodRow("d"))},
      {"truncate", false, Truncate({kResourcesRel, kOtherRel})},
      {"stream start", false, StreamStart(900, true)},
      {"stream commit", false, StreamCommit(900, 0x3000, 0x3030, 0)},
      {"stream abort", false, StreamAbort(900, 901)},
      {"stream stop", true, StreamStop()},
      {"stream relation", true,
       Relation(kOtherRel, "public", "other", PodColumns(), 900)},
      {"stream type", true, Type(16500, "public", "mood", 900)},
      {"stream message", true, LogicalMessage(true, 0x99, "p", "c", 900)},
      {"stream insert", true, Insert(kResourcesRel, PodRow("p"), 901)},
      {"stream update", true,
       Update(kResourcesRel, 'O', PodRow("a"), PodRow("b"), 901)},
      {"stream delete", true, Delete(kResourcesRel, 'K', KeyOnly("d"), 901)},
      {"stream truncate", true, Truncate({kResourcesRel}, 900)},
  };
}

class PgoutputDecoderMalformedTest : public PgoutputDecoderTest {
 protected:
  // A fresh connection, the relation announced, inside a block or not.
  void SetUpState(bool in_stream) {
    decoder_.Reset();
    LogicalRecord r;
    ASSERT_EQ(decoder_.Decode(Relation(kResourcesRel, "public", "resources",
                                       KeyedByClusterAndUid()),
                              0, &r),
              "");
    if (in_stream) {
      ASSERT_EQ(decoder_.Decode(StreamStart(900, true), 0, &r), "");
    }
  }
  void ExpectUsable() {
    SetUpState(false);
    LogicalRecord r;
    ASSERT_EQ(decoder_.Decode(Insert(kResourcesRel, PodRow("ok")), 0x9, &r), "");
    EXPECT_EQ(r.columns[MappedField::kName].text, "ok");
    EXPECT_EQ(r.columns[MappedField::kObject].text, kObject);
  }
};

TEST_F(PgoutputDecoderMalformedTest, SamplesAreValid) {
  for (const Sample& s : Samples()) {
    SCOPED_TRACE(s.what);
    SetUpState(s.in_stream);
    DecodeOk(s.message);
  }
}

TEST_F(PgoutputDecoderMalformedTest, EveryCutIsAnError) {
  size_t cuts = 0;
  for (const Sample& s : Samples()) {
    const std::string& m = s.message;
    size_t checked = 0;
    for (size_t len = 0; len < m.size(); ++len) {
      // Every cut of a short message; of the big one, its first and last
      // 300 bytes and a stride between.
      if (m.size() > 4000 && len > 300 && len + 300 < m.size() && len % 61) {
        continue;
      }
      // The one cut that is itself a message: v4's Stream Abort cut to v2's.
      if (m[0] == 'A' && len == 9) continue;
      SCOPED_TRACE(std::string(s.what) + " cut to " + std::to_string(len) +
                   " of " + std::to_string(m.size()));
      SetUpState(s.in_stream);
      DecodeError(m.substr(0, len));
      ++checked;
      if (HasFailure()) return;  // one report is enough
    }
    EXPECT_GT(checked, 0u);
    cuts += checked;
    ExpectUsable();
  }
  EXPECT_GT(cuts, 2000u);
  // v4's Stream Abort is in Samples() only as v2's: cut the long one too.
  const std::string v4 = StreamAbort(900, 901, 0x4000, 7);
  for (size_t len = 0; len < v4.size(); ++len) {
    if (len == 9) continue;
    SetUpState(false);
    DecodeError(v4.substr(0, len));
  }
}

TEST_F(PgoutputDecoderMalformedTest, TrailingBytesAreAnError) {
  for (const Sample& s : Samples()) {
    for (const std::string& tail :
         {std::string(1, '\0'), std::string("x"), std::string(8, '\0'),
          std::string(16, '\0')}) {
      // v2's Stream Abort and 16 bytes is v4's.
      if (s.message[0] == 'A' && tail.size() == 16) continue;
      SCOPED_TRACE(std::string(s.what) + " and " + std::to_string(tail.size()) +
                   " bytes");
      SetUpState(s.in_stream);
      DecodeError(s.message + tail);
    }
  }
  ExpectUsable();
}

TEST_F(PgoutputDecoderMalformedTest, CorruptedBytesNeverCrash) {
  // Each byte of each sample replaced by values that upset lengths, counts
  // and kinds; whatever the result, decoding returns, an error is one line,
  // and a record that decodes keeps the contract's shape.
  const uint8_t replacements[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 'n', 'u', 't',
                                  'N',  'K',  'O'};
  size_t errors = 0, decoded = 0;
  for (const Sample& s : Samples()) {
    const std::string& base = s.message;
    size_t stride = base.size() > 4000 ? 97 : 1;
    for (size_t pos = 0; pos < base.size(); pos += stride) {
      for (uint8_t c : replacements) {
        std::string m = base;
        m[pos] = static_cast<char>(c);
        SetUpState(s.in_stream);
        LogicalRecord r;
        std::string err = decoder_.Decode(m, 0x77, &r);
        if (!err.empty()) {
          ++errors;
          EXPECT_EQ(err.find('\n'), std::string::npos) << err;
          continue;
        }
        ++decoded;
        if (!r.mapped_table) {
          ExpectNoColumns(r.columns);
          ExpectNoColumns(r.identity);
        }
        const ColumnValue& object = r.columns[MappedField::kObject];
        if (object.state == State::kValue) {
          EXPECT_GE(object.text.capacity(),
                    object.text.size() + simdjson::SIMDJSON_PADDING);
        }
      }
    }
  }
  EXPECT_GT(errors, 1000u);
  EXPECT_GT(decoded, 100u);  // replaced texts and xids still decode
  ExpectUsable();
}

TEST_F(PgoutputDecoderMalformedTest, RandomBytesNeverCrash) {
  std::mt19937 rng(20261202);
  SetUpState(false);
  for (int i = 0; i < 20000; ++i) {
    if (i % 1000 == 0) SetUpState(i % 2000 == 0);
    std::string m(rng() % 64, '\0');
    for (char& c : m) c = static_cast<char>(rng());
    // Mostly a known type first, so the bodies get read.
    if (!m.empty() && rng() % 4) m[0] = "BCORYMIUDTSEcAbPKrp"[rng() % 19];
    LogicalRecord r;
    std::string err = decoder_.Decode(m, 0, &r);
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
  ExpectUsable();
}

}  // namespace
}  // namespace walwatch
