// The binary form of a ViewLayout (declared in view_layout.h):
//   "SVL" version(1) kind(u8) fingerprint(str) source_size size
//   [kNpy: height width channels npy_header_size]
//   nrecords { kind(u8) in_gap in_size out_size [kImage: prefix h w c] }
//   nerrors { in_offset code message(str) }
//   crc32c(all of the above), 4 bytes little endian
// Numbers are LEB128 varints; str is a varint length and the bytes; in_gap
// is in_offset minus the previous entry's raw end; out offsets are implied.
#include <cstring>

#include "decode/tfrecord/crc32c.h"
#include "decode/view/view_layout.h"

namespace stoker {
namespace {

constexpr char kMagic[3] = {'S', 'V', 'L'};
constexpr uint8_t kVersion = 1;

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutString(std::string_view s, std::string* out) {
  PutVarint(s.size(), out);
  out->append(s);
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= in_.size()) return false;
      const uint8_t b = static_cast<uint8_t>(in_[pos_++]);
      if (shift == 63 && b > 1) return false;
      *v |= uint64_t{b & 0x7fu} << shift;
      if (b < 0x80) return true;
    }
    return false;
  }
  bool U32(uint32_t* v) {
    uint64_t x;
    if (!Varint(&x) || x > UINT32_MAX) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool Byte(uint8_t* b) {
    if (pos_ >= in_.size()) return false;
    *b = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  bool String(std::string* s) {
    uint64_t n;
    if (!Varint(&n) || n > in_.size() - pos_) return false;
    s->assign(in_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  size_t left() const { return in_.size() - pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

bool AddOk(uint64_t a, uint64_t b, uint64_t* sum) { return !__builtin_add_overflow(a, b, sum); }

}  // namespace

std::string EncodeViewLayout(const ViewLayout& l) {
  std::string out(kMagic, sizeof(kMagic));
  out.push_back(static_cast<char>(kVersion));
  out.push_back(static_cast<char>(l.kind));
  PutString(l.fingerprint, &out);
  PutVarint(l.source_size, &out);
  PutVarint(l.size, &out);
  if (l.kind == ViewKind::kNpy) {
    PutVarint(l.shape.height, &out);
    PutVarint(l.shape.width, &out);
    PutVarint(l.shape.channels, &out);
    PutVarint(l.npy_header_size, &out);
  }
  PutVarint(l.records.size(), &out);
  uint64_t in_end = 0;
  for (const ViewRecord& r : l.records) {
    out.push_back(static_cast<char>(r.kind));
    PutVarint(r.in_offset - in_end, &out);
    PutVarint(r.in_size, &out);
    PutVarint(r.out_size, &out);
    if (r.kind == ViewRecordKind::kImage) {
      PutVarint(r.prefix_size, &out);
      PutVarint(r.shape.height, &out);
      PutVarint(r.shape.width, &out);
      PutVarint(r.shape.channels, &out);
    }
    in_end = r.in_offset + r.in_size;
  }
  PutVarint(l.errors.size(), &out);
  for (const ViewError& e : l.errors) {
    PutVarint(e.in_offset, &out);
    PutVarint(static_cast<uint32_t>(e.code), &out);
    PutString(e.message, &out);
  }
  const uint32_t crc = Crc32c(out.data(), out.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
  return out;
}

Result<ViewLayout> DecodeViewLayout(std::string_view in) {
  auto bad = [](const char* why) { return Status::Corruption(std::string("view layout: ") + why); };
  if (in.size() < sizeof(kMagic) + 2 + 4) return bad("too short");
  uint32_t crc = 0;
  for (int i = 3; i >= 0; --i) crc = (crc << 8) | static_cast<uint8_t>(in[in.size() - 4 + i]);
  in.remove_suffix(4);
  if (Crc32c(in.data(), in.size()) != crc) return bad("checksum mismatch");
  if (std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0) return bad("bad magic");
  if (static_cast<uint8_t>(in[3]) != kVersion) return bad("unknown version");
  Reader r(in.substr(4));
  ViewLayout l;
  uint8_t kind;
  if (!r.Byte(&kind) || kind < uint8_t(ViewKind::kTfRecord) || kind > uint8_t(ViewKind::kTar)) {
    return bad("bad kind");
  }
  l.kind = static_cast<ViewKind>(kind);
  if (!r.String(&l.fingerprint) || !r.Varint(&l.source_size) || !r.Varint(&l.size)) {
    return bad("truncated header");
  }
  if (l.kind == ViewKind::kNpy && (!r.U32(&l.shape.height) || !r.U32(&l.shape.width) ||
                                   !r.U32(&l.shape.channels) || !r.U32(&l.npy_header_size))) {
    return bad("truncated npy shape");
  }
  uint64_t n;
  if (!r.Varint(&n) || n > r.left() / 4) return bad("bad record count");
  l.records.reserve(n);
  uint64_t in_end = 0, out_end = 0;
  for (uint64_t i = 0; i < n; ++i) {
    ViewRecord rec;
    uint8_t k;
    uint64_t gap;
    const ViewRecordKind last_kind =
        l.kind == ViewKind::kTar ? ViewRecordKind::kZeros : ViewRecordKind::kFailed;
    if (!r.Byte(&k) || k > uint8_t(last_kind) || !r.Varint(&gap) || !r.Varint(&rec.in_size) ||
        !r.Varint(&rec.out_size)) {
      return bad("truncated record");
    }
    rec.kind = static_cast<ViewRecordKind>(k);
    if (!AddOk(in_end, gap, &rec.in_offset) || !AddOk(rec.in_offset, rec.in_size, &in_end)) {
      return bad("raw offsets overflow");
    }
    rec.out_offset = out_end;
    if (rec.out_size == 0 || !AddOk(out_end, rec.out_size, &out_end)) {
      return bad("bad record size");
    }
    if (rec.kind == ViewRecordKind::kImage) {
      if (!r.U32(&rec.prefix_size) || !r.U32(&rec.shape.height) || !r.U32(&rec.shape.width) ||
          !r.U32(&rec.shape.channels)) {
        return bad("truncated image record");
      }
      if (rec.shape.height == 0 || rec.shape.height > 65535 || rec.shape.width == 0 ||
          rec.shape.width > 65535 || (rec.shape.channels != 1 && rec.shape.channels != 3)) {
        return bad("bad image shape");
      }
      const uint64_t overhead = l.kind == ViewKind::kTar ? 0 : kTfRecordOverhead;
      uint64_t fixed;
      if (!AddOk(rec.shape.pixel_bytes(), overhead + uint64_t{rec.prefix_size}, &fixed) ||
          fixed > rec.out_size) {
        return bad("image record smaller than its parts");
      }
    }
    if (rec.kind == ViewRecordKind::kCopy && rec.in_size != rec.out_size) {
      return bad("copied entry of another size");
    }
    if (rec.kind == ViewRecordKind::kZeros && rec.in_size != 0) return bad("zeros from raw bytes");
    l.records.push_back(rec);
  }
  if (l.kind != ViewKind::kNpy && out_end != l.size) return bad("sizes do not add up");
  if (l.kind == ViewKind::kNpy) {
    if (l.records.size() > 1) return bad("npy layout with several entries");
    const bool failed = !l.records.empty();
    const uint64_t want = failed ? out_end : l.npy_header_size + l.shape.pixel_bytes();
    if (want != l.size) return bad("npy size does not add up");
  }
  if (!r.Varint(&n) || n > r.left() / 3) return bad("bad error count");
  l.errors.resize(n);
  for (ViewError& e : l.errors) {
    uint64_t code;
    if (!r.Varint(&e.in_offset) || !r.Varint(&code) || code > INT32_MAX || !r.String(&e.message)) {
      return bad("truncated error");
    }
    e.code = static_cast<int>(code);
  }
  if (r.left() != 0) return bad("trailing bytes");
  return l;
}

}  // namespace stoker
