// The S3 answers an S3 origin reads: ListObjectsV2 pages and error
// documents (<Error><Code>NoSuchBucket</Code>...).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace stoker {

struct S3Object {
  std::string key;
  uint64_t size = 0;
  int64_t mtime = 0;  // LastModified, whole seconds
  std::string etag;   // with its quotes, as HEAD sends it
};

struct S3ListPage {
  std::vector<S3Object> objects;
  std::vector<std::string> prefixes;  // CommonPrefixes, each ending in the delimiter
  bool truncated = false;
  std::string next_token;  // NextContinuationToken when truncated
};

// A ListObjectsV2 result document. EBADMSG if it is not one (or a truncated
// page without a continuation token).
Result<S3ListPage> ParseListObjectsV2(const std::string& xml);

// The Code of an S3 error document, or "".
std::string S3ErrorCode(const std::string& xml);

}  // namespace stoker
