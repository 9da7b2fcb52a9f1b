#include "decode/view/tar_view.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <vector>

#include "decode/jpeg/jpeg_probe.h"
#include "decode/view/npy.h"

namespace stoker {
namespace {

constexpr std::string_view kNewSuffix = ".npy";

bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - suffix.size(),
                    [](char a, char b) { return std::tolower(a) == std::tolower(b); });
}

Status InMember(const TarMember& m, const Status& why) {
  return Status::Error(why.code(), "member '" + m.name + "': " + why.message());
}

// Builds a tar view's layout from one scan, in raw order. With a check
// (on_error=skip), image members are held and checked kCheckBatch at a time.
class TarLayoutBuilder {
 public:
  TarLayoutBuilder(const ViewOptions& options, std::string fingerprint, uint64_t source_size,
                   const JpegCheck& check)
      : options_(options), check_(options.on_error == OnError::kSkip ? check : nullptr) {
    layout_.kind = ViewKind::kTar;
    layout_.fingerprint = std::move(fingerprint);
    layout_.source_size = source_size;
  }

  void AddCopy(uint64_t in_offset, uint64_t in_size) {
    CheckHeld();
    if (in_size == 0) return;
    if (!layout_.records.empty()) {
      ViewRecord& last = layout_.records.back();
      if (last.kind == ViewRecordKind::kCopy && last.in_offset + last.in_size == in_offset) {
        last.in_size += in_size;
        last.out_size += in_size;
        layout_.size += in_size;
        return;
      }
    }
    ViewRecord r;
    r.kind = ViewRecordKind::kCopy;
    r.in_offset = in_offset;
    r.in_size = in_size;
    Append(r, in_size);
  }

  void AddImage(const TarMember& m, std::string raw) {
    auto held = std::make_unique<Held>(Held{m, std::move(raw), {}});
    auto planned = PlanTarImage(held->raw, options_);
    if (!planned.ok()) {
      AddFailed(m.offset, held->raw.size(), InMember(m, planned.status()));
      return;
    }
    held->planned = std::move(planned).value();
    if (!check_) {
      AddPlanned(*held);
      return;
    }
    held_.push_back(std::move(held));
    if (held_.size() >= TfRecordLayoutBuilder::kCheckBatch) CheckHeld();
  }

  void AddFailed(uint64_t in_offset, uint64_t in_size, const Status& why) {
    CheckHeld();  // raw order
    AddFailedEntry(&layout_, options_.on_error, in_offset, in_size, why);
  }

  // The headers broke at in_offset: under skip the view's archive ends
  // after its last good member, with the end-of-archive blocks.
  void AddBrokenTail(uint64_t in_offset, uint64_t in_size, const Status& why) {
    AddFailed(in_offset, in_size, why);
    if (options_.on_error != OnError::kSkip) return;
    ViewRecord r;
    r.kind = ViewRecordKind::kZeros;
    r.in_offset = in_offset;
    Append(r, 2 * kTarBlock);
  }

  ViewLayout Finish() && {
    CheckHeld();
    return std::move(layout_);
  }

 private:
  struct Held {
    TarMember member;
    std::string raw;
    PlannedTarImage planned;  // its jpeg lies in raw
  };

  void Append(ViewRecord r, uint64_t out_size) {
    r.out_offset = layout_.size;
    r.out_size = out_size;
    layout_.size += out_size;
    layout_.records.push_back(r);
  }

  void AddPlanned(const Held& h) {
    ViewRecord r;
    r.kind = ViewRecordKind::kImage;
    r.in_offset = h.member.offset;
    r.in_size = h.raw.size();
    r.prefix_size = static_cast<uint32_t>(h.planned.prefix_size());
    r.shape = h.planned.shape;
    Append(r, h.planned.out_size());
  }

  void CheckHeld() {
    if (held_.empty()) return;
    std::vector<std::unique_ptr<Held>> held = std::move(held_);
    held_.clear();
    std::vector<std::string_view> jpegs;
    for (const auto& h : held) jpegs.push_back(h->planned.jpeg);
    std::vector<Status> st = check_(jpegs);
    for (size_t i = 0; i < held.size(); ++i) {
      const Status s = i < st.size() ? st[i] : Status::IOError("jpeg was not checked");
      if (s.ok()) {
        AddPlanned(*held[i]);
      } else {
        AddFailed(held[i]->member.offset, held[i]->raw.size(), InMember(held[i]->member, s));
      }
    }
  }

  const ViewOptions& options_;
  const JpegCheck check_;
  ViewLayout layout_;
  std::vector<std::unique_ptr<Held>> held_;
};

}  // namespace

std::string_view TarImageSuffix(const TarMember& member) {
  if (!member.is_regular()) return {};
  for (std::string_view s : {std::string_view(".jpg"), std::string_view(".jpeg")}) {
    if (EndsWithNoCase(member.name, s)) {
      return std::string_view(member.name).substr(member.name.size() - s.size());
    }
  }
  return {};
}

Result<PlannedTarImage> PlanTarImage(std::string_view member_raw, const ViewOptions& options) {
  MemoryByteSource src(member_raw);
  TarReader reader(&src);
  TarMember m;
  STOKER_ASSIGN_OR_RETURN(bool got, reader.Next(&m));
  const std::string_view suffix = got ? TarImageSuffix(m) : std::string_view();
  if (suffix.empty()) return Status::Invalid("tar: not an image member");
  PlannedTarImage p;
  p.jpeg = member_raw.substr(m.data_offset, m.size);
  const auto* bytes = reinterpret_cast<const uint8_t*>(p.jpeg.data());
  STOKER_ASSIGN_OR_RETURN(JpegInfo info, ProbeJpeg(bytes, p.jpeg.size(), options.probe));
  STOKER_ASSIGN_OR_RETURN(p.shape, OutputShape(info, options.decode));
  p.npy_header = NpyHeader({p.shape.height, p.shape.width, p.shape.channels});
  const uint64_t data_size = p.npy_header.size() + p.shape.pixel_bytes();
  STOKER_ASSIGN_OR_RETURN(p.headers, RewriteTarHeaders(member_raw.substr(0, m.data_offset), suffix,
                                                       kNewSuffix, data_size));
  return p;
}

Result<ViewLayout> LayoutTarView(ByteSource& src, const ViewOptions& options,
                                 const std::string& decoder_name, const JpegCheck& check) {
  TarLayoutBuilder builder(options, options.Fingerprint(decoder_name), src.size(), check);
  TarReader reader(&src);
  for (;;) {
    const uint64_t at = reader.offset();
    TarMember m;
    auto got = reader.Next(&m);
    if (!got.ok()) {
      if (got.status().code() != EBADMSG) return got.status();
      builder.AddBrokenTail(at, src.size() - at, got.status());
      break;
    }
    if (!*got) {
      builder.AddCopy(at, src.size() - at);  // the end-of-archive blocks
      break;
    }
    const uint64_t end = std::min(m.end(), src.size());
    if (TarImageSuffix(m).empty()) {
      builder.AddCopy(m.offset, end - m.offset);
      continue;
    }
    std::string raw(end - m.offset, '\0');
    STOKER_RETURN_IF_ERROR(ReadExactly(src, raw.data(), raw.size(), m.offset, "tar member"));
    builder.AddImage(m, std::move(raw));
  }
  return std::move(builder).Finish();
}

Status ProduceTarViewMember(const ViewRecord& record, std::string_view member_raw,
                            const ViewOptions& options, JpegDecoder& decoder, uint8_t* out,
                            size_t out_len) {
  auto mismatch = [&](const std::string& what) {
    return Status::Corruption("tar member at raw offset " + std::to_string(record.in_offset) +
                              " does not match its layout: " + what);
  };
  if (record.kind != ViewRecordKind::kImage) {
    return Status::IOError("tar member at raw offset " + std::to_string(record.in_offset) +
                           " does not decode (see errors)");
  }
  if (out_len != record.out_size) return Status::Invalid("output buffer size differs from record");
  auto planned = PlanTarImage(member_raw, options);
  if (!planned.ok()) return mismatch(planned.status().message());
  if (!(planned->shape == record.shape) || planned->prefix_size() != record.prefix_size ||
      planned->out_size() != record.out_size) {
    return mismatch("sizes differ");
  }
  uint8_t* pixels = out + planned->prefix_size();
  const uint64_t pixel_bytes = planned->shape.pixel_bytes();
  STOKER_RETURN_IF_ERROR(decoder.Decode(reinterpret_cast<const uint8_t*>(planned->jpeg.data()),
                                        planned->jpeg.size(), options.decode, pixels, pixel_bytes));
  std::memcpy(out, planned->headers.data(), planned->headers.size());
  std::memcpy(out + planned->headers.size(), planned->npy_header.data(),
              planned->npy_header.size());
  std::memset(pixels + pixel_bytes, 0, out_len - planned->prefix_size() - pixel_bytes);
  return Status::OK();
}

}  // namespace stoker
