// How the members of a cache group ask each other for bytes (HTTP/1.1):
//
//   GET /v1/extent/<origin path, percent-encoded>?group=<G>&size=<S>&version=<TAG>
//   Range: bytes=<first>-<last>       (within one extent, at most kMaxRequestBytes)
//   Authorization: Bearer <token>
//
// answered by
//   206  the bytes, and X-Stoker-Checksums: <piece>;<hex>,<hex>,... : the
//        checksum (util/checksum.h) of each consecutive piece of the body,
//        which the asker checks before it keeps a byte (a peer's disk or the
//        wire cannot slip a wrong byte in);
//   401  no token, or not the group's;
//   404  another group, or no such file at the owner's origin;
//   409  the owner sees another version (X-Stoker-Version: its tag): the
//        asker reads the origin itself, so versions never mix;
//   416  a range outside the version, or larger than allowed;
//   503  the owner is busy (its bound on requests) or cannot read the bytes;
//   400  anything malformed.
//
// The version is named as every member computes it from what the origin
// shows (VersionTag), never from node-local ids.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cache/origin/origin.h"
#include "util/status.h"

namespace stoker {

inline constexpr std::string_view kExtentPathPrefix = "/v1/extent/";
inline constexpr size_t kMaxRequestBytes = 16u << 20;
inline constexpr size_t kChecksumPiece = 1u << 20;
inline constexpr const char* kChecksumsHeader = "X-Stoker-Checksums";
inline constexpr const char* kVersionHeader = "X-Stoker-Version";

// A version's tag: its mtime in ns, and for a remote origin (no device:
// the ETag is in ctime) its ctime too. Equal tags and sizes: the same bytes.
std::string VersionTag(const OriginIdentity& id);

// What an extent request names.
struct ExtentRequest {
  std::string group;
  std::string path;  // origin path
  uint64_t size = 0;
  std::string version;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// The request target (path and query) for r; the range goes in a header.
std::string ExtentTarget(const ExtentRequest& r);
// Parses a target's path (after kExtentPathPrefix, still encoded) and its
// query arguments, and a Range header value, into r. EINVAL naming the
// field; the path must be a plain origin path (IsPlainRelativePath).
Status ParseExtentRequest(std::string_view encoded_path, std::string_view group,
                          std::string_view size, std::string_view version, std::string_view range,
                          ExtentRequest* r);

// The X-Stoker-Checksums value for the body data[0, len).
std::string EncodeChecksums(const char* data, size_t len);
// Whether header is the checksums of data[0, len); false for a malformed one.
bool ChecksumsMatch(std::string_view header, const char* data, size_t len);

}  // namespace stoker
