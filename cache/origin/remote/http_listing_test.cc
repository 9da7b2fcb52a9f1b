#include "cache/origin/remote/http_listing.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(AutoindexTest, Json) {
  Result<std::vector<RemoteEntry>> r = ParseAutoindex("application/json", R"([
{ "name":"sub dir", "type":"directory", "mtime":"Thu, 03 Dec 2026 12:00:00 GMT" },
{ "name":"a&b.bin", "type":"file", "mtime":"Thu, 03 Dec 2026 12:00:01 GMT", "size":1234 },
{ "name":"link", "type":"other", "mtime":"Thu, 03 Dec 2026 12:00:01 GMT" },
{ "name":"..", "type":"directory", "mtime":"Thu, 03 Dec 2026 12:00:01 GMT" }
])");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "sub dir");
  EXPECT_TRUE((*r)[0].is_dir);
  EXPECT_EQ((*r)[1].name, "a&b.bin");
  EXPECT_EQ((*r)[1].size, 1234u);
  EXPECT_EQ((*r)[1].mtime, 1796299201);
  EXPECT_EQ(ParseAutoindexJson("{}").status().code(), EBADMSG);
  EXPECT_EQ(ParseAutoindexJson("[{\"name\":\"f\",\"type\":\"file\"}]").status().code(), EBADMSG);
}

TEST(AutoindexTest, Html) {
  const std::string html =
      "<html>\r\n<head><title>Index of /d/</title></head>\r\n<body>\r\n"
      "<h1>Index of /d/</h1><hr><pre><a href=\"../\">../</a>\r\n"
      "<a href=\"sub%20dir/\">sub dir/</a>                                          "
      "03-Dec-2026 12:00                   -\r\n"
      "<a href=\"a%26b.bin\">a&amp;b.bin</a>                                        "
      "03-Dec-2026 12:01                1234\r\n"
      "<a href=\"%E6%97%A5%E6%9C%AC%E8%AA%9E%E3%83%95%E3%82%A1%E3%82%A4%E3%83%AB%E5%90%8D%E3%81"
      "%8C%E3%81%A8%E3%81%A6%E3%82%82%E9%95%B7%E3%81%84.txt\">&#26085;&#26412;..&gt;</a> "
      "03-Dec-2026 12:02                   0\r\n"
      "</pre><hr></body>\r\n</html>\r\n";
  Result<std::vector<RemoteEntry>> r = ParseAutoindex("text/html", html);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "sub dir");
  EXPECT_TRUE((*r)[0].is_dir);
  EXPECT_EQ((*r)[1].name, "a&b.bin");
  EXPECT_EQ((*r)[1].size, 1234u);
  EXPECT_EQ((*r)[1].mtime, 1796299260);
  EXPECT_EQ((*r)[2].name,
            "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x83\x95\xe3\x82\xa1\xe3\x82\xa4\xe3\x83\xab"
            "\xe5\x90\x8d\xe3\x81\x8c\xe3\x81\xa8\xe3\x81\xa6\xe3\x82\x82\xe9\x95\xb7\xe3\x81\x84"
            ".txt");
  EXPECT_EQ((*r)[2].size, 0u);
}

TEST(AutoindexTest, HtmlWithoutExactSizesIsRefused) {
  EXPECT_EQ(ParseAutoindexHtml("<a href=\"f\">f</a> 03-Dec-2026 12:00  1.2M\n").status().code(),
            EBADMSG);
}

// Found by remote_listing_fuzz (hostile-input part): a size of more than 64
// bits made std::stoull throw, which would have ended the daemon.
TEST(AutoindexTest, HtmlSizeBeyond64BitsIsRefused) {
  EXPECT_EQ(ParseAutoindexHtml("<a href=\"f\">f</a> 03-Dec-2026 12:00  184467440737095516160\n")
                .status()
                .code(),
            EBADMSG);
  Result<std::vector<RemoteEntry>> max =
      ParseAutoindexHtml("<a href=\"f\">f</a> 03-Dec-2026 12:00  9999999999999999999\n");
  ASSERT_TRUE(max.ok()) << max.status().message();
  EXPECT_EQ((*max)[0].size, 9999999999999999999ull);
}

TEST(ManifestTest, BuildsTheTree) {
  Result<Manifest> m = Manifest::Parse(
      "# comment\n\ntrain/shard 0.tfrecord 100\n/train/shard-1 200\r\n./val/x/y 0\ntop 5\n");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->files(), 4u);
  ASSERT_NE(m->Dir(""), nullptr);
  std::vector<std::string> root;
  for (const RemoteEntry& e : *m->Dir("")) root.push_back(e.name + (e.is_dir ? "/" : ""));
  EXPECT_EQ(root, (std::vector<std::string>{"train/", "val/", "top"}));
  ASSERT_NE(m->Find("train/shard 0.tfrecord"), nullptr);
  EXPECT_EQ(m->Find("train/shard 0.tfrecord")->size, 100u);
  EXPECT_EQ(m->Find("train/shard-1")->size, 200u);
  EXPECT_TRUE(m->Find("val/x")->is_dir);
  EXPECT_EQ(m->Dir("val/x")->size(), 1u);
  EXPECT_EQ(m->Find("nope"), nullptr);
  EXPECT_EQ(m->Dir("top"), nullptr);
  EXPECT_EQ(m->first_file(), "train/shard 0.tfrecord");
}

TEST(ManifestTest, RefusesBadLines) {
  for (const char* bad : {"nosize\n", "f x\n", "a/../b 1\n", "f 1\nf 2\n", "a 1\na/b 2\n",
                          "a/b 2\na 1\n", "a//b 1\n", "/ 1\n"}) {
    Result<Manifest> m = Manifest::Parse(bad);
    EXPECT_EQ(m.status().code(), EINVAL) << bad;
    EXPECT_NE(m.status().message().find("manifest line"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace stoker
