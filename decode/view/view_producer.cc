#include "decode/view/view_producer.h"

#include <cstring>

#include "decode/tfrecord/crc32c.h"
#include "decode/view/npy.h"
#include "decode/view/view_record.h"

namespace stoker {
namespace {

Status Mismatch(uint64_t in_offset, const std::string& what) {
  return Status::Corruption("view record at raw offset " + std::to_string(in_offset) +
                            " does not match its layout: " + what);
}

}  // namespace

Status ProduceTfRecordViewRecord(const ViewRecord& record, std::string_view raw_payload,
                                 const ViewOptions& options, JpegDecoder& decoder, uint8_t* out,
                                 size_t out_len) {
  if (record.kind == ViewRecordKind::kFailed) {
    return Status::IOError("view record at raw offset " + std::to_string(record.in_offset) +
                           " does not decode (see errors)");
  }
  if (out_len != record.out_size) return Status::Invalid("output buffer size differs from record");
  auto planned = PlanImageRecord(raw_payload, options);
  if (!planned.ok()) return Mismatch(record.in_offset, planned.status().message());
  const ImageRecordPlan& plan = planned->plan;
  if (!(planned->shape == record.shape) || plan.prefix.size() != record.prefix_size ||
      plan.size() + kTfRecordOverhead != record.out_size) {
    return Mismatch(record.in_offset, "sizes differ");
  }
  uint8_t* payload = out + kTfRecordHeaderSize;
  uint8_t* pixels = payload + plan.prefix.size();
  STOKER_RETURN_IF_ERROR(decoder.Decode(reinterpret_cast<const uint8_t*>(planned->jpeg.data()),
                                        planned->jpeg.size(), options.decode, pixels,
                                        plan.pixel_bytes));
  EncodeTfRecordHeader(plan.size(), out);
  std::memcpy(payload, plan.prefix.data(), plan.prefix.size());
  std::memcpy(pixels + plan.pixel_bytes, plan.suffix.data(), plan.suffix.size());
  EncodeTfRecordFooter(TfRecordMaskedCrc(payload, plan.size()), payload + plan.size());
  return Status::OK();
}

Status ProduceNpyView(const ViewLayout& layout, std::string_view jpeg_file,
                      const ViewOptions& options, JpegDecoder& decoder, uint8_t* out,
                      size_t out_len) {
  if (layout.kind != ViewKind::kNpy) return Status::Invalid("not an npy layout");
  if (layout.npy_failed()) return Status::IOError("jpeg does not decode (see errors)");
  if (out_len != layout.size) return Status::Invalid("output buffer size differs from layout");
  const auto* bytes = reinterpret_cast<const uint8_t*>(jpeg_file.data());
  auto info = ProbeJpeg(bytes, jpeg_file.size(), options.probe);
  if (!info.ok()) return Mismatch(0, info.status().message());
  auto shape = OutputShape(*info, options.decode);
  if (!shape.ok()) return Mismatch(0, shape.status().message());
  const std::string header = NpyHeader({shape->height, shape->width, shape->channels});
  if (!(*shape == layout.shape) || header.size() != layout.npy_header_size) {
    return Mismatch(0, "shape differs");
  }
  std::memcpy(out, header.data(), header.size());
  return decoder.Decode(bytes, jpeg_file.size(), options.decode, out + header.size(),
                        shape->pixel_bytes());
}

}  // namespace stoker
