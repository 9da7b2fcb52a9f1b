// tf.train.Example records: parsing, finding the encoded image, and planning
// the rewrite that replaces it with raw pixels (decode/tfrecord/example.proto holds
// the messages, with TensorFlow's field numbers).
//
// The rewrite is planned without the pixels: an ImageRecordPlan is the
// serialized record cut around where the pixel bytes go, so
//   record = plan.prefix + <pixel_bytes raw pixels> + plan.suffix
// is a valid Example whose image feature holds the pixels, with int64
// features image/height, image/width, image/channels set and every other
// feature and every unknown field (at any level) kept. Its size is known
// exactly before decoding, and the decoder can write pixels straight into
// the output. The plan is deterministic (other features in input order,
// then the shape features, then the image), so the same input gives the
// same bytes in every process: a view record produced partly before and
// partly after a restart stays whole.
//
// Errors: EBADMSG the record is not an Example; ENOENT the feature is
// missing; EINVAL it is not a bytes_list or does not hold exactly one value.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "decode/jpeg/image_shape.h"
#include "decode/tfrecord/example.pb.h"
#include "util/status.h"

namespace stoker {

inline constexpr const char* kDefaultImageFeature = "image/encoded";
inline constexpr const char* kHeightFeature = "image/height";
inline constexpr const char* kWidthFeature = "image/width";
inline constexpr const char* kChannelsFeature = "image/channels";

Result<tf::Example> ParseExample(std::string_view record);

std::string SerializeExampleDeterministic(const tf::Example& example);

// The feature named key: the last entry with that key, as TensorFlow's
// parser and a protobuf map take it. Null if none.
const tf::Feature* FindFeature(const tf::Example& example, std::string_view key);
// Appends an entry (tests and tools building Examples).
tf::Feature* AddFeature(tf::Example* example, std::string_view key);

// The one value of bytes feature key; points into example.
Result<std::string_view> FindImageBytes(const tf::Example& example, const std::string& key);

struct ImageRecordPlan {
  std::string prefix;
  std::string suffix;
  uint64_t pixel_bytes = 0;
  uint64_t size() const { return prefix.size() + pixel_bytes + suffix.size(); }
};

// Plans the rewrite of example's feature key into shape's pixels.
// REQUIRES: key is not one of the three shape features.
Result<ImageRecordPlan> PlanImageRewrite(const tf::Example& example, const std::string& key,
                                         const ImageShape& shape);

// prefix + pixels + suffix, for tests and small tools; the view producer
// writes the three parts into its output without this copy.
// REQUIRES: pixels.size() == plan.pixel_bytes.
std::string AssembleRecord(const ImageRecordPlan& plan, std::string_view pixels);

}  // namespace stoker
