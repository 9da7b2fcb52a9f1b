#include "cache/origin/remote/s3_list.h"

#include "cache/origin/remote/http_date.h"
#include "cache/origin/remote/url.h"
#include "cache/origin/remote/xml.h"

namespace stoker {
namespace {

// A key as listed with encoding-type=url: '+' is a space, %XX a byte (as
// botocore decodes it). Keys may hold characters XML 1.0 cannot carry.
Result<std::string> UrlDecodedKey(const std::string& s) {
  std::string plus = s;
  for (char& c : plus) c = c == '+' ? ' ' : c;
  std::string out;
  if (!PercentDecode(plus, &out)) {
    return Status::Corruption("ListObjectsV2: a malformed url-encoded key '" + s + "'");
  }
  return out;
}

}  // namespace

Result<S3ListPage> ParseListObjectsV2(const std::string& xml) {
  STOKER_ASSIGN_OR_RETURN(XmlNode root, ParseXml(xml));
  if (root.name != "ListBucketResult") {
    return Status::Corruption("not a ListObjectsV2 result: <" + root.name + ">");
  }
  S3ListPage page;
  const bool url_encoded = root.ChildText("EncodingType") == "url";
  auto decoded = [&](const std::string& s) -> Result<std::string> {
    return url_encoded ? UrlDecodedKey(s) : Result<std::string>(s);
  };
  for (const XmlNode& c : root.children) {
    if (c.name == "Contents") {
      S3Object o;
      STOKER_ASSIGN_OR_RETURN(o.key, decoded(c.ChildText("Key")));
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
      STOKER_ASSIGN_OR_RETURN(std::string p, decoded(c.ChildText("Prefix")));
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
