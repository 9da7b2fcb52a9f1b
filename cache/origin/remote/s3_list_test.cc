#include "cache/origin/remote/s3_list.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(S3ListTest, ParsesAPage) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>data/</Prefix><KeyCount>3</KeyCount><MaxKeys>2</MaxKeys>"
      "<Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
      "<Contents><Key>data/a &amp; b.bin</Key><LastModified>2026-12-03T12:00:00.000Z"
      "</LastModified><ETag>&quot;0cc175b9c0f1b6a831c399e269772661&quot;</ETag>"
      "<Size>1234</Size><StorageClass>STANDARD</StorageClass></Contents>"
      "<Contents><Key>data/empty</Key><LastModified>2026-12-03T12:00:01Z</LastModified>"
      "<ETag>\"d41d8cd98f00b204e9800998ecf8427e\"</ETag><Size>0</Size></Contents>"
      "<CommonPrefixes><Prefix>data/sub/</Prefix></CommonPrefixes>"
      "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
      "</ListBucketResult>";
  Result<S3ListPage> p = ParseListObjectsV2(xml);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->objects.size(), 2u);
  EXPECT_EQ(p->objects[0].key, "data/a & b.bin");
  EXPECT_EQ(p->objects[0].size, 1234u);
  EXPECT_EQ(p->objects[0].etag, "\"0cc175b9c0f1b6a831c399e269772661\"");
  EXPECT_EQ(p->objects[0].mtime, 1796299200);
  EXPECT_EQ(p->objects[1].size, 0u);
  EXPECT_EQ(p->objects[1].mtime, 1796299201);
  ASSERT_EQ(p->prefixes.size(), 1u);
  EXPECT_EQ(p->prefixes[0], "data/sub/");
  EXPECT_TRUE(p->truncated);
  EXPECT_EQ(p->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(S3ListTest, LastPageAndEmptyPage) {
  Result<S3ListPage> p = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount>"
      "</ListBucketResult>");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->truncated);
  EXPECT_TRUE(p->objects.empty());
}

TEST(S3ListTest, RefusesWhatIsNotAListing) {
  EXPECT_EQ(ParseListObjectsV2("<Error><Code>NoSuchBucket</Code></Error>").status().code(),
            EBADMSG);
  EXPECT_EQ(ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated>"
                               "</ListBucketResult>")
                .status()
                .code(),
            EBADMSG);
  EXPECT_EQ(ParseListObjectsV2("<ListBucketResult><Contents><Key>k</Key></Contents>"
                               "</ListBucketResult>")
                .status()
                .code(),
            EBADMSG);
  EXPECT_EQ(ParseListObjectsV2("<html>").status().code(), EBADMSG);
}

TEST(S3ListTest, UrlEncodedKeysAreDecoded) {
  Result<S3ListPage> p = ParseListObjectsV2(
      "<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
      "<Contents><Key>train/a+b%2Bc%01.rec</Key><Size>3</Size></Contents>"
      "<CommonPrefixes><Prefix>train/sub%20dir/</Prefix></CommonPrefixes></ListBucketResult>");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->objects.size(), 1u);
  EXPECT_EQ(p->objects[0].key, std::string("train/a b+c\x01.rec"));
  EXPECT_EQ(p->prefixes, std::vector<std::string>{"train/sub dir/"});
  // Without EncodingType (a server that ignores the parameter) keys are as listed.
  p = ParseListObjectsV2(
      "<ListBucketResult><Contents><Key>a+b</Key><Size>1</Size></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->objects[0].key, "a+b");
  EXPECT_FALSE(ParseListObjectsV2("<ListBucketResult><EncodingType>url</EncodingType><Contents>"
                                  "<Key>a%zz</Key><Size>1</Size></Contents></ListBucketResult>")
                   .ok());
}

TEST(S3ListTest, ErrorCode) {
  EXPECT_EQ(S3ErrorCode("<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                        "<Message>Please reduce your request rate.</Message></Error>"),
            "SlowDown");
  EXPECT_EQ(S3ErrorCode(""), "");
  EXPECT_EQ(S3ErrorCode("<ListBucketResult/>"), "");
}

}  // namespace
}  // namespace stoker
