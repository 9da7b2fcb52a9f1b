#include "group/rendezvous.h"

#include "util/checksum.h"
#include "util/status.h"

namespace stoker {
namespace {

void AppendField(std::string& out, std::string_view field) {
  const uint64_t n = field.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(field);
}

void AppendU64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

uint64_t ExtentDigest(const ExtentKey& key) {
  std::string bytes;
  bytes.reserve(key.path.size() + key.version.size() + 32);
  AppendField(bytes, key.path);
  AppendU64(bytes, key.size);
  AppendField(bytes, key.version);
  AppendU64(bytes, key.index);
  return ChunkChecksum(bytes.data(), bytes.size());
}

uint64_t MemberDigest(std::string_view member) {
  return ChunkChecksum(member.data(), member.size());
}

uint64_t RendezvousWeight(uint64_t extent_digest, uint64_t member_digest) {
  // splitmix64's finalizer over the pair: every bit of both moves the weight.
  uint64_t z = extent_digest ^ (member_digest * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

size_t OwnerOf(const ExtentKey& key, const std::vector<std::string>& members) {
  STOKER_CHECK(!members.empty(), "an owner among no members");
  const uint64_t digest = ExtentDigest(key);
  size_t best = 0;
  uint64_t best_weight = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const uint64_t w = RendezvousWeight(digest, MemberDigest(members[i]));
    // Ties (never seen in practice) go to the smaller name, so that every
    // member picks the same one whatever the list's order.
    if (i == 0 || w > best_weight || (w == best_weight && members[i] < members[best])) {
      best = i;
      best_weight = w;
    }
  }
  return best;
}

}  // namespace stoker
