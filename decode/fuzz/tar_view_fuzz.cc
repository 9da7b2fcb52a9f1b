// Fuzzes the tar reader, the header rewrite and the tar view's layout and
// production. The first byte picks the options, and whether the rest is
// taken as it is or has every header's checksum made good first (a fuzzer
// cannot forge the checksum by mutation, so without it the mutations stop
// at the first header).
// Invariants: nothing crashes or reads out of bounds; a layout's entries
// are contiguous, add up to its size, and survive their own encoding; every
// image entry produces exactly its size and, copied entries and all, the
// view reads back as a tar with the raw file's members, images renamed.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/tar/tar_format.h"
#include "decode/view/tar_view.h"
#include "decode/view/view_layout.h"

namespace {

using namespace stoker;

void Check(bool ok) {
  if (!ok) std::abort();
}

// Walks the headers as a reader would and rewrites each checksum.
void SealHeaders(std::string& tar) {
  size_t at = 0;
  while (at + kTarBlock <= tar.size()) {
    char* h = tar.data() + at;
    std::memset(h + 148, ' ', 8);
    if (std::all_of(h, h + kTarBlock, [](char c) { return c == '\0' || c == ' '; }))
      break;  // the end
    SealTarHeader(reinterpret_cast<uint8_t*>(h));
    uint64_t size = 0;
    for (size_t i = 124; i < 135 && h[i] >= '0' && h[i] <= '7'; ++i) size = size * 8 + (h[i] - '0');
    at += kTarBlock + TarPadded(size);
  }
}

void CheckView(const std::string& raw, const ViewOptions& options) {
  MemoryByteSource src(raw);
  auto layout = LayoutTarView(src, options, "fuzz");
  Check(layout.ok());  // memory never fails to read
  uint64_t at = 0;
  for (const ViewRecord& r : layout->records) {
    Check(r.out_offset == at && r.out_size > 0);
    at += r.out_size;
  }
  Check(at == layout->size);
  auto back = DecodeViewLayout(EncodeViewLayout(*layout));
  Check(back.ok() && *back == *layout);
  if (layout->size > (8u << 20)) return;
  auto decoder = NewCpuJpegDecoder();
  std::string view(layout->size, '\0');
  bool whole = true;
  for (const ViewRecord& r : layout->records) {
    auto* to = reinterpret_cast<uint8_t*>(view.data() + r.out_offset);
    if (r.kind == ViewRecordKind::kCopy) std::memcpy(to, raw.data() + r.in_offset, r.in_size);
    if (r.kind == ViewRecordKind::kFailed) whole = false;
    if (r.kind != ViewRecordKind::kImage) continue;
    Status s = ProduceTarViewMember(r, std::string_view(raw).substr(r.in_offset, r.in_size),
                                    options, *decoder, to, r.out_size);
    Check(s.ok() || s.code() != EINVAL);  // sizes always as laid out
    whole = whole && s.ok();
  }
  if (!whole || !layout->errors.empty()) return;
  // A clean view lists the raw members, images renamed.
  MemoryByteSource raw_src(raw), view_src(view);
  TarReader a(&raw_src), b(&view_src);
  for (;;) {
    TarMember m, n;
    auto x = a.Next(&m);
    auto y = b.Next(&n);
    Check(x.ok() && y.ok() && *x == *y);
    if (!*x) break;
    const std::string_view suffix = TarImageSuffix(m);
    Check(n.name ==
          (suffix.empty() ? m.name : m.name.substr(0, m.name.size() - suffix.size()) + ".npy"));
    Check(n.type == m.type);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  std::string raw(reinterpret_cast<const char*>(data + 1), size - 1);
  if (selector & 1) SealHeaders(raw);
  ViewOptions options;
  options.on_error = (selector & 2) ? OnError::kSkip : OnError::kFail;
  options.decode.channels = (selector >> 2) % 3 == 2 ? 3 : (selector >> 2) % 3;
  options.decode.ratio = 1 << ((selector >> 4) & 3);
  options.probe.max_pixels = 1 << 20;
  CheckView(raw, options);
  return 0;
}
