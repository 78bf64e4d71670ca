#include "cdc/postgres/pgoutput_decoder.h"

#include <simdjson.h>

#include "cdc/base/text.h"

namespace walwatch {

// A bounds-checked reader of pgoutput's big-endian fields. A read past the
// end sets failed() and yields zeros, so a message is checked once, at its
// end, rather than after every field.
class PgoutputDecoder::Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  uint8_t Byte() {
    if (!Need(1)) return 0;
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint32_t Int16() { return static_cast<uint32_t>(Big(2)); }
  uint32_t Int32() { return static_cast<uint32_t>(Big(4)); }
  uint64_t Int64() { return Big(8); }
  // A NUL-terminated string (the view excludes the NUL).
  std::string_view String() {
    size_t end = data_.find('\0', pos_);
    if (failed_ || end == std::string_view::npos) {
      failed_ = true;
      return {};
    }
    std::string_view s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  std::string_view Bytes(size_t n) {
    if (!Need(n)) return {};
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  bool failed() const { return failed_; }
  size_t remaining() const { return failed_ ? 0 : data_.size() - pos_; }
  bool at_end() const { return !failed_ && pos_ == data_.size(); }

 private:
  bool Need(size_t n) {
    if (failed_ || data_.size() - pos_ < n) {
      failed_ = true;
      return false;
    }
    return true;
  }
  uint64_t Big(size_t n) {
    if (!Need(n)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) {
      v = (v << 8) | static_cast<uint8_t>(data_[pos_ + i]);
    }
    pos_ += n;
    return v;
  }

  std::string_view data_;
  size_t pos_ = 0;
  bool failed_ = false;
};

PgoutputDecoder::PgoutputDecoder(const TableMapping& mapping)
    : mapping_(mapping) {}

void PgoutputDecoder::Reset() {
  relations_.clear();
  in_stream_ = false;
}

namespace {

void ResetImage(RowImage* image) {
  image->present = false;
  for (auto& f : image->fields) {
    f.state = ColumnValue::State::kAbsent;
    f.text.clear();
  }
}

}  // namespace

std::string PgoutputDecoder::Decode(std::string_view message,
                                    uint64_t wal_start, LogicalRecord* out) {
  out->action = RecordAction::kMessage;
  out->xid = out->subxid = 0;
  out->lsn = out->next_lsn = 0;
  out->timestamp_us = 0;
  out->mapped_table = false;
  ResetImage(&out->columns);
  ResetImage(&out->identity);
  Reader in(message);
  have_pending_relation_ = false;
  std::string err = DecodeMessage(in, wal_start, out);
  if (err.empty() && in.failed()) err = "message ends early";
  if (err.empty() && !in.at_end()) {
    err = std::to_string(in.remaining()) + " bytes after the message";
  }
  // What a message changes is kept only once all of it was read.
  if (err.empty()) {
    if (have_pending_relation_) {
      relations_[pending_relation_id_] = std::move(pending_relation_);
    }
    if (out->action == RecordAction::kStreamStart) in_stream_ = true;
    if (out->action == RecordAction::kStreamStop) in_stream_ = false;
  }
  if (!err.empty()) {
    std::string type = message.empty() ? std::string("empty")
                                       : std::string(1, message[0]);
    err = OneLine("pgoutput '" + type + "': " + err);
  }
  return err;
}

std::string PgoutputDecoder::DecodeMessage(Reader& in, uint64_t wal_start,
                                           LogicalRecord* out) {
  const char type = static_cast<char>(in.Byte());
  // Inside a stream block, these name their (sub)transaction first.
  auto stream_xid = [&] {
    if (in_stream_) out->xid = in.Int32();
  };
  switch (type) {
    case 'B':
      if (in_stream_) return "begin inside a stream block";
      out->action = RecordAction::kBegin;
      out->lsn = in.Int64();  // the commit record's
      out->timestamp_us = PgEpochToUnixMicros(static_cast<int64_t>(in.Int64()));
      out->xid = in.Int32();
      return "";
    case 'C':
      if (in_stream_) return "commit inside a stream block";
      out->action = RecordAction::kCommit;
      in.Byte();  // flags, unused
      out->lsn = in.Int64();
      out->next_lsn = in.Int64();
      out->timestamp_us = PgEpochToUnixMicros(static_cast<int64_t>(in.Int64()));
      return "";
    case 'O':  // origin of the transaction: LSN, name
      in.Int64();
      in.String();
      return "";
    case 'Y':  // a type: oid, namespace, name
      stream_xid();
      in.Int32();
      in.String();
      in.String();
      return "";
    case 'M': {  // a logical message (only sent when asked for)
      stream_xid();
      in.Byte();
      in.Int64();
      in.String();
      in.Bytes(in.Int32());
      return "";
    }
    case 'R':
      stream_xid();
      return DecodeRelation(in);
    case 'I': {
      stream_xid();
      const Relation* rel;
      if (std::string err = FindRelation(in, &rel); !err.empty()) return err;
      out->action = RecordAction::kInsert;
      out->lsn = wal_start;
      out->mapped_table = rel->mapped;
      if (in.Byte() != 'N') return "insert without a new tuple";
      return DecodeTuple(in, *rel, false, &out->columns);
    }
    case 'U': {
      stream_xid();
      const Relation* rel;
      if (std::string err = FindRelation(in, &rel); !err.empty()) return err;
      out->action = RecordAction::kUpdate;
      out->lsn = wal_start;
      out->mapped_table = rel->mapped;
      uint8_t kind = in.Byte();
      if (kind == 'K' || kind == 'O') {
        if (std::string err =
                DecodeTuple(in, *rel, kind == 'K', &out->identity);
            !err.empty()) {
          return err;
        }
        kind = in.Byte();
      }
      if (kind != 'N') return "update without a new tuple";
      return DecodeTuple(in, *rel, false, &out->columns);
    }
    case 'D': {
      stream_xid();
      const Relation* rel;
      if (std::string err = FindRelation(in, &rel); !err.empty()) return err;
      out->action = RecordAction::kDelete;
      out->lsn = wal_start;
      out->mapped_table = rel->mapped;
      uint8_t kind = in.Byte();
      if (kind != 'K' && kind != 'O') return "delete without an old tuple";
      return DecodeTuple(in, *rel, kind == 'K', &out->identity);
    }
    case 'T': {
      stream_xid();
      out->action = RecordAction::kTruncate;
      out->lsn = wal_start;
      uint32_t count = in.Int32();
      in.Byte();  // CASCADE / RESTART IDENTITY
      if (count > in.remaining() / 4) return "truncate names more relations than it holds";
      for (uint32_t i = 0; i < count; ++i) {
        auto it = relations_.find(in.Int32());
        // A relation never announced is not one this publication
        // replicates changes of, so it cannot be the mapped table.
        if (it != relations_.end() && it->second.mapped) {
          out->mapped_table = true;
        }
      }
      return "";
    }
    case 'S':
      if (in_stream_) return "stream start inside a stream block";
      out->action = RecordAction::kStreamStart;
      out->xid = in.Int32();
      in.Byte();  // first segment or not
      return "";
    case 'E':
      if (!in_stream_) return "stream stop outside a stream block";
      out->action = RecordAction::kStreamStop;
      return "";
    case 'c':
      if (in_stream_) return "stream commit inside a stream block";
      out->action = RecordAction::kStreamCommit;
      out->xid = in.Int32();
      in.Byte();  // flags, unused
      out->lsn = in.Int64();
      out->next_lsn = in.Int64();
      out->timestamp_us = PgEpochToUnixMicros(static_cast<int64_t>(in.Int64()));
      return "";
    case 'A':
      if (in_stream_) return "stream abort inside a stream block";
      out->action = RecordAction::kStreamAbort;
      out->xid = in.Int32();
      out->subxid = in.Int32();
      // Version 4 with streaming = parallel: the abort's LSN and time.
      if (in.remaining() == 16) {
        in.Int64();
        in.Int64();
      }
      return "";
    case 'b':
    case 'P':
    case 'K':
    case 'r':
    case 'p':
      return "two-phase message, but walwatch never enables two_phase";
    default:
      return "unknown message type";
  }
}

std::string PgoutputDecoder::DecodeRelation(Reader& in) {
  const uint32_t id = in.Int32();
  const std::string_view ns = in.String();
  const std::string_view name = in.String();
  in.Byte();  // replica identity setting
  const uint32_t columns = in.Int16();
  if (in.failed()) return "";  // reported by Decode
  // Each column takes at least 10 bytes (flags, NUL, type, typmod).
  if (columns > in.remaining() / 10) return "relation names more columns than it holds";
  Relation rel;
  // pgoutput sends "public" for the public schema, as wal2json does.
  rel.mapped = ns == mapping_.schema && name == mapping_.table;
  rel.fields.resize(columns, -1);
  rel.key.resize(columns, false);
  for (uint32_t i = 0; i < columns; ++i) {
    const uint8_t flags = in.Byte();
    const std::string_view column = in.String();
    in.Int32();  // type oid
    in.Int32();  // type modifier
    rel.key[i] = (flags & 1) != 0;
    if (rel.mapped) {
      rel.fields[i] = static_cast<int8_t>(mapping_.FieldOfColumn(column));
    }
  }
  if (in.failed()) return "";
  pending_relation_id_ = id;
  pending_relation_ = std::move(rel);
  have_pending_relation_ = true;
  return "";
}

std::string PgoutputDecoder::FindRelation(Reader& in, const Relation** rel) {
  const uint32_t id = in.Int32();
  if (in.failed()) return "message ends early";
  auto it = relations_.find(id);
  if (it == relations_.end()) {
    return "change of relation " + std::to_string(id) +
           " before its Relation message";
  }
  *rel = &it->second;
  return "";
}

std::string PgoutputDecoder::DecodeTuple(Reader& in, const Relation& rel,
                                         bool old_key, RowImage* image) {
  const uint32_t columns = in.Int16();
  if (in.failed()) return "message ends early";
  if (columns != rel.fields.size()) {
    return "tuple of " + std::to_string(columns) +
           " columns, but its relation has " +
           std::to_string(rel.fields.size());
  }
  // Another table's images are skipped, not materialized, as wal2json's.
  image->present = rel.mapped;
  for (uint32_t i = 0; i < columns; ++i) {
    const uint8_t kind = in.Byte();
    const int field = rel.mapped ? rel.fields[i] : -1;
    // An old key's other columns: absent, as wal2json leaves them out.
    const bool keep = field >= 0 && !(old_key && !rel.key[i]);
    switch (kind) {
      case 'n':
        if (keep) image->fields[field].state = ColumnValue::State::kNull;
        break;
      case 'u':  // an unchanged TOAST value: absent
        break;
      case 't':
      case 'b': {
        if (kind == 'b') return "binary column, but walwatch asks for text";
        const std::string_view text = in.Bytes(in.Int32());
        if (in.failed()) return "message ends early";
        if (!keep) break;
        ColumnValue& v = image->fields[field];
        v.state = ColumnValue::State::kValue;
        if (field == static_cast<int>(MappedField::kObject)) {
          v.text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
        }
        v.text.assign(text.data(), text.size());
        break;
      }
      default:
        if (in.failed()) return "message ends early";
        return "unknown column kind " + std::to_string(kind);
    }
  }
  return "";
}

}  // namespace walwatch
