#include "cache/s3_list.h"

#include "cache/http_date.h"
#include "cache/xml.h"

namespace stoker {

Result<S3ListPage> ParseListObjectsV2(const std::string& xml) {
  STOKER_ASSIGN_OR_RETURN(XmlNode root, ParseXml(xml));
  if (root.name != "ListBucketResult") {
    return Status::Corruption("not a ListObjectsV2 result: <" + root.name + ">");
  }
  S3ListPage page;
  for (const XmlNode& c : root.children) {
    if (c.name == "Contents") {
      S3Object o;
      o.key = c.ChildText("Key");
      std::string size = c.ChildText("Size");
      if (o.key.empty() || size.empty() || size.size() > 19 ||
          size.find_first_not_of("0123456789") != std::string::npos) {
        return Status::Corruption("ListObjectsV2: an object without a key or size");
      }
      o.size = std::stoull(size);
      o.mtime = ParseIso8601(c.ChildText("LastModified")).value_or(0);
      o.etag = c.ChildText("ETag");
      page.objects.push_back(std::move(o));
    } else if (c.name == "CommonPrefixes") {
      std::string p = c.ChildText("Prefix");
      if (!p.empty()) page.prefixes.push_back(std::move(p));
    }
  }
  page.truncated = root.ChildText("IsTruncated") == "true";
  page.next_token = root.ChildText("NextContinuationToken");
  if (page.truncated && page.next_token.empty()) {
    return Status::Corruption("ListObjectsV2: truncated without a continuation token");
  }
  return page;
}

std::string S3ErrorCode(const std::string& xml) {
  Result<XmlNode> root = ParseXml(xml);
  if (!root.ok() || root->name != "Error") return "";
  return root->ChildText("Code");
}

}  // namespace stoker
