#include "decode/view/npy.h"

#include <cctype>

namespace stoker {
namespace {

constexpr std::string_view kMagic("\x93NUMPY\x01\x00", 8);
constexpr size_t kPrefix = 10;  // magic, version, uint16 length
constexpr size_t kAlign = 64;
constexpr std::string_view kDictStart = "{'descr': '|u1', 'fortran_order': False, 'shape': (";

}  // namespace

std::string NpyHeader(const std::vector<uint64_t>& shape) {
  std::string dict(kDictStart);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) dict += ", ";
    dict += std::to_string(shape[i]);
  }
  if (shape.size() == 1) dict += ",";  // Python's repr of a 1-tuple
  dict += "), }";
  // numpy's _wrap_header: pad so that prefix + dict + pad + '\n' is aligned,
  // and always pad by at least one space.
  const size_t unpadded = kPrefix + dict.size() + 1;
  const size_t pad = kAlign - unpadded % kAlign;
  dict.append(pad, ' ');
  dict += '\n';
  std::string out(kMagic);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  out += dict;
  return out;
}

Result<NpyArrayInfo> ParseNpyHeader(std::string_view file) {
  auto bad = [](const char* why) { return Status::Corruption(std::string("npy: ") + why); };
  if (file.size() < kPrefix || file.substr(0, kMagic.size()) != kMagic) return bad("no magic");
  const size_t hlen =
      static_cast<uint8_t>(file[8]) | (static_cast<size_t>(static_cast<uint8_t>(file[9])) << 8);
  if (file.size() < kPrefix + hlen) return bad("truncated header");
  std::string_view dict = file.substr(kPrefix, hlen);
  if (dict.empty() || dict.back() != '\n') return bad("header does not end in a newline");
  if (dict.substr(0, kDictStart.size()) != kDictStart) return bad("not a C-order uint8 header");
  NpyArrayInfo info;
  size_t i = kDictStart.size();
  while (i < dict.size() && dict[i] != ')') {
    if (!std::isdigit(static_cast<unsigned char>(dict[i]))) return bad("bad shape");
    uint64_t v = 0;
    while (i < dict.size() && std::isdigit(static_cast<unsigned char>(dict[i]))) {
      if (v > (UINT64_MAX - 9) / 10) return bad("shape overflows");
      v = v * 10 + (dict[i++] - '0');
    }
    info.shape.push_back(v);
    if (i < dict.size() && dict[i] == ',') ++i;
    if (i < dict.size() && dict[i] == ' ') ++i;
  }
  if (i >= dict.size()) return bad("unterminated shape");
  info.data_offset = kPrefix + hlen;
  return info;
}

}  // namespace stoker
