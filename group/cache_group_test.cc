#include "group/cache_group.h"

#include <gtest/gtest.h>

#include "util/test_files.h"

namespace stoker {
namespace {

using testing::ScratchDir;
using testing::WriteFile;

TEST(CacheGroupTest, TheDefaultNameFollowsTheOriginAndTheChunkSize) {
  const std::string a = DefaultGroupName("/nas/imagenet", 1 << 20);
  EXPECT_EQ(a, DefaultGroupName("/nas/imagenet", 1 << 20));
  EXPECT_NE(a, DefaultGroupName("/nas/imagenet2", 1 << 20));
  EXPECT_NE(a, DefaultGroupName("/nas/imagenet", 4 << 20));
  EXPECT_EQ(a.size(), 17u);
}

TEST(CacheGroupTest, OptionsAreCheckedBeforeAnythingStarts) {
  ScratchDir d("cache-group");
  WriteFile(d.Sub("token"), "a-group-token-0123456789\n");
  std::shared_ptr<Origin> origin = MakeOrigin(d.path()).value();
  auto make = [&](GroupOptions o) {
    return CacheGroup::Make(o, origin, d.path(), 1 << 20, 30).status();
  };
  GroupOptions ok{"127.0.0.1:7001,127.0.0.1:7002", "127.0.0.1:7001", "", d.Sub("token"), ""};
  EXPECT_TRUE(make(ok).ok()) << make(ok).message();
  GroupOptions wildcard = ok;
  wildcard.listen = "0.0.0.0:7001";
  EXPECT_NE(make(wildcard).message().find("--peer-advertise"), std::string::npos);
  wildcard.advertise = "10.1.2.3:7001";
  EXPECT_TRUE(make(wildcard).ok());
  GroupOptions no_token = ok;
  no_token.token_file = "";
  EXPECT_EQ(make(no_token).code(), EINVAL);
  no_token.token_file = d.Sub("missing");
  EXPECT_EQ(make(no_token).code(), EINVAL);
  GroupOptions bad = ok;
  bad.peers = "nohostport";
  EXPECT_EQ(make(bad).code(), EINVAL);
}

}  // namespace
}  // namespace stoker
