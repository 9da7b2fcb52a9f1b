// Fuzzes the TFRecord -> Example -> view layout path and the layout codec.
// The first byte picks what the rest is, because a fuzzer cannot forge
// CRC-32C framing by mutation:
//   0: a raw TFRecord file            1: one record payload (framed here)
//   2: a GZIP-compressed TFRecord file 3: an encoded ViewLayout, less its
//                                         checksum
// Invariants: nothing crashes or reads out of bounds; a layout's entries
// are contiguous and add up to its size; every planned record assembles to
// exactly its predicted size and parses back; a layout survives its own
// encoding unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "decode/tfrecord/crc32c.h"
#include "decode/tfrecord/example_codec.h"
#include "decode/tfrecord/tfrecord.h"
#include "decode/view/view_layout.h"
#include "decode/view/view_record.h"

namespace {

using namespace stoker;

void Check(bool ok) {
  if (!ok) std::abort();
}

ViewOptions Options(uint8_t selector) {
  ViewOptions o;
  o.decode.channels = (selector >> 2) % 3 == 2 ? 3 : (selector >> 2) % 3;
  o.on_error = (selector & 0x40) ? OnError::kSkip : OnError::kFail;
  o.probe.max_pixels = 1 << 20;
  return o;
}

void CheckLayout(const ViewLayout& layout) {
  uint64_t at = 0;
  for (const ViewRecord& r : layout.records) {
    Check(r.out_offset == at && r.out_size > 0);
    at += r.out_size;
  }
  if (layout.kind != ViewKind::kNpy || layout.npy_failed()) Check(at == layout.size);
  auto back = DecodeViewLayout(EncodeViewLayout(layout));
  Check(back.ok() && *back == layout);
}

void CheckPlan(std::string_view payload, const ViewOptions& options) {
  auto planned = PlanImageRecord(payload, options);
  if (!planned.ok() || planned->plan.pixel_bytes > (1u << 20)) return;
  std::string pixels(planned->plan.pixel_bytes, '\x5a');
  std::string record = AssembleRecord(planned->plan, pixels);
  Check(record.size() == planned->plan.size());
  auto back = ParseExample(record);
  Check(back.ok());
  auto image = FindImageBytes(*back, options.feature);
  Check(image.ok() && *image == pixels);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const ViewOptions options = Options(selector);
  switch (selector & 3) {
    case 0:
    case 2: {
      MemoryByteSource src(rest);
      auto compression =
          (selector & 3) == 2 ? TfRecordCompression::kGzip : TfRecordCompression::kNone;
      auto layout = LayoutTfRecordView(src, compression, options, "fuzz");
      Check(layout.ok());  // memory never fails to read
      CheckLayout(*layout);
      break;
    }
    case 1: {
      CheckPlan(rest, options);
      std::string file;
      AppendTfRecord(rest, &file);
      MemoryByteSource src(file);
      auto layout = LayoutTfRecordView(src, TfRecordCompression::kNone, options, "fuzz");
      Check(layout.ok());
      CheckLayout(*layout);
      break;
    }
    case 3: {
      // Sealed with a valid checksum here, so mutations reach the checks
      // behind it.
      std::string sealed(rest);
      const uint32_t crc = Crc32c(sealed.data(), sealed.size());
      for (int i = 0; i < 4; ++i) sealed.push_back(static_cast<char>(crc >> (8 * i)));
      auto layout = DecodeViewLayout(sealed);
      if (layout.ok()) CheckLayout(*layout);
      break;
    }
  }
  return 0;
}
