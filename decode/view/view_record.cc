#include "decode/view/view_record.h"

#include "decode/jpeg/jpeg_decoder.h"

namespace stoker {

Result<PlannedImageRecord> PlanImageRecord(std::string_view payload, const ViewOptions& options) {
  PlannedImageRecord r;
  STOKER_ASSIGN_OR_RETURN(tf::Example example, ParseExample(payload));
  r.example = std::make_unique<tf::Example>(std::move(example));
  STOKER_ASSIGN_OR_RETURN(r.jpeg, FindImageBytes(*r.example, options.feature));
  const auto* bytes = reinterpret_cast<const uint8_t*>(r.jpeg.data());
  if (!LooksLikeJpeg(bytes, r.jpeg.size())) {
    return Status::Corruption("feature '" + options.feature + "' does not hold a JPEG");
  }
  STOKER_ASSIGN_OR_RETURN(r.info, ProbeJpeg(bytes, r.jpeg.size(), options.probe));
  STOKER_ASSIGN_OR_RETURN(r.shape, OutputShape(r.info, options.decode));
  STOKER_ASSIGN_OR_RETURN(r.plan, PlanImageRewrite(*r.example, options.feature, r.shape));
  return r;
}

}  // namespace stoker
