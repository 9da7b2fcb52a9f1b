#include "group/peer_protocol.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "cache/origin/remote/url.h"
#include "util/checksum.h"

namespace stoker {
namespace {

std::optional<uint64_t> ParseU64(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string VersionTag(const OriginIdentity& id) {
  std::string tag = "m" + std::to_string(id.mtime_ns);
  if (id.dev == 0) tag += ".c" + std::to_string(id.ctime_ns);
  return tag;
}

std::string ExtentTarget(const ExtentRequest& r) {
  return std::string(kExtentPathPrefix) + PercentEncode(r.path, /*keep_slash=*/true) +
         "?group=" + PercentEncode(r.group, false) + "&size=" + std::to_string(r.size) +
         "&version=" + PercentEncode(r.version, false);
}

Status ParseExtentRequest(std::string_view encoded_path, std::string_view group,
                          std::string_view size, std::string_view version, std::string_view range,
                          ExtentRequest* r) {
  if (!PercentDecode(encoded_path, &r->path) || !IsPlainRelativePath(r->path) || r->path.empty()) {
    return Status::Invalid("the path is not an origin file's");
  }
  if (group.empty()) return Status::Invalid("no group");
  r->group = std::string(group);
  std::optional<uint64_t> s = ParseU64(size);
  if (!s) return Status::Invalid("no size");
  r->size = *s;
  if (version.empty()) return Status::Invalid("no version");
  r->version = std::string(version);
  // "bytes=FIRST-LAST", one range.
  constexpr std::string_view kBytes = "bytes=";
  if (range.substr(0, kBytes.size()) != kBytes) return Status::Invalid("no byte range");
  range.remove_prefix(kBytes.size());
  const size_t dash = range.find('-');
  if (dash == std::string_view::npos) return Status::Invalid("a malformed range");
  std::optional<uint64_t> first = ParseU64(range.substr(0, dash));
  std::optional<uint64_t> last = ParseU64(range.substr(dash + 1));
  if (!first || !last || *last < *first) return Status::Invalid("a malformed range");
  r->offset = *first;
  r->length = *last - *first + 1;
  return Status::OK();
}

std::string EncodeChecksums(const char* data, size_t len) {
  std::string out = std::to_string(kChecksumPiece) + ";";
  for (size_t off = 0; off < len; off += kChecksumPiece) {
    if (off != 0) out += ',';
    out += Hex(ChunkChecksum(data + off, std::min(kChecksumPiece, len - off)));
  }
  return out;
}

bool ChecksumsMatch(std::string_view header, const char* data, size_t len) {
  const size_t semi = header.find(';');
  if (semi == std::string_view::npos) return false;
  std::optional<uint64_t> piece = ParseU64(header.substr(0, semi));
  if (!piece || *piece == 0) return false;
  std::string_view rest = header.substr(semi + 1);
  size_t off = 0;
  while (off < len) {
    const size_t comma = std::min(rest.find(','), rest.size());
    const std::string_view hex = rest.substr(0, comma);
    uint64_t want = 0;
    auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), want, 16);
    if (hex.size() != 16 || ec != std::errc() || end != hex.data() + hex.size()) return false;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(*piece, len - off));
    if (ChunkChecksum(data + off, n) != want) return false;
    off += n;
    rest.remove_prefix(std::min(comma + 1, rest.size()));
    if (off < len && comma == hex.size() && rest.empty()) return false;  // too few
  }
  return rest.empty();  // none left over
}

}  // namespace stoker
