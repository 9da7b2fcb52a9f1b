#include "cache/origin/remote/xml.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(XmlTest, ElementsTextAndEntities) {
  Result<XmlNode> r = ParseXml(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- c -->"
      "<R xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><A x='>'>a &amp; b</A>"
      "<B/><C><D>&lt;&gt;&quot;&apos;&#65;&#x263A;</D></C><E><![CDATA[<raw>]]></E></R>");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->name, "R");
  EXPECT_EQ(r->ChildText("A"), "a & b");
  ASSERT_NE(r->Child("B"), nullptr);
  EXPECT_EQ(r->Child("B")->text, "");
  EXPECT_EQ(r->Child("C")->ChildText("D"), "<>\"'A\xe2\x98\xba");
  EXPECT_EQ(r->ChildText("E"), "<raw>");
  EXPECT_EQ(r->Child("Z"), nullptr);
}

TEST(XmlTest, NamespacePrefixIsDropped) {
  Result<XmlNode> r = ParseXml("<s3:R><s3:K>v</s3:K></s3:R>");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "R");
  EXPECT_EQ(r->ChildText("K"), "v");
}

TEST(XmlTest, RefusesBrokenDocuments) {
  for (const char* bad :
       {"", "text", "<R>", "<R><A></R", "<R>&bogus;</R>", "<R>&#;</R>", "<R>&#xD800;</R>",
        "<R>&#0;</R>", "<R a=\"x></R>", "<R><A></B></R>", "<R><A>x</R></A>", "<R></S>"}) {
    EXPECT_EQ(ParseXml(bad).status().code(), EBADMSG) << bad;
  }
}

TEST(XmlTest, EndTagsMayCarrySpaceAndPrefix) {
  Result<XmlNode> r = ParseXml("<s3:R><K>v</K ><s3:L>w</s3:L></s3:R >");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->ChildText("K"), "v");
  EXPECT_EQ(r->ChildText("L"), "w");
}

TEST(XmlTest, DecodeEntities) {
  std::string out;
  ASSERT_TRUE(DecodeEntities("a&amp;b&#233;", &out));
  EXPECT_EQ(out, "a&b\xc3\xa9");
  EXPECT_FALSE(DecodeEntities("a&b", &out));
  EXPECT_FALSE(DecodeEntities("&#x110000;", &out));
}

}  // namespace
}  // namespace stoker
