#include "decode/view/view_layout.h"

#include <algorithm>
#include <vector>

#include "decode/view/npy.h"
#include "decode/view/view_record.h"

namespace stoker {

size_t ViewLayout::RecordAt(uint64_t off) const {
  // The first entry ending after off; entries are contiguous and sorted.
  auto it = std::upper_bound(records.begin(), records.end(), off,
                             [](uint64_t o, const ViewRecord& r) { return o < r.out_end(); });
  return static_cast<size_t>(it - records.begin());
}

std::pair<size_t, size_t> ViewLayout::RecordsOverlapping(uint64_t off, uint64_t len) const {
  if (len == 0 || off >= size) return {records.size(), records.size()};
  const size_t first = RecordAt(off);
  const size_t last = RecordAt(std::min(size, off + len) - 1) + 1;
  return {first, std::min(last, records.size())};
}

TfRecordLayoutBuilder::TfRecordLayoutBuilder(const ViewOptions& options, std::string fingerprint,
                                             uint64_t source_size, JpegCheck check)
    : options_(options), check_(options.on_error == OnError::kSkip ? std::move(check) : nullptr) {
  layout_.kind = ViewKind::kTfRecord;
  layout_.fingerprint = std::move(fingerprint);
  layout_.source_size = source_size;
}

void AddFailedEntry(ViewLayout* layout, OnError on_error, uint64_t in_offset, uint64_t in_size,
                    const Status& why) {
  layout->errors.push_back({in_offset, why.code(), why.message()});
  if (on_error == OnError::kSkip) return;
  ViewRecord r;
  r.kind = ViewRecordKind::kFailed;
  r.in_offset = in_offset;
  r.in_size = in_size;
  r.out_offset = layout->size;
  r.out_size = std::max<uint64_t>(in_size, 1);
  layout->size += r.out_size;
  layout->records.push_back(r);
}

void TfRecordLayoutBuilder::AddFailed(uint64_t in_offset, uint64_t in_size, const Status& why) {
  CheckHeld();  // raw order
  AddFailedEntry(&layout_, options_.on_error, in_offset, in_size, why);
}

void TfRecordLayoutBuilder::AddRecord(const TfRecordExtent& extent, std::string_view payload) {
  auto planned = PlanImageRecord(payload, options_);
  if (!planned.ok()) {
    AddFailed(extent.offset, extent.frame_size(), planned.status());
    return;
  }
  Held held{extent, std::move(planned).value()};
  if (!check_) {
    AddPlanned(extent, held);
    return;
  }
  held_.push_back(std::move(held));
  if (held_.size() >= kCheckBatch) CheckHeld();
}

void TfRecordLayoutBuilder::AddPlanned(const TfRecordExtent& extent, const Held& held) {
  ViewRecord r;
  r.kind = ViewRecordKind::kImage;
  r.in_offset = extent.offset;
  r.in_size = extent.frame_size();
  r.out_offset = layout_.size;
  r.out_size = held.planned.plan.size() + kTfRecordOverhead;
  r.prefix_size = static_cast<uint32_t>(held.planned.plan.prefix.size());
  r.shape = held.planned.shape;
  layout_.size += r.out_size;
  layout_.records.push_back(r);
}

void TfRecordLayoutBuilder::CheckHeld() {
  if (held_.empty()) return;
  std::vector<Held> held = std::move(held_);
  held_.clear();
  std::vector<std::string_view> jpegs;
  for (const Held& h : held) jpegs.push_back(h.planned.jpeg);
  std::vector<Status> st = check_(jpegs);
  for (size_t i = 0; i < held.size(); ++i) {
    const Status s = i < st.size() ? st[i] : Status::IOError("jpeg was not checked");
    if (s.ok()) {
      AddPlanned(held[i].extent, held[i]);
    } else {
      AddFailed(held[i].extent.offset, held[i].extent.frame_size(), s);
    }
  }
}

void TfRecordLayoutBuilder::AddBadRecord(const TfRecordExtent& extent, const Status& why) {
  AddFailed(extent.offset, extent.frame_size(), why);
}

void TfRecordLayoutBuilder::AddBrokenTail(uint64_t offset, uint64_t raw_rest, const Status& why) {
  AddFailed(offset, raw_rest, why);
}

ViewLayout TfRecordLayoutBuilder::Finish() && {
  CheckHeld();
  return std::move(layout_);
}

namespace {

// Data errors of the raw file are EBADMSG from the readers; anything else
// is the source failing, which the caller must see (and may retry).
bool IsDataError(const Status& s) { return s.code() == EBADMSG; }

}  // namespace

Result<ViewLayout> LayoutTfRecordView(ByteSource& src, TfRecordCompression compression,
                                      const ViewOptions& options, const std::string& decoder_name,
                                      const JpegCheck& check) {
  TfRecordLayoutBuilder builder(options, options.Fingerprint(decoder_name), src.size(), check);
  TfRecordExtent extent;
  std::string payload;
  if (compression == TfRecordCompression::kNone) {
    TfRecordReader reader(&src);
    for (;;) {
      const uint64_t at = reader.offset();
      auto got = reader.Next(&extent, &payload);
      if (got.ok()) {
        if (!*got) break;
        builder.AddRecord(extent, payload);
      } else if (!IsDataError(got.status())) {
        return got.status();
      } else if (reader.framing_intact()) {
        builder.AddBadRecord(extent, got.status());  // framing intact: go on
      } else {
        builder.AddBrokenTail(at, src.size() - at, got.status());
        break;
      }
    }
  } else {
    CompressedTfRecordReader reader(&src, compression);
    uint64_t end = 0;  // inflated offset after the last good frame
    for (;;) {
      auto got = reader.Next(&extent, &payload);
      if (got.ok()) {
        if (!*got) break;
        builder.AddRecord(extent, payload);
        end = extent.end();
      } else if (!IsDataError(got.status())) {
        return got.status();
      } else if (reader.framing_intact()) {
        builder.AddBadRecord(extent, got.status());
        end = extent.end();
      } else {
        builder.AddBrokenTail(end, 0, got.status());  // inflated rest unknown
        break;
      }
    }
  }
  return std::move(builder).Finish();
}

Result<ViewLayout> LayoutJpegNpyView(ByteSource& src, const ViewOptions& options,
                                     const std::string& decoder_name, const JpegCheck& check) {
  ViewLayout layout;
  layout.kind = ViewKind::kNpy;
  layout.fingerprint = options.Fingerprint(decoder_name);
  layout.source_size = src.size();
  // Headers are small, but EXIF and ICC segments can push the first scan
  // far out: read more while the probe says it ran out.
  std::vector<uint8_t> head;
  size_t want = std::min<uint64_t>(src.size(), 64 << 10);
  Result<JpegInfo> info = Status::Error(ENODATA, "jpeg: empty file");
  for (;;) {
    head.resize(want);
    STOKER_RETURN_IF_ERROR(ReadExactly(src, head.data(), want, 0, "jpeg"));
    info = ProbeJpeg(head.data(), head.size(), options.probe);
    if (info.ok() || info.status().code() != ENODATA || want == src.size()) break;
    want = std::min<uint64_t>(src.size(), uint64_t{want} * 4);
  }
  Result<ImageShape> shape = info.ok() ? OutputShape(*info, options.decode) : info.status();
  if (shape.ok() && check && options.on_error == OnError::kSkip) {
    head.resize(src.size());
    STOKER_RETURN_IF_ERROR(ReadExactly(src, head.data(), head.size(), 0, "jpeg"));
    std::vector<Status> st =
        check({std::string_view(reinterpret_cast<const char*>(head.data()), head.size())});
    if (st.empty() || !st[0].ok())
      return st.empty() ? Status::IOError("jpeg was not checked") : st[0];
  }
  if (!shape.ok()) {
    if (options.on_error == OnError::kSkip) return shape.status();
    layout.errors.push_back({0, shape.status().code(), shape.status().message()});
    ViewRecord r;
    r.kind = ViewRecordKind::kFailed;
    r.in_size = src.size();
    r.out_size = std::max<uint64_t>(src.size(), 1);
    layout.records.push_back(r);
    layout.size = r.out_size;
    return layout;
  }
  layout.shape = *shape;
  layout.npy_header_size =
      static_cast<uint32_t>(NpyHeader({shape->height, shape->width, shape->channels}).size());
  layout.size = layout.npy_header_size + shape->pixel_bytes();
  return layout;
}

}  // namespace stoker
