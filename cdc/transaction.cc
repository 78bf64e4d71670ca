#include "cdc/transaction.h"

namespace walwatch {

namespace {

// What a change holds in memory, counted like Event::MemoryBytes.
size_t ImageBytes(const RowImage& image) {
  size_t n = 0;
  for (const auto& f : image.fields) n += f.text.capacity();
  return n;
}

}  // namespace

size_t ChangeMemoryBytes(const RowImage& columns, const RowImage& identity) {
  return sizeof(RowChange) + ImageBytes(columns) + ImageBytes(identity);
}

}  // namespace walwatch
