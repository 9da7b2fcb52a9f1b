#include "decode/view/view_options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace stoker {
namespace {

TEST(ViewOptionsTest, Defaults) {
  auto spec = ParseViewSpec("decoded");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ("decoded", spec->name);
  EXPECT_EQ(0, spec->options.decode.channels);
  EXPECT_EQ(DctMethod::kFast, spec->options.decode.dct);
  EXPECT_TRUE(spec->options.decode.fancy_upsampling);
  EXPECT_EQ("image/encoded", spec->options.feature);
  EXPECT_EQ(OnError::kFail, spec->options.on_error);
  EXPECT_EQ(ViewDecoder::kMount, spec->options.decoder);
  EXPECT_TRUE(spec->options.gpu_fallback);
}

TEST(ViewOptionsTest, DecoderAndFallback) {
  auto gpu = ParseViewSpec("g:decoder=gpu,fallback=none");
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_EQ(ViewDecoder::kGpu, gpu->options.decoder);
  EXPECT_FALSE(gpu->options.gpu_fallback);
  auto cpu = ParseViewSpec("c:decoder=cpu,fallback=cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(ViewDecoder::kCpu, cpu->options.decoder);
  EXPECT_TRUE(cpu->options.gpu_fallback);
}

TEST(ViewOptionsTest, AllKeys) {
  auto spec = ParseViewSpec(
      "small:channels=3,dct=accurate,feature=jpeg,on_error=skip,max_pixels=5000,arithmetic=false,"
      "fancy_upsampling=false");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const ViewOptions& o = spec->options;
  EXPECT_EQ("small", spec->name);
  EXPECT_EQ(3, o.decode.channels);
  EXPECT_EQ(DctMethod::kAccurate, o.decode.dct);
  EXPECT_FALSE(o.decode.fancy_upsampling);
  EXPECT_EQ("jpeg", o.feature);
  EXPECT_EQ(OnError::kSkip, o.on_error);
  EXPECT_EQ(5000u, o.probe.max_pixels);
  EXPECT_FALSE(o.probe.allow_arithmetic);
}

TEST(ViewOptionsTest, Compression) {
  auto spec = ParseViewSpec("v");
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->options.compression.has_value());
  const std::string plain = spec->options.Fingerprint("cpu");
  for (auto [word, want] : {std::pair{"none", TfRecordCompression::kNone},
                            std::pair{"gzip", TfRecordCompression::kGzip},
                            std::pair{"zlib", TfRecordCompression::kZlib}}) {
    auto s = ParseViewSpec(std::string("v:compression=") + word);
    ASSERT_TRUE(s.ok()) << word;
    ASSERT_TRUE(s->options.compression.has_value()) << word;
    EXPECT_EQ(want, *s->options.compression) << word;
    EXPECT_NE(plain, s->options.Fingerprint("cpu")) << word;
  }
  // auto is the default, and names nothing: layouts made before stay valid.
  auto a = ParseViewSpec("v:compression=auto");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->options.compression.has_value());
  EXPECT_EQ(plain, a->options.Fingerprint("cpu"));
}

TEST(ViewOptionsTest, RatioAndMaxSide) {
  auto plain = ParseViewSpec("v");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(1, plain->options.decode.ratio);
  EXPECT_EQ(0u, plain->options.decode.max_side);
  EXPECT_EQ(nullptr, plain->options.CpuOnlyReason());
  // ratio=1 is the default, and names nothing: layouts made before stay valid.
  auto one = ParseViewSpec("v:ratio=1");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(plain->options.Fingerprint("cpu"), one->options.Fingerprint("cpu"));
  std::set<std::string> fingerprints = {plain->options.Fingerprint("cpu")};
  for (int r : {2, 4, 8}) {
    auto s = ParseViewSpec("v:ratio=" + std::to_string(r));
    ASSERT_TRUE(s.ok()) << r;
    EXPECT_EQ(r, s->options.decode.ratio);
    EXPECT_NE(nullptr, s->options.CpuOnlyReason());
    EXPECT_TRUE(fingerprints.insert(s->options.Fingerprint("cpu")).second) << r;
  }
  for (const char* side : {"224", "225"}) {
    auto s = ParseViewSpec(std::string("v:max_side=") + side);
    ASSERT_TRUE(s.ok()) << side;
    EXPECT_EQ(uint32_t(std::stoul(side)), s->options.decode.max_side);
    EXPECT_NE(nullptr, s->options.CpuOnlyReason());
    EXPECT_TRUE(fingerprints.insert(s->options.Fingerprint("cpu")).second) << side;
  }
  EXPECT_TRUE(ParseViewSpec("v:ratio=1,max_side=100").ok());
}

TEST(ViewOptionsTest, BadRatioNamesKeyAndValue) {
  for (const char* v : {"3", "0", "16", "-2", "", "2x", "half"}) {
    auto s = ParseViewSpec(std::string("v:ratio=") + v);
    ASSERT_FALSE(s.ok()) << v;
    EXPECT_EQ(EINVAL, s.status().code());
    EXPECT_EQ("view option ratio: '" + std::string(v) + "' is not 1, 2, 4 or 8",
              s.status().message());
  }
  auto both = ParseViewSpec("v:ratio=2,max_side=100");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(EINVAL, both.status().code());
  EXPECT_EQ("view options ratio=2 and max_side=100 exclude each other", both.status().message());
  for (const char* gpu : {"v:ratio=4,decoder=gpu", "v:decoder=gpu,max_side=64"}) {
    auto s = ParseViewSpec(gpu);
    ASSERT_FALSE(s.ok()) << gpu;
    EXPECT_EQ(EINVAL, s.status().code());
    EXPECT_EQ(0u, s.status().message().find("view option decoder=gpu: ")) << s.status().message();
  }
  EXPECT_TRUE(ParseViewSpec("v:ratio=4,decoder=cpu").ok());
  for (const char* v : {"0", "-1", "x", "", "4294967296"}) {
    auto s = ParseViewSpec(std::string("v:max_side=") + v);
    ASSERT_FALSE(s.ok()) << v;
    EXPECT_EQ(EINVAL, s.status().code());
    EXPECT_NE(std::string::npos, s.status().message().find("max_side")) << v;
  }
}

TEST(ViewOptionsTest, Errors) {
  for (const char* bad :
       {"", ":channels=3", "a/b", "..", "v:channels=2", "v:dct=slow", "v:on_error=ignore",
        "v:channels", "v:nosuch=1", "v:max_pixels=0", "v:max_pixels=12x",
        "v:feature=", "v:feature=image/height", "v:arithmetic=maybe", "v:decoder=auto",
        "v:decoder=cuda", "v:fallback=gpu", "v:compression=bz2", "v:compression="}) {
    auto spec = ParseViewSpec(bad);
    EXPECT_FALSE(spec.ok()) << bad;
    if (!spec.ok()) {
      EXPECT_EQ(EINVAL, spec.status().code()) << bad;
    }
  }
}

TEST(ViewOptionsTest, FingerprintNamesEveryInput) {
  ViewOptions base;
  const std::string f = base.Fingerprint("dec");
  EXPECT_NE(f, base.Fingerprint("dec2"));
  std::vector<ViewOptions> changed(9, base);
  changed[0].decode.channels = 3;
  changed[1].decode.dct = DctMethod::kAccurate;
  changed[2].decode.fancy_upsampling = false;
  changed[3].feature = "x";
  changed[4].on_error = OnError::kSkip;
  changed[5].probe.max_pixels = 1;
  changed[6].probe.allow_arithmetic = false;
  changed[7].decode.ratio = 2;
  changed[8].decode.max_side = 100;
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_NE(f, changed[i].Fingerprint("dec")) << i;
  }
}

// ViewOptionKeys() is what --help and docs/views.md are checked against: each
// key it lists takes each value it lists, and the parser takes no other key.
TEST(ViewOptionsTest, ListedKeysAreWhatTheParserTakes) {
  std::set<std::string> keys;
  for (const ViewOptionKey& k : ViewOptionKeys()) {
    keys.insert(std::string(k.key));
    std::string_view values = k.values;
    while (!values.empty()) {
      const size_t bar = values.find('|');
      std::string v(values.substr(0, bar));
      values = bar == std::string_view::npos ? "" : values.substr(bar + 1);
      if (v == "N") v = "640";
      if (v == "KEY") v = "jpeg";
      const std::string spec = "v:" + std::string(k.key) + "=" + v;
      auto parsed = ParseViewSpec(spec);
      EXPECT_TRUE(parsed.ok()) << spec << ": " << parsed.status().message();
    }
  }
  EXPECT_EQ(keys.size(), ViewOptionKeys().size()) << "a key listed twice";
  auto unknown = ParseViewSpec("v:chanels=3");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(EINVAL, unknown.status().code());
  const std::string& why = unknown.status().message();
  EXPECT_NE(why.find("unknown view option 'chanels'"), std::string::npos) << why;
  for (const std::string& k : keys) EXPECT_NE(why.find(k), std::string::npos) << k << ": " << why;
  EXPECT_NE(ViewOptionSyntax().find("ratio=1|2|4|8"), std::string::npos) << ViewOptionSyntax();
  EXPECT_NE(ViewOptionSyntax().find("max_side=N"), std::string::npos) << ViewOptionSyntax();
}

}  // namespace
}  // namespace stoker
