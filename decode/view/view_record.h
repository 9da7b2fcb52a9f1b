// PlanImageRecord: the shared first step of laying out and of producing one
// TFRecord record of a decoded view: parse the Example, find the JPEG
// feature, probe its header, decide the decoded shape and plan the
// rewritten record. Layout and production both call it on the same raw
// bytes, which is what makes the layout's sizes the produced sizes.
//
// Errors: those of ParseExample, FindImageBytes, ProbeJpeg and
// OutputChannels (EBADMSG, ENOENT, EINVAL, ENOTSUP, EFBIG, ENODATA), with
// the message naming the step.
//
// Thread-safety: pure function.
#pragma once

#include <memory>
#include <string_view>

#include "decode/jpeg/image_shape.h"
#include "decode/jpeg/jpeg_probe.h"
#include "decode/tfrecord/example_codec.h"
#include "decode/view/view_options.h"
#include "util/status.h"

namespace stoker {

struct PlannedImageRecord {
  std::unique_ptr<tf::Example> example;  // heap, so jpeg stays valid on move
  std::string_view jpeg;                 // the JPEG bytes, inside *example
  JpegInfo info;
  ImageShape shape;
  ImageRecordPlan plan;
};

Result<PlannedImageRecord> PlanImageRecord(std::string_view payload, const ViewOptions& options);

}  // namespace stoker
