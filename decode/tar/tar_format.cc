#include "decode/tar/tar_format.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "util/path.h"

namespace stoker {
namespace {

// Header fields: offset and length.
struct Field {
  size_t at, len;
};
constexpr Field kName{0, 100};
constexpr Field kSize{124, 12};
constexpr Field kChecksum{148, 8};
constexpr size_t kTypeAt = 156;
constexpr Field kMagic{257, 8};  // with the version
constexpr Field kPrefix{345, 155};
constexpr size_t kGnuSparseExtendedAt = 482;

constexpr std::string_view kPosixMagic("ustar\0", 6);
constexpr std::string_view kGnuMagic("ustar  \0", 8);

Status Bad(uint64_t offset, const std::string& what) {
  return Status::Corruption("tar: " + what + " at offset " + std::to_string(offset));
}

std::string_view FieldOf(const uint8_t* block, Field f) {
  return {reinterpret_cast<const char*>(block) + f.at, f.len};
}

// A NUL-terminated string in a field (the whole field if it has no NUL).
std::string_view Terminated(std::string_view s) { return s.substr(0, s.find('\0')); }

bool IsExtension(char type) { return type == 'x' || type == 'X' || type == 'L' || type == 'K'; }

// Link, device, directory and fifo members carry no data whatever their
// size field says (as Python's tarfile and GNU tar read them).
bool HasData(char type) { return !(type >= '1' && type <= '6'); }

// Octal (leading spaces, ended by a space or NUL), or GNU base-256.
std::optional<uint64_t> ParseNumber(std::string_view f) {
  const auto* u = reinterpret_cast<const uint8_t*>(f.data());
  if (u[0] & 0x80) {
    if (u[0] != 0x80) return std::nullopt;  // negative
    uint64_t v = 0;
    for (size_t i = 1; i < f.size(); ++i) {
      if (v >> 56) return std::nullopt;
      v = (v << 8) | u[i];
    }
    return v;
  }
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  uint64_t v = 0;
  for (; i < f.size() && f[i] != ' ' && f[i] != '\0'; ++i) {
    if (f[i] < '0' || f[i] > '7' || (v >> 61)) return std::nullopt;
    v = v * 8 + static_cast<uint64_t>(f[i] - '0');
  }
  for (; i < f.size(); ++i) {
    if (f[i] != ' ' && f[i] != '\0') return std::nullopt;
  }
  return v;
}

// The sum of the block's bytes with the checksum field as spaces, as
// unsigned bytes and (old writers) as signed ones.
std::pair<uint64_t, int64_t> Sums(const uint8_t* block) {
  uint64_t u = 0;
  int64_t s = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    const bool in_sum = i >= kChecksum.at && i < kChecksum.at + kChecksum.len;
    const uint8_t b = in_sum ? ' ' : block[i];
    u += b;
    s += static_cast<int8_t>(b);
  }
  return {u, s};
}

bool ChecksumOk(const uint8_t* block) {
  auto stored = ParseNumber(FieldOf(block, kChecksum));
  if (!stored) return false;
  auto [u, s] = Sums(block);
  return *stored == u || static_cast<int64_t>(*stored) == s;
}

bool AllZero(const uint8_t* block) {
  return std::all_of(block, block + kTarBlock, [](uint8_t b) { return b == 0; });
}

}  // namespace

void SealTarHeader(uint8_t* block) {
  const uint64_t sum = Sums(block).first;
  char digits[8];
  std::snprintf(digits, sizeof(digits), "%06o", static_cast<unsigned>(sum));
  std::memcpy(block + kChecksum.at, digits, 6);
  block[kChecksum.at + 6] = '\0';
  block[kChecksum.at + 7] = ' ';
}

namespace {

void PutSize(uint8_t* block, uint64_t size) {
  uint8_t* f = block + kSize.at;
  if (size < (uint64_t{1} << 33)) {  // 11 octal digits
    char digits[16];
    std::snprintf(digits, sizeof(digits), "%011llo", static_cast<unsigned long long>(size));
    std::memcpy(f, digits, 11);
    f[11] = '\0';
    return;
  }
  std::memset(f, 0, kSize.len);
  f[0] = 0x80;
  for (size_t i = kSize.len - 1; size != 0; --i, size >>= 8) f[i] = static_cast<uint8_t>(size);
}

struct PaxRecord {
  std::string key, value;
};

// "LEN key=value\n" records; false if one is malformed.
bool ParsePax(std::string_view data, std::vector<PaxRecord>* out) {
  while (!data.empty()) {
    const size_t space = data.find(' ');
    if (space == 0 || space == std::string_view::npos || space > 20) return false;
    uint64_t len = 0;
    for (size_t i = 0; i < space; ++i) {
      if (data[i] < '0' || data[i] > '9') return false;
      len = len * 10 + static_cast<uint64_t>(data[i] - '0');
    }
    if (len <= space + 1 || len > data.size() || data[len - 1] != '\n') return false;
    std::string_view body = data.substr(space + 1, len - space - 2);
    const size_t eq = body.find('=');
    if (eq == 0 || eq == std::string_view::npos) return false;
    out->push_back({std::string(body.substr(0, eq)), std::string(body.substr(eq + 1))});
    data.remove_prefix(len);
  }
  return true;
}

void AppendPax(const PaxRecord& r, std::string* out) {
  // LEN counts its own digits: settle it as Python's tarfile does.
  const size_t body = r.key.size() + r.value.size() + 3;  // ' ', '=', '\n'
  size_t len = 0;
  for (size_t p = 0;; p = len) {
    len = body + std::to_string(p).size();
    if (len == p) break;
  }
  out->append(std::to_string(len)).append(" ").append(r.key).append("=").append(r.value);
  out->push_back('\n');
}

std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

bool IsTarBlock(const uint8_t* block) { return AllZero(block) || ChecksumOk(block); }

Result<bool> TarReader::Next(TarMember* member) {
  const uint64_t first = offset_;
  std::optional<std::string> long_name, pax_path;
  std::optional<uint64_t> pax_size;
  uint8_t block[kTarBlock];
  for (;;) {
    const uint64_t at = offset_;
    if (at == src_->size()) {
      if (at != first) return Bad(at, "archive ends after an extension header");
      return false;
    }
    if (src_->size() - at < kTarBlock) return Bad(at, "truncated header");
    STOKER_RETURN_IF_ERROR(ReadExactly(*src_, block, kTarBlock, at, "tar header"));
    if (AllZero(block)) {
      if (at != first) return Bad(at, "archive ends after an extension header");
      return false;
    }
    if (!ChecksumOk(block)) return Bad(at, "bad header checksum");
    const char type = static_cast<char>(block[kTypeAt]);
    auto size = ParseNumber(FieldOf(block, kSize));
    if (!size) return Bad(at, "bad size field");
    if (!HasData(type)) size = 0;
    const uint64_t data = at + kTarBlock;
    if (*size > src_->size() - data) return Bad(at, "member runs past the end of the file");
    if (IsExtension(type)) {
      if (*size > kMaxExtensionBytes) return Bad(at, "extension header too large");
      std::string ext(*size, '\0');
      STOKER_RETURN_IF_ERROR(ReadExactly(*src_, ext.data(), ext.size(), data, "tar extension"));
      if (type == 'L') {
        long_name = std::string(Terminated(ext));
      } else if (type == 'x' || type == 'X') {
        std::vector<PaxRecord> records;
        if (!ParsePax(ext, &records)) return Bad(at, "bad pax record");
        for (const PaxRecord& r : records) {
          if (r.key == "path") pax_path = r.value;
          if (r.key == "size") {
            pax_size = ParseDecimal(r.value);
            if (!pax_size) return Bad(at, "bad pax size");
          }
        }
      }
      offset_ = std::min<uint64_t>(src_->size(), data + TarPadded(*size));
      continue;
    }
    if (type == 'S' && block[kGnuSparseExtendedAt] != 0) {
      return Bad(at, "old GNU sparse member (not supported)");
    }
    member->offset = first;
    member->data_offset = data;
    member->type = type;
    member->size = pax_size && HasData(type) ? *pax_size : *size;
    if (member->size > src_->size() - data) return Bad(at, "member runs past the end of the file");
    if (pax_path) {
      member->name = *pax_path;
    } else if (long_name) {
      member->name = *long_name;
    } else {
      member->name = std::string(Terminated(FieldOf(block, kName)));
      const std::string_view prefix = Terminated(FieldOf(block, kPrefix));
      if (FieldOf(block, kMagic).substr(0, 6) == kPosixMagic && !prefix.empty()) {
        member->name = std::string(prefix) + "/" + member->name;
      }
    }
    // A last member whose padding the file lacks: the archive ends there.
    offset_ = std::min<uint64_t>(src_->size(), member->end());
    return true;
  }
}

Result<std::string> RewriteTarHeaders(std::string_view raw, std::string_view old_suffix,
                                      std::string_view new_suffix, uint64_t new_size) {
  std::string out;
  bool renamed = false, has_header = false;
  size_t pos = 0;
  while (pos < raw.size()) {
    if (raw.size() - pos < kTarBlock) return Bad(pos, "truncated header");
    uint8_t block[kTarBlock];
    std::memcpy(block, raw.data() + pos, kTarBlock);
    if (!ChecksumOk(block)) return Bad(pos, "bad header checksum");
    const char type = static_cast<char>(block[kTypeAt]);
    auto size = ParseNumber(FieldOf(block, kSize));
    if (!size) return Bad(pos, "bad size field");
    const size_t data = pos + kTarBlock;
    if (!IsExtension(type)) {
      if (data != raw.size()) return Bad(pos, "headers go on past the member's own");
      std::string_view name = Terminated(FieldOf(block, kName));
      if (EndsWith(name, old_suffix)) {
        const size_t keep = name.size() - old_suffix.size();
        std::memset(block + kName.at + keep, 0, kName.len - keep);
        if (!new_suffix.empty()) {
          std::memcpy(block + kName.at + keep, new_suffix.data(),
                      std::min(new_suffix.size(), kName.len - keep));
        }
        renamed = renamed || keep + new_suffix.size() <= kName.len;
      }
      PutSize(block, new_size);
      SealTarHeader(block);
      out.append(reinterpret_cast<const char*>(block), kTarBlock);
      pos = data;
      has_header = true;
      break;
    }
    if (*size > kMaxExtensionBytes || TarPadded(*size) > raw.size() - data) {
      return Bad(pos, "extension header runs past the member's headers");
    }
    std::string ext(raw.substr(data, *size));
    if (type == 'L') {
      std::string name(Terminated(ext));
      if (!EndsWith(name, old_suffix)) return Status::Invalid("tar: long name has another suffix");
      name.resize(name.size() - old_suffix.size());
      ext = name.append(new_suffix).append(1, '\0');
      renamed = true;
    } else if (type == 'x' || type == 'X') {
      std::vector<PaxRecord> records;
      if (!ParsePax(ext, &records)) return Bad(pos, "bad pax record");
      ext.clear();
      for (PaxRecord& r : records) {
        if (r.key == "path") {
          if (!EndsWith(r.value, old_suffix))
            return Status::Invalid("tar: pax path has another suffix");
          r.value.resize(r.value.size() - old_suffix.size());
          r.value.append(new_suffix);
          renamed = true;
        } else if (r.key == "size") {
          r.value = std::to_string(new_size);
        }
        AppendPax(r, &ext);
      }
    }
    PutSize(block, ext.size());
    SealTarHeader(block);
    out.append(reinterpret_cast<const char*>(block), kTarBlock);
    out.append(ext);
    out.append(TarPadded(ext.size()) - ext.size(), '\0');
    pos = data + TarPadded(*size);
  }
  if (!has_header) return Bad(pos, "no member header");
  if (!renamed) return Status::Invalid("tar: the member's name does not end in its suffix");
  return out;
}

namespace {

std::string HeaderBlock(std::string_view name, uint64_t size, char type, std::string_view magic,
                        std::string_view prefix = {}) {
  uint8_t block[kTarBlock] = {};
  if (!name.empty()) std::memcpy(block + kName.at, name.data(), std::min(name.size(), kName.len));
  std::memcpy(block + 100, "0000644", 8);
  std::memcpy(block + 108, "0001750", 8);
  std::memcpy(block + 116, "0001750", 8);
  PutSize(block, size);
  std::memcpy(block + 136, "14737062710", 12);
  block[kTypeAt] = static_cast<uint8_t>(type);
  std::memcpy(block + kMagic.at, magic.data(), magic.size());
  if (magic == kPosixMagic) std::memcpy(block + kMagic.at + 6, "00", 2);
  std::memcpy(block + 265, "stoker", 6);
  std::memcpy(block + 297, "stoker", 6);
  if (!prefix.empty()) {  // (an empty view's data() may be null)
    std::memcpy(block + kPrefix.at, prefix.data(), std::min(prefix.size(), kPrefix.len));
  }
  SealTarHeader(block);
  return std::string(reinterpret_cast<const char*>(block), kTarBlock);
}

std::string Padded(std::string_view data) {
  std::string s(data);
  s.append(TarPadded(data.size()) - data.size(), '\0');
  return s;
}

}  // namespace

std::string TarMemberBytes(std::string_view name, std::string_view data, TarFormat format) {
  std::string out;
  std::string_view header_name = name, prefix;
  if (name.size() > kName.len) {
    const size_t slash = name.rfind('/', kPrefix.len);
    if (format == TarFormat::kUstar && slash != std::string_view::npos &&
        name.size() - slash - 1 <= kName.len) {
      prefix = name.substr(0, slash);
      header_name = name.substr(slash + 1);
    } else if (format == TarFormat::kGnu) {
      const std::string long_name = std::string(name) + '\0';
      out += HeaderBlock("././@LongLink", long_name.size(), 'L', kGnuMagic) + Padded(long_name);
    } else {
      std::string pax;
      AppendPax({"path", std::string(name)}, &pax);
      out += HeaderBlock("PaxHeader", pax.size(), 'x', kPosixMagic) + Padded(pax);
    }
  }
  out += HeaderBlock(header_name, data.size(), '0',
                     format == TarFormat::kGnu ? kGnuMagic : kPosixMagic, prefix);
  return out + Padded(data);
}

std::string TarEnd() { return std::string(2 * kTarBlock, '\0'); }

}  // namespace stoker
