// Fluid's ThinRuntime config to `stoker mount`'s arguments, with configs
// shaped as Fluid writes them (pkg/ddc/thin/transform_config.go).
#include "mount-tools/fluid_config.h"

#include <gtest/gtest.h>

#include <map>

namespace stoker {
namespace {

using Args = std::vector<std::string>;

FluidDefaults Defaults(std::map<std::string, std::string> files = {}) {
  FluidDefaults d;
  d.read_file = [files](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return Status::Error(ENOENT, "No such file or directory");
    return it->second;
  };
  return d;
}

TEST(FluidConfigTest, ALocalDatasetWithRuntimeAndMountOptions) {
  const std::string config = R"({
    "mounts": [{"mountPoint": "local:///mnt/nas/imagenet", "name": "imagenet",
                "options": {"cache-size": "50G", "view": "jpeg:prefix=train", "revalidate": "never"},
                "readOnly": true}],
    "targetPath": "/runtime-mnt/thin/default/imagenet/thin-fuse",
    "runtimeOptions": {"cache-size": "200G", "peers": "dns:stoker-peers:7070",
                       "peer_token_file": "/etc/stoker/token", "no-supervise": "false",
                       "no_direct_io": "true"},
    "persistentVolumeAttrs": {}, "accessModes": ["ReadOnlyMany"]})";
  Result<FluidMount> m = FluidMountOf(config, Defaults());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->target, "/runtime-mnt/thin/default/imagenet/thin-fuse");
  // Sorted by key; the mount's cache-size wins over the runtime's.
  EXPECT_EQ(
      m->args,
      (Args{"mount", "/mnt/nas/imagenet", "/runtime-mnt/thin/default/imagenet/thin-fuse",
            "--foreground", "--cache", "/var/cache/stoker", "--cache-size", "50G", "--no-direct-io",
            "--peer-token-file", "/etc/stoker/token", "--peers", "dns:stoker-peers:7070",
            "--revalidate", "never", "--view", "jpeg:prefix=train", "-o", "allow_other"}));
  EXPECT_TRUE(m->env.empty());
}

TEST(FluidConfigTest, S3CredentialsComeFromFluidsSecretFilesOrInline) {
  const std::string config = R"({
    "mounts": [{"mountPoint": "s3://bucket/imagenet",
                "options": {"s3-endpoint": "http://minio:9000", "s3-path-style": "true",
                            "aws-access-key-id": "/etc/fluid/secrets/s3/id",
                            "aws-secret-access-key": "/etc/fluid/secrets/s3/secret",
                            "aws-region": "eu-west-1", "allow_other": "false",
                            "cache": "/ssd/stoker"}}],
    "targetPath": "/mnt/t"})";
  Result<FluidMount> m =
      FluidMountOf(config, Defaults({{"/etc/fluid/secrets/s3/id", "AKIAEXAMPLE\n"},
                                     {"/etc/fluid/secrets/s3/secret", "s3cr3t"}}));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->args,
            (Args{"mount", "s3://bucket/imagenet", "/mnt/t", "--foreground", "--cache",
                  "/ssd/stoker", "--s3-endpoint", "http://minio:9000", "--s3-path-style"}));
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(m->env, (Env{{"AWS_ACCESS_KEY_ID", "AKIAEXAMPLE"},
                         {"AWS_REGION", "eu-west-1"},
                         {"AWS_SECRET_ACCESS_KEY", "s3cr3t"}}));
}

TEST(FluidConfigTest, OriginsAsFluidNamesThem) {
  for (const auto& [point, origin] : std::vector<std::pair<std::string, std::string>>{
           {"/data", "/data"},
           {"local:///data/x", "/data/x"},
           {"https://host/base/", "https://host/base/"},
           {"http://host/b/", "http://host/b/"}}) {
    Result<FluidMount> m = FluidMountOf(
        R"({"mounts":[{"mountPoint":")" + point + R"("}],"targetPath":"/t"})", Defaults());
    ASSERT_TRUE(m.ok()) << point << ": " << m.status().message();
    EXPECT_EQ(m->args[1], origin);
  }
}

TEST(FluidConfigTest, ValuesNameEnvironmentVariables) {
  FluidDefaults d = Defaults();
  d.getenv = [](const char* name) -> const char* {
    return std::string(name) == "POD_IP" ? "10.1.2.3" : nullptr;
  };
  const std::string config = R"({"mounts":[{"mountPoint":"/d"}],"targetPath":"/t",
      "runtimeOptions":{"peers":"dns:g:7070","peer-advertise":"${POD_IP}:7070"}})";
  Result<FluidMount> m = FluidMountOf(config, d);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->args[6], "--peer-advertise");
  EXPECT_EQ(m->args[7], "10.1.2.3:7070");
  for (const std::string& bad : {"${NODE}:1", "${POD_IP:1", "${}:1"}) {
    Result<FluidMount> b = FluidMountOf(
        R"({"mounts":[{"mountPoint":"/d"}],"targetPath":"/t","runtimeOptions":{"peer-advertise":")" +
            bad + R"("}})",
        d);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("runtimeOptions option 'peer-advertise'"),
              std::string::npos)
        << b.status().message();
  }
}

// Every bad config is one line that names the field.
TEST(FluidConfigTest, BadConfigsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not JSON"},
      {"[1]", "not a JSON object"},
      {R"({"targetPath":"/t"})", "mounts is missing"},
      {R"({"mounts":[],"targetPath":"/t"})", "mounts is missing or empty"},
      {R"({"mounts":[{"mountPoint":"/a"},{"mountPoint":"/b"}],"targetPath":"/t"})",
       "one mount per Dataset"},
      {R"({"mounts":[{"name":"x"}],"targetPath":"/t"})", "mounts[0].mountPoint is missing"},
      {R"({"mounts":[{"mountPoint":7}],"targetPath":"/t"})",
       "mounts[0].mountPoint is not a string"},
      {R"({"mounts":[{"mountPoint":"/a"}]})", "targetPath is missing"},
      {R"({"mounts":[{"mountPoint":"/a"}],"targetPath":"rel"})", "not an absolute path"},
      {R"({"mounts":[{"mountPoint":"pvc://claim"}],"targetPath":"/t"})",
       "through the profile's volumes"},
      {R"({"mounts":[{"mountPoint":"oss://b"}],"targetPath":"/t"})", "is not a path, local://"},
      {R"({"mounts":[{"mountPoint":"local://rel"}],"targetPath":"/t"})",
       "absolute path after local://"},
      {R"({"mounts":[{"mountPoint":"/a","options":{"cache-siz":"1G"}}],"targetPath":"/t"})",
       "mounts[0].options option 'cache-siz' is not a stoker mount option"},
      {R"({"mounts":[{"mountPoint":"/a"}],"targetPath":"/t","runtimeOptions":{"reset":"yes"}})",
       "runtimeOptions option 'reset' is true or false, not 'yes'"},
      {R"({"mounts":[{"mountPoint":"/a","options":{"cache-size":""}}],"targetPath":"/t"})",
       "option 'cache-size' needs a value"},
      {R"({"mounts":[{"mountPoint":"/a","options":{"cache-size":5}}],"targetPath":"/t"})",
       "option 'cache-size' is not a string"},
      {R"({"mounts":[{"mountPoint":"/a","options":[1]}],"targetPath":"/t"})",
       "mounts[0].options is not an object"},
      {R"({"mounts":[{"mountPoint":"s3://b","options":{"aws-access-key-id":"/etc/fluid/secrets/s/k"}}],"targetPath":"/t"})",
       "secret file /etc/fluid/secrets/s/k: No such file"},
  };
  for (const auto& [config, want] : cases) {
    Result<FluidMount> m = FluidMountOf(config, Defaults());
    ASSERT_FALSE(m.ok()) << config;
    EXPECT_NE(m.status().message().find(want), std::string::npos)
        << config << " gave: " << m.status().message();
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace stoker
