#include "group/peer_token.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "util/test_files.h"

namespace stoker {
namespace {

using testing::ScratchDir;
using testing::WriteFile;

TEST(PeerTokenTest, ReadsTheFirstLineAndComparesExactly) {
  ScratchDir d("peer-token");
  WriteFile(d.Sub("token"), "  s3cret-token-0123456789\nignored\n");
  auto t = PeerToken::Open(d.Sub("token"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->Current(), "s3cret-token-0123456789");
  EXPECT_TRUE((*t)->Matches("s3cret-token-0123456789"));
  for (const char* wrong : {"", "s3cret-token-012345678", "s3cret-token-01234567890",
                            "S3cret-token-0123456789", " s3cret-token-0123456789"}) {
    EXPECT_FALSE((*t)->Matches(wrong)) << wrong;
  }
}

TEST(PeerTokenTest, BadFilesAreRefusedNamingThem) {
  ScratchDir d("peer-token-bad");
  auto missing = PeerToken::Open(d.Sub("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ENOENT);
  EXPECT_NE(missing.status().message().find(d.Sub("nope")), std::string::npos);
  WriteFile(d.Sub("short"), "short\n");
  EXPECT_EQ(PeerToken::Open(d.Sub("short")).status().code(), EINVAL);
  WriteFile(d.Sub("empty"), "\n\n");
  EXPECT_EQ(PeerToken::Open(d.Sub("empty")).status().code(), EINVAL);
  WriteFile(d.Sub("long"), std::string(PeerToken::kMaxBytes + 1, 'x'));
  EXPECT_EQ(PeerToken::Open(d.Sub("long")).status().code(), EINVAL);
}

// A Secret rotated the way Kubernetes does it: a new file swapped in by a
// rename. The new token works at once; the old one for a grace period.
TEST(PeerTokenTest, ARotatedFileIsReadAgainAndTheOldTokenStaysAWhile) {
  ScratchDir d("peer-token-rotate");
  WriteFile(d.Sub("token"), "first-token-0123456789\n");
  auto t = std::move(PeerToken::Open(d.Sub("token"))).value();
  t->set_recheck_interval(std::chrono::seconds(0));
  WriteFile(d.Sub("token.new"), "second-token-0123456789\n");
  ASSERT_EQ(std::rename(d.Sub("token.new").c_str(), d.Sub("token").c_str()), 0);
  EXPECT_EQ(t->Current(), "second-token-0123456789");
  EXPECT_TRUE(t->Matches("second-token-0123456789"));
  EXPECT_TRUE(t->Matches("first-token-0123456789")) << "within the grace period";
  // A broken file keeps what was known.
  WriteFile(d.Sub("token.new"), "x\n");
  ASSERT_EQ(std::rename(d.Sub("token.new").c_str(), d.Sub("token").c_str()), 0);
  EXPECT_EQ(t->Current(), "second-token-0123456789");
  ASSERT_EQ(unlink(d.Sub("token").c_str()), 0);
  EXPECT_TRUE(t->Matches("second-token-0123456789"));
}

TEST(PeerTokenTest, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

}  // namespace
}  // namespace stoker
