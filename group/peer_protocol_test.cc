#include "group/peer_protocol.h"

#include <gtest/gtest.h>

#include <string>

namespace stoker {
namespace {

TEST(PeerProtocolTest, TargetsRoundTripAnyPath) {
  ExtentRequest r{"imagenet-1m", "train/a b/ü#?%x.jpg", 12345, "m17.c9", 0, 0};
  const std::string target = ExtentTarget(r);
  ASSERT_EQ(target.rfind(std::string(kExtentPathPrefix), 0), 0u) << target;
  EXPECT_EQ(target.find(' '), std::string::npos);
  const std::string path =
      target.substr(kExtentPathPrefix.size(), target.find('?') - kExtentPathPrefix.size());
  EXPECT_EQ(path.find('#'), std::string::npos);
  ExtentRequest back;
  ASSERT_TRUE(
      ParseExtentRequest(path, "imagenet-1m", "12345", "m17.c9", "bytes=100-199", &back).ok());
  EXPECT_EQ(back.path, r.path);
  EXPECT_EQ(back.size, 12345u);
  EXPECT_EQ(back.version, "m17.c9");
  EXPECT_EQ(back.offset, 100u);
  EXPECT_EQ(back.length, 100u);
}

TEST(PeerProtocolTest, MalformedRequestsAreRefused) {
  ExtentRequest r;
  EXPECT_FALSE(ParseExtentRequest("a%2F..%2Fb", "g", "1", "v", "bytes=0-0", &r).ok());
  EXPECT_FALSE(ParseExtentRequest("..", "g", "1", "v", "bytes=0-0", &r).ok());
  EXPECT_FALSE(ParseExtentRequest("", "g", "1", "v", "bytes=0-0", &r).ok());
  EXPECT_FALSE(ParseExtentRequest("a%zz", "g", "1", "v", "bytes=0-0", &r).ok());
  EXPECT_FALSE(ParseExtentRequest("a", "", "1", "v", "bytes=0-0", &r).ok());
  EXPECT_FALSE(ParseExtentRequest("a", "g", "x", "v", "bytes=0-0", &r).ok());
  EXPECT_FALSE(ParseExtentRequest("a", "g", "1", "", "bytes=0-0", &r).ok());
  for (const char* range : {"", "0-1", "bytes=1-0", "bytes=-5", "bytes=5-", "bytes=0-1,4-5"}) {
    EXPECT_FALSE(ParseExtentRequest("a", "g", "1", "v", range, &r).ok()) << range;
  }
}

TEST(PeerProtocolTest, VersionTagsNameWhatEveryMemberSees) {
  OriginIdentity local{100, 5, 6, 7, 8, ""};
  OriginIdentity other_client = local;
  other_client.ino = 99;  // another NFS client's inode and device
  other_client.dev = 3;
  other_client.ctime_ns = 7;  // a chmod
  EXPECT_EQ(VersionTag(local), VersionTag(other_client));
  OriginIdentity remote{100, 5, 6, 0, 0, ""};  // the ETag is in ctime
  OriginIdentity reuploaded = remote;
  reuploaded.ctime_ns = 60;
  EXPECT_NE(VersionTag(remote), VersionTag(reuploaded));
  OriginIdentity touched = local;
  touched.mtime_ns = 6;
  EXPECT_NE(VersionTag(local), VersionTag(touched));
}

TEST(PeerProtocolTest, ChecksumsCatchAnyChangedByte) {
  std::string data(3 * kChecksumPiece + 17, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + 7);
  const std::string header = EncodeChecksums(data.data(), data.size());
  EXPECT_TRUE(ChecksumsMatch(header, data.data(), data.size()));
  for (size_t at : {size_t{0}, kChecksumPiece, data.size() - 1}) {
    std::string bad = data;
    bad[at] ^= 1;
    EXPECT_FALSE(ChecksumsMatch(header, bad.data(), bad.size())) << at;
  }
  EXPECT_FALSE(ChecksumsMatch(header, data.data(), data.size() - 1)) << "short body";
  EXPECT_FALSE(ChecksumsMatch(header, data.data(), data.size() - 17)) << "a piece missing";
  EXPECT_FALSE(ChecksumsMatch(header + ",0000000000000000", data.data(), data.size()));
  EXPECT_FALSE(ChecksumsMatch("", data.data(), data.size()));
  EXPECT_FALSE(ChecksumsMatch("0;", data.data(), data.size()));
  EXPECT_FALSE(ChecksumsMatch("1048576;xyz", data.data(), data.size()));
  EXPECT_TRUE(ChecksumsMatch(EncodeChecksums(data.data(), 0), data.data(), 0));
}

}  // namespace
}  // namespace stoker
