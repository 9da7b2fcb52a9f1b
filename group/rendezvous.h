// Which member of a cache group owns a span of an object version: rendezvous
// (highest-random-weight) hashing over a key every member computes alike, so
// that all members agree on an owner without talking, and a member joining
// or leaving moves only the extents it wins or held (about 1/N of them).
//
// An extent is kExtentBytes of one version of one origin file (a smaller
// file is one extent): large enough that a file's run still reaches the
// origin as one ranged read, small enough that a large file's extents spread
// over the group. The key names the version as the origin shows it (path in
// the origin's tree, size, and mtime in ns or the ETag), never a node-local
// id: NFS clients see different devices and inodes for one file.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stoker {

inline constexpr uint64_t kExtentBytes = 64ull << 20;

struct ExtentKey {
  std::string path;     // in the origin's tree ("a/b.tfrecord")
  uint64_t size = 0;    // of the version
  std::string version;  // the version's tag: its ETag, or its mtime in ns as text
  uint64_t index = 0;   // which extent: offset / kExtentBytes

  bool operator==(const ExtentKey&) const = default;
};

// The extent that holds byte offset off of a version.
inline uint64_t ExtentIndexOf(uint64_t off) { return off / kExtentBytes; }

// A 64-bit digest of key: its fields framed by length, so no two keys share
// an encoding.
uint64_t ExtentDigest(const ExtentKey& key);
// A member's name as a hash input (its advertised HOST:PORT).
uint64_t MemberDigest(std::string_view member);
// The weight of member for the extent: the largest wins.
uint64_t RendezvousWeight(uint64_t extent_digest, uint64_t member_digest);

// The index in members of key's owner. REQUIRES: members is not empty.
// Members are named as they advertise themselves; their order and
// duplicates do not matter to the answer.
size_t OwnerOf(const ExtentKey& key, const std::vector<std::string>& members);

}  // namespace stoker
