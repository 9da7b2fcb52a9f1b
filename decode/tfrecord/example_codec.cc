#include "decode/tfrecord/example_codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

namespace stoker {
namespace {

using google::protobuf::io::CodedOutputStream;

// Example has no map fields (see example.proto); the flag
// keeps the output fixed should one ever be added.
template <typename Message>
std::string SerializeDeterministic(const Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeWithCachedSizes(&coded);
  }
  return out;
}

// Only the unknown fields of m, serialized: m's type with nothing else set.
// proto3 generated classes expose unknown fields only through reflection.
void CopyUnknownFields(const google::protobuf::Message& from, google::protobuf::Message* to) {
  to->GetReflection()->MutableUnknownFields(to)->MergeFrom(
      from.GetReflection()->GetUnknownFields(from));
}

template <typename Message>
std::string UnknownFieldsOf(const Message& m) {
  Message only;
  CopyUnknownFields(m, &only);
  only.ByteSizeLong();
  return SerializeDeterministic(only);
}

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Field 1 or 2, wire type 2 (length-delimited): one tag byte.
constexpr char kTag1 = 0x0a;
constexpr char kTag2 = 0x12;

uint64_t Delimited(uint64_t n) { return 1 + CodedOutputStream::VarintSize64(n) + n; }

const char* KindName(const tf::Feature& f) {
  switch (f.kind_case()) {
    case tf::Feature::kBytesList:
      return "bytes_list";
    case tf::Feature::kFloatList:
      return "float_list";
    case tf::Feature::kInt64List:
      return "int64_list";
    default:
      return "empty";
  }
}

}  // namespace

Result<tf::Example> ParseExample(std::string_view record) {
  tf::Example example;
  if (record.size() > static_cast<size_t>(INT32_MAX) ||
      !example.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    return Status::Corruption("record of " + std::to_string(record.size()) +
                              " bytes is not a tf.train.Example");
  }
  return example;
}

std::string SerializeExampleDeterministic(const tf::Example& example) {
  example.ByteSizeLong();  // SerializeWithCachedSizes needs the sizes cached
  return SerializeDeterministic(example);
}

const tf::Feature* FindFeature(const tf::Example& example, std::string_view key) {
  const auto& entries = example.features().feature();
  for (int i = entries.size() - 1; i >= 0; --i) {
    if (entries[i].key() == key) return &entries[i].value();
  }
  return nullptr;
}

tf::Feature* AddFeature(tf::Example* example, std::string_view key) {
  auto* entry = example->mutable_features()->add_feature();
  entry->set_key(std::string(key));
  return entry->mutable_value();
}

Result<std::string_view> FindImageBytes(const tf::Example& example, const std::string& key) {
  const tf::Feature* f = FindFeature(example, key);
  if (f == nullptr) return Status::NotFound("feature '" + key + "' missing");
  if (f->kind_case() != tf::Feature::kBytesList) {
    return Status::Invalid("feature '" + key + "' is " + KindName(*f) + ", not bytes_list");
  }
  if (f->bytes_list().value_size() != 1) {
    return Status::Invalid("feature '" + key + "' has " +
                           std::to_string(f->bytes_list().value_size()) + " values, expected 1");
  }
  return std::string_view(f->bytes_list().value(0));
}

Result<ImageRecordPlan> PlanImageRewrite(const tf::Example& example, const std::string& key,
                                         const ImageShape& shape) {
  STOKER_CHECK(key != kHeightFeature && key != kWidthFeature && key != kChannelsFeature,
               "image feature key collides with a shape feature");
  const tf::Feature* image = FindFeature(example, key);
  if (image == nullptr) return Status::NotFound("feature '" + key + "' missing");
  if (image->kind_case() != tf::Feature::kBytesList) {
    return Status::Invalid("feature '" + key + "' is " + KindName(*image) + ", not bytes_list");
  }

  // Every other feature, the shape features and Features' unknown fields are
  // serialized by protobuf; only the path down to the pixels is framed here.
  // Entries of the image key and the shape keys are dropped, earlier
  // duplicates included (readers take the last one anyway).
  tf::Features others;
  CopyUnknownFields(example.features(), &others);
  for (const auto& entry : example.features().feature()) {
    const std::string& k = entry.key();
    if (k != key && k != kHeightFeature && k != kWidthFeature && k != kChannelsFeature) {
      *others.add_feature() = entry;
    }
  }
  auto add_int = [&](const char* name, int64_t value) {
    auto* entry = others.add_feature();
    entry->set_key(name);
    entry->mutable_value()->mutable_int64_list()->add_value(value);
  };
  add_int(kHeightFeature, shape.height);
  add_int(kWidthFeature, shape.width);
  add_int(kChannelsFeature, shape.channels);
  others.ByteSizeLong();
  const std::string others_bytes = SerializeDeterministic(others);
  const std::string image_unknown = UnknownFieldsOf(*image);
  const std::string list_unknown = UnknownFieldsOf(image->bytes_list());

  const uint64_t pixels = shape.pixel_bytes();
  const uint64_t list_size = list_unknown.size() + Delimited(pixels);
  const uint64_t feature_size = image_unknown.size() + Delimited(list_size);
  const uint64_t entry_size = Delimited(key.size()) + Delimited(feature_size);
  const uint64_t features_size = others_bytes.size() + Delimited(entry_size);

  ImageRecordPlan plan;
  plan.pixel_bytes = pixels;
  std::string& p = plan.prefix;
  p.reserve(others_bytes.size() + key.size() + 64);
  p.push_back(kTag1);  // Example.features
  PutVarint(features_size, &p);
  p += others_bytes;
  p.push_back(kTag1);  // Features.feature: the image's entry
  PutVarint(entry_size, &p);
  p.push_back(kTag1);  // entry key
  PutVarint(key.size(), &p);
  p += key;
  p.push_back(kTag2);  // entry value: Feature
  PutVarint(feature_size, &p);
  p += image_unknown;
  p.push_back(kTag1);  // Feature.bytes_list
  PutVarint(list_size, &p);
  p += list_unknown;
  p.push_back(kTag1);  // BytesList.value
  PutVarint(pixels, &p);
  plan.suffix = UnknownFieldsOf(example);
  return plan;
}

std::string AssembleRecord(const ImageRecordPlan& plan, std::string_view pixels) {
  STOKER_CHECK(pixels.size() == plan.pixel_bytes, "pixel count differs from the plan");
  std::string out;
  out.reserve(plan.size());
  out += plan.prefix;
  out += pixels;
  out += plan.suffix;
  return out;
}

}  // namespace stoker
