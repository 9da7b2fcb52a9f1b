// Fuzzes the index record decoders (cache/index_format.h) on arbitrary
// bytes: what a damaged RocksDB (a flipped bit in an SST, a torn WAL record)
// could hand the daemon and fsck. The first byte picks the decoder.
// Invariants: nothing crashes or reads out of bounds; whatever decodes, key
// or value, encodes back to exactly the input (the format is canonical).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cache/index_format.h"

namespace {

using namespace stoker;

void Check(bool ok) {
  if (!ok) std::abort();
}

// Values are fixed-width and strictly decoded, so they are canonical too:
// a decoder that turned lenient (accepting bytes it would not write) fails.
template <typename T, typename Decode, typename Encode>
void RoundTrip(std::string_view in, Decode decode, Encode encode) {
  Result<T> once = decode(in);
  if (!once.ok()) return;
  Check(encode(*once) == in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 10) {
    case 0:
      if (auto k = DecodeObjectKey(in); k.ok()) Check(ObjectKey(*k) == in);
      break;
    case 1:
      if (auto k = DecodeChunkRecordKey(in); k.ok()) Check(ChunkRecordKey(*k) == in);
      break;
    case 2:
      if (auto k = DecodeEvictOrderKey(in); k.ok()) Check(EvictOrderKey(k->first, k->second) == in);
      break;
    case 3:
      if (auto k = DecodeIntentKey(in); k.ok()) Check(IntentKey(*k) == in);
      break;
    case 4:
      if (auto k = DecodeDropKey(in); k.ok()) Check(DropKey(*k) == in);
      break;
    case 5:
      // A derived key holds a name after its version: the prefix is canonical.
      if (auto k = DecodeDerivedKey(in); k.ok()) {
        Check(in.substr(0, DerivedVersionPrefix(*k).size()) == DerivedVersionPrefix(*k));
      }
      break;
    case 6:
      RoundTrip<IndexMeta>(in, DecodeMeta, EncodeMeta);
      break;
    case 7:
      RoundTrip<ObjectRecord>(in, DecodeObject, EncodeObject);
      break;
    case 8:
      RoundTrip<ChunkRecord>(in, DecodeChunk, EncodeChunk);
      break;
    case 9:
      if (auto slot = DecodeIntent(in); slot.ok()) Check(in == EncodeIntent(*slot));
      if (auto b = DecodeSlabBitmap(in); b.ok()) Check(in == EncodeSlabBitmap(*b));
      if (auto k = DecodeSlabKey(in); k.ok()) Check(SlabKey(k->first, k->second) == in);
      break;
  }
  return 0;
}
