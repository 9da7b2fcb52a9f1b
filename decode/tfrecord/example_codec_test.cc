#include "decode/tfrecord/example_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

namespace stoker {
namespace {

// Protobuf wire format by hand, so the tests do not trust the encoder they
// check.
std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
  return s;
}
std::string Tag(int field, int wire) { return Varint(uint64_t(field) << 3 | wire); }
std::string Delim(int field, const std::string& body) {
  return Tag(field, 2) + Varint(body.size()) + body;
}
std::string Fixed32(float f) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &f, 4);
  return s;
}
std::string Entry(const std::string& key, const std::string& feature) {
  return Delim(1, Delim(1, key) + Delim(2, feature));
}
std::string BytesFeature(const std::string& v, const std::string& extra = "") {
  return Delim(1, Delim(1, v) + extra);
}

const tf::Feature& At(const tf::Example& ex, const std::string& key) {
  const tf::Feature* f = FindFeature(ex, key);
  EXPECT_NE(nullptr, f) << key;
  static const tf::Feature empty;
  return f ? *f : empty;
}

int64_t Int64Of(const tf::Example& ex, const std::string& key) {
  const auto& f = At(ex, key);
  EXPECT_EQ(tf::Feature::kInt64List, f.kind_case()) << key;
  EXPECT_EQ(1, f.int64_list().value_size()) << key;
  return f.int64_list().value(0);
}

const google::protobuf::UnknownFieldSet& Unknown(const google::protobuf::Message& m) {
  return m.GetReflection()->GetUnknownFields(m);
}

TEST(ExampleCodecTest, ParsesPackedAndUnpackedLists) {
  std::string unpacked_int =
      Tag(1, 0) + Varint(1) + Tag(1, 0) + Varint(uint64_t(-2)) + Tag(1, 0) + Varint(300);
  std::string packed_int = Delim(1, Varint(5) + Varint(6));
  std::string unpacked_float = Tag(1, 5) + Fixed32(1.5f) + Tag(1, 5) + Fixed32(2.5f);
  std::string packed_float = Delim(1, Fixed32(3.5f));
  std::string features =
      Entry("label", Delim(3, unpacked_int)) + Entry("ids", Delim(3, packed_int)) +
      Entry("f_unpacked", Delim(2, unpacked_float)) + Entry("f_packed", Delim(2, packed_float)) +
      Entry("image/encoded", BytesFeature("\xff\xd8jpeg"));
  std::string record = Delim(1, features);

  auto ex = ParseExample(record);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  ASSERT_EQ(5, ex->features().feature_size());
  const auto& label = At(*ex, "label").int64_list();
  ASSERT_EQ(3, label.value_size());
  EXPECT_EQ(1, label.value(0));
  EXPECT_EQ(-2, label.value(1));
  EXPECT_EQ(300, label.value(2));
  ASSERT_EQ(2, At(*ex, "ids").int64_list().value_size());
  EXPECT_EQ(6, At(*ex, "ids").int64_list().value(1));
  ASSERT_EQ(2, At(*ex, "f_unpacked").float_list().value_size());
  EXPECT_EQ(2.5f, At(*ex, "f_unpacked").float_list().value(1));
  EXPECT_EQ(3.5f, At(*ex, "f_packed").float_list().value(0));
  auto img = FindImageBytes(*ex, "image/encoded");
  ASSERT_TRUE(img.ok());
  EXPECT_EQ("\xff\xd8jpeg", *img);

  // Serialising writes the packed form; parsing that gives the same values.
  std::string again = SerializeExampleDeterministic(*ex);
  EXPECT_NE(std::string::npos, again.find(packed_int));
  auto ex2 = ParseExample(again);
  ASSERT_TRUE(ex2.ok());
  EXPECT_EQ(again, SerializeExampleDeterministic(*ex2));
  EXPECT_EQ(3, At(*ex2, "label").int64_list().value_size());
}

TEST(ExampleCodecTest, NotAnExample) {
  for (std::string bad : {std::string("\x0a\xff", 2), std::string("\x0a\x05\x0a", 3),
                          std::string("\xff\xff\xff\xff", 4), std::string("\x0b", 1)}) {
    auto ex = ParseExample(bad);
    EXPECT_FALSE(ex.ok());
    EXPECT_EQ(EBADMSG, ex.status().code());
  }
  // A JPEG is not an Example either (its first byte is an invalid tag).
  EXPECT_FALSE(ParseExample("\xff\xd8\xff\xe0\x00\x10JFIF").ok());
  EXPECT_TRUE(ParseExample("").ok());  // the empty message is valid protobuf
}

TEST(ExampleCodecTest, FeatureErrors) {
  std::string record = Delim(1, Entry("f", Delim(2, Delim(1, Fixed32(1)))) +
                                    Entry("two", Delim(1, Delim(1, "a") + Delim(1, "b"))) +
                                    Entry("none", "") + Entry("ok", BytesFeature("x")));
  auto ex = ParseExample(record);
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ENOENT, FindImageBytes(*ex, "image/encoded").status().code());
  EXPECT_EQ(EINVAL, FindImageBytes(*ex, "f").status().code());
  EXPECT_NE(std::string::npos, FindImageBytes(*ex, "f").status().message().find("float_list"));
  EXPECT_EQ(EINVAL, FindImageBytes(*ex, "two").status().code());
  EXPECT_EQ(EINVAL, FindImageBytes(*ex, "none").status().code());
  EXPECT_TRUE(FindImageBytes(*ex, "ok").ok());
  EXPECT_EQ(ENOENT, PlanImageRewrite(*ex, "image/encoded", {1, 1, 1}).status().code());
  EXPECT_EQ(EINVAL, PlanImageRewrite(*ex, "f", {1, 1, 1}).status().code());
}

// An ImageNet-shaped record with unknown fields at every level.
std::string RichRecord(const std::string& jpeg) {
  std::string features =
      Entry("image/class/label", Delim(3, Delim(1, Varint(417)))) +
      Entry("image/format", BytesFeature("JPEG")) +
      Entry("image/height", Delim(2, Delim(1, Fixed32(2.0f))))  // wrong type, to be replaced
      + Entry("image/object/bbox/xmin", Delim(2, Delim(1, Fixed32(0.1f) + Fixed32(0.2f)))) +
      Entry("other", Delim(3, Delim(1, Varint(7))) + Tag(11, 0) + Varint(99)) +
      Entry("image/encoded", BytesFeature(jpeg, Tag(2, 0) + Varint(5)) + Tag(9, 0) + Varint(42)) +
      Delim(5, "features-unknown");
  return Delim(1, features) + Tag(7, 0) + Varint(123456);
}

void CheckUnknownsKept(const tf::Example& ex) {
  ASSERT_EQ(1, Unknown(ex).field_count());
  EXPECT_EQ(7, Unknown(ex).field(0).number());
  EXPECT_EQ(123456u, Unknown(ex).field(0).varint());
  ASSERT_EQ(1, Unknown(ex.features()).field_count());
  EXPECT_EQ("features-unknown", Unknown(ex.features()).field(0).length_delimited());
  ASSERT_EQ(1, Unknown(At(ex, "image/encoded")).field_count());
  EXPECT_EQ(42u, Unknown(At(ex, "image/encoded")).field(0).varint());
  ASSERT_EQ(1, Unknown(At(ex, "image/encoded").bytes_list()).field_count());
  EXPECT_EQ(5u, Unknown(At(ex, "image/encoded").bytes_list()).field(0).varint());
  ASSERT_EQ(1, Unknown(At(ex, "other")).field_count());
  EXPECT_EQ(99u, Unknown(At(ex, "other")).field(0).varint());
}

TEST(ExampleCodecTest, RewriteKeepsEverythingElse) {
  auto ex = ParseExample(RichRecord("\xff\xd8 a jpeg"));
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  CheckUnknownsKept(*ex);
  ImageShape shape{3, 2, 3};
  auto plan = PlanImageRewrite(*ex, "image/encoded", shape);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::string pixels(shape.pixel_bytes(), '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i * 13);
  auto out = ParseExample(AssembleRecord(*plan, pixels));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(pixels, *FindImageBytes(*out, "image/encoded"));
  EXPECT_EQ(3, Int64Of(*out, "image/height"));
  EXPECT_EQ(2, Int64Of(*out, "image/width"));
  EXPECT_EQ(3, Int64Of(*out, "image/channels"));
  EXPECT_EQ(417, Int64Of(*out, "image/class/label"));
  EXPECT_EQ("JPEG", *FindImageBytes(*out, "image/format"));
  EXPECT_EQ(2, At(*out, "image/object/bbox/xmin").float_list().value_size());
  EXPECT_EQ(8, out->features().feature_size());
  CheckUnknownsKept(*out);
}

TEST(ExampleCodecTest, SizePredictionIsExact) {
  auto ex = ParseExample(RichRecord("\xff\xd8 jpeg bytes"));
  ASSERT_TRUE(ex.ok());
  // Around every varint length boundary of each nesting level.
  for (uint64_t p : {0ull, 1ull, 100ull, 127ull, 128ull, 16250ull, 16383ull, 16384ull, 2097000ull,
                     2097151ull, 2097152ull, 5000000ull}) {
    ImageShape shape{static_cast<uint32_t>(p), 1, 1};
    auto plan = PlanImageRewrite(*ex, "image/encoded", shape);
    ASSERT_TRUE(plan.ok());
    // The reference: the rewritten message with a placeholder of that size.
    tf::Example ref = *ex;
    auto* entries = ref.mutable_features()->mutable_feature();
    for (int i = entries->size() - 1; i >= 0; --i) {
      const std::string& k = entries->Get(i).key();
      if (k == "image/height" || k == "image/width" || k == "image/channels") {
        entries->DeleteSubrange(i, 1);
      } else if (k == "image/encoded") {
        entries->Mutable(i)->mutable_value()->mutable_bytes_list()->set_value(0,
                                                                              std::string(p, 'p'));
      }
    }
    AddFeature(&ref, "image/height")->mutable_int64_list()->add_value(static_cast<int64_t>(p));
    AddFeature(&ref, "image/width")->mutable_int64_list()->add_value(1);
    AddFeature(&ref, "image/channels")->mutable_int64_list()->add_value(1);
    EXPECT_EQ(ref.ByteSizeLong(), plan->size()) << p;
    std::string rec = AssembleRecord(*plan, std::string(p, 'p'));
    EXPECT_EQ(plan->size(), rec.size());
    auto back = ParseExample(rec);
    ASSERT_TRUE(back.ok()) << p;
    EXPECT_EQ(ref.ByteSizeLong(), back->ByteSizeLong());
    EXPECT_EQ(p, FindImageBytes(*back, "image/encoded")->size());
  }
}

TEST(ExampleCodecTest, PlanIsDeterministicAndKeepsOrder) {
  std::string in = Delim(1, Entry("zz", BytesFeature("3")) + Entry("img", BytesFeature("j")) +
                                Entry("b", BytesFeature("2")) + Entry("a", BytesFeature("1")));
  auto e1 = ParseExample(in), e2 = ParseExample(in);
  ASSERT_TRUE(e1.ok() && e2.ok());
  auto p1 = PlanImageRewrite(*e1, "img", {4, 4, 1});
  auto p2 = PlanImageRewrite(*e2, "img", {4, 4, 1});
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_EQ(p1->prefix, p2->prefix);
  EXPECT_EQ(in, SerializeExampleDeterministic(*e1));  // untouched input order
  auto out = ParseExample(AssembleRecord(*p1, std::string(16, 'x')));
  ASSERT_TRUE(out.ok());
  std::vector<std::string> keys;
  for (const auto& e : out->features().feature()) keys.push_back(e.key());
  EXPECT_EQ((std::vector<std::string>{"zz", "b", "a", "image/height", "image/width",
                                      "image/channels", "img"}),
            keys);
}

TEST(ExampleCodecTest, DuplicateKeysLastWins) {
  std::string in = Delim(
      1, Entry("img", BytesFeature("old")) + Entry("label", Delim(3, Delim(1, Varint(1)))) +
             Entry("img", BytesFeature("new")) + Entry("label", Delim(3, Delim(1, Varint(2)))));
  auto ex = ParseExample(in);
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ("new", *FindImageBytes(*ex, "img"));
  EXPECT_EQ(2, Int64Of(*ex, "label"));
  auto plan = PlanImageRewrite(*ex, "img", {1, 1, 1});
  ASSERT_TRUE(plan.ok());
  auto out = ParseExample(AssembleRecord(*plan, "p"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ("p", *FindImageBytes(*out, "img"));
  int images = 0;
  for (const auto& e : out->features().feature()) images += e.key() == "img";
  EXPECT_EQ(1, images);  // the stale duplicate is gone
  EXPECT_EQ(2, Int64Of(*out, "label"));
}

TEST(ExampleCodecTest, KeysNeedNotBeUtf8) {
  // TensorFlow's parse_single_example takes such keys; so do we.
  std::string in = Delim(1, Entry("\xff\xfe", BytesFeature("v")) + Entry("img", BytesFeature("j")));
  auto ex = ParseExample(in);
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ("v", *FindImageBytes(*ex, "\xff\xfe"));
  auto plan = PlanImageRewrite(*ex, "img", {1, 1, 1});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(ParseExample(AssembleRecord(*plan, "p")).ok());
}

TEST(ExampleCodecTest, RandomBytesNeverCrash) {
  std::mt19937 rng(11);
  std::string base = RichRecord("\xff\xd8xx");
  for (int i = 0; i < 3000; ++i) {
    std::string s = base;
    for (int k = 0; k < 1 + i % 4; ++k) s[rng() % s.size()] = static_cast<char>(rng());
    auto ex = ParseExample(s);
    if (!ex.ok()) continue;
    auto plan = PlanImageRewrite(*ex, "image/encoded", {2, 2, 1});
    if (plan.ok()) {
      EXPECT_TRUE(ParseExample(AssembleRecord(*plan, "abcd")).ok());
    }
  }
}

}  // namespace
}  // namespace stoker
