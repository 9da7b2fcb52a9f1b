#include "decode/jpeg/fallback_jpeg_decoder.h"

namespace stoker {

FallbackJpegDecoder::FallbackJpegDecoder(std::shared_ptr<JpegDecoder> primary,
                                         std::shared_ptr<JpegDecoder> fallback,
                                         std::shared_ptr<FallbackCounters> counters)
    : primary_(std::move(primary)), fallback_(std::move(fallback)), counters_(std::move(counters)) {
  STOKER_CHECK(primary_ && fallback_ && counters_, "a fallback decoder needs both decoders");
}

std::string FallbackJpegDecoder::name() const {
  return primary_->name() + ", fallback " + fallback_->name();
}

Status FallbackJpegDecoder::Decode(const uint8_t* jpeg, size_t len, const DecodeParams& params,
                                   uint8_t* out, size_t out_len) {
  Status s = primary_->Decode(jpeg, len, params, out, out_len);
  if (s.ok() || s.code() == EINVAL || s.code() == ECANCELED) return s;
  switch (s.code()) {
    case ENOTSUP:
      counters_->unsupported++;
      break;
    case EBADMSG:
    case ENODATA:
      counters_->rejected++;
      break;
    case ENOMEM:
      counters_->no_memory++;
      break;
    default:
      counters_->device_errors++;
  }
  return fallback_->Decode(jpeg, len, params, out, out_len);
}

}  // namespace stoker
