#include "decode/jpeg/jpeg_probe.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace stoker {
namespace {

// Marker codes (ITU T.81 table B.1).
constexpr uint8_t kSOI = 0xD8, kEOI = 0xD9, kSOS = 0xDA, kDQT = 0xDB, kDNL = 0xDC, kDRI = 0xDD,
                  kDHT = 0xC4, kJPG = 0xC8, kDAC = 0xCC, kAPP0 = 0xE0, kAPP14 = 0xEE, kAPP15 = 0xEF,
                  kCOM = 0xFE, kTEM = 0x01;
constexpr uint32_t kMaxDimension = 65500;  // libjpeg's JPEG_MAX_DIMENSION
constexpr int kMaxSampFactor = 4;
constexpr int kMaxBlocksInMcu = 10;  // D_MAX_BLOCKS_IN_MCU
constexpr int kMaxCompsInScan = 4;
constexpr int kNumTables = 4;

Status Truncated(size_t at) {
  return Status::Error(ENODATA,
                       "jpeg: truncated at byte " + std::to_string(at) + " before the first scan");
}
Status Bad(const std::string& what, size_t at) {
  return Status::Corruption("jpeg: " + what + " at byte " + std::to_string(at));
}
Status Unsupported(const std::string& what) { return Status::Error(ENOTSUP, "jpeg: " + what); }

// The coding process a SOF marker names (ITU T.81 table B.1).
JpegProcess ProcessOf(uint8_t marker) {
  switch (marker) {
    case 0xC0:
      return JpegProcess::kBaseline;
    case 0xC1:
    case 0xC9:
      return JpegProcess::kExtendedSequential;
    case 0xC2:
    case 0xCA:
      return JpegProcess::kProgressive;
    case 0xC3:
    case 0xCB:
      return JpegProcess::kLossless;
    default:
      return JpegProcess::kHierarchical;
  }
}

class Parser {
 public:
  Parser(const uint8_t* data, size_t len, const JpegProbeOptions& options)
      : p_(data), len_(len), options_(options) {}
  Result<JpegInfo> Run();

 private:
  // Segment contents: [seg_, seg_ + seg_len_), all in bounds.
  Status NextMarker(uint8_t* marker);
  Status ReadSegment();
  Status ParseSof(uint8_t marker);
  // ParseSof's steps: the size against libjpeg's maximum and the options'
  // limit (EFBIG); each of the frame's n components (ids, sampling factors,
  // quantization tables).
  Status CheckDimensions() const;
  Status ParseFrameComponents(int n);
  Status ParseSos();
  Status ParseDht();
  Status ParseDqt();
  Status ParseDri();
  void ParseApp(uint8_t marker);
  void DecideColorSpace();
  void DecideSubsampling();

  uint16_t Be16(size_t at) const { return static_cast<uint16_t>(seg_[at] << 8 | seg_[at + 1]); }

  const uint8_t* p_;
  size_t len_;
  JpegProbeOptions options_;
  size_t pos_ = 0;
  const uint8_t* seg_ = nullptr;
  size_t seg_len_ = 0;
  size_t seg_at_ = 0;
  bool saw_sof_ = false;
  bool quant_defined_[kNumTables] = {};
  JpegInfo info_;
};

Status Parser::NextMarker(uint8_t* marker) {
  // As libjpeg's next_marker: skip non-FF bytes (a warning there, not an
  // error), any fill FFs, and stuffed FF 00 pairs.
  for (;;) {
    while (pos_ < len_ && p_[pos_] != 0xFF) ++pos_;
    while (pos_ < len_ && p_[pos_] == 0xFF) ++pos_;
    if (pos_ >= len_) return Truncated(pos_);
    uint8_t c = p_[pos_++];
    if (c != 0) {
      *marker = c;
      return Status::OK();
    }
  }
}

Status Parser::ReadSegment() {
  seg_at_ = pos_;
  if (len_ - pos_ < 2) return Truncated(pos_);
  size_t length = static_cast<size_t>(p_[pos_] << 8 | p_[pos_ + 1]);
  // libjpeg skips nothing more for a length below 2; neither do we.
  size_t body = length >= 2 ? length - 2 : 0;
  if (len_ - pos_ - 2 < body) return Truncated(len_);
  seg_ = p_ + pos_ + 2;
  seg_len_ = body;
  pos_ += 2 + body;
  return Status::OK();
}

Status Parser::ParseSof(uint8_t marker) {
  STOKER_RETURN_IF_ERROR(ReadSegment());
  if (saw_sof_) return Bad("second frame header", seg_at_);
  saw_sof_ = true;
  info_.process = ProcessOf(marker);
  info_.arithmetic = marker >= 0xC9;
  if (info_.process == JpegProcess::kLossless) return Unsupported("lossless JPEG not supported");
  if (info_.process == JpegProcess::kHierarchical) {
    return Unsupported("hierarchical JPEG not supported");
  }
  if (info_.arithmetic && !options_.allow_arithmetic) {
    return Unsupported("arithmetic-coded JPEG refused by options");
  }
  if (seg_len_ < 6) return Bad("short frame header", seg_at_);
  info_.precision = seg_[0];
  info_.height = Be16(1);
  info_.width = Be16(3);
  const int n = seg_[5];
  if (info_.width == 0 || info_.height == 0 || n == 0) {
    return Bad("empty image (" + std::to_string(info_.width) + "x" + std::to_string(info_.height) +
                   ", " + std::to_string(n) + " components)",
               seg_at_);
  }
  if (seg_len_ != 6 + 3 * static_cast<size_t>(n)) return Bad("bad frame header length", seg_at_);
  if (info_.precision != 8) {
    return Unsupported(std::to_string(info_.precision) + "-bit precision not supported");
  }
  if (n == 2 || n > kJpegMaxComponents) {
    return Unsupported(std::to_string(n) + "-component JPEG not supported");
  }
  STOKER_RETURN_IF_ERROR(CheckDimensions());
  info_.components = n;
  return ParseFrameComponents(n);
}

Status Parser::CheckDimensions() const {
  if (info_.width > kMaxDimension || info_.height > kMaxDimension) {
    return Status::Error(EFBIG, "jpeg: " + std::to_string(info_.width) + "x" +
                                    std::to_string(info_.height) + " exceeds libjpeg's maximum");
  }
  if (uint64_t{info_.width} * info_.height > options_.max_pixels) {
    return Status::Error(EFBIG, "jpeg: " + std::to_string(info_.width) + "x" +
                                    std::to_string(info_.height) + " exceeds the limit of " +
                                    std::to_string(options_.max_pixels) + " pixels");
  }
  return Status::OK();
}

Status Parser::ParseFrameComponents(int n) {
  int max_h = 0, max_v = 0;
  for (int i = 0; i < n; ++i) {
    const uint8_t* c = seg_ + 6 + 3 * i;
    JpegComponentInfo& ci = info_.comp[i];
    ci.id = c[0];
    // Repeated ids break the spec but occur; libjpeg-turbo renames them so.
    for (int j = 0; j < i; ++j) {
      if (info_.comp[j].id == ci.id) {
        uint8_t max_id = info_.comp[0].id;
        for (int k = 1; k < i; ++k) max_id = std::max(max_id, info_.comp[k].id);
        ci.id = static_cast<uint8_t>(max_id + 1);
        break;
      }
    }
    ci.h_samp = c[1] >> 4;
    ci.v_samp = c[1] & 15;
    ci.quant_table = c[2];
    if (ci.h_samp < 1 || ci.h_samp > kMaxSampFactor || ci.v_samp < 1 ||
        ci.v_samp > kMaxSampFactor) {
      return Bad("bad sampling factors", seg_at_);
    }
    if (ci.quant_table >= kNumTables) return Bad("bad quantization table index", seg_at_);
    max_h = std::max<int>(max_h, ci.h_samp);
    max_v = std::max<int>(max_v, ci.v_samp);
  }
  for (int i = 0; i < n; ++i) {
    if (max_h % info_.comp[i].h_samp != 0 || max_v % info_.comp[i].v_samp != 0) {
      return Unsupported("fractional sampling ratios not supported");
    }
  }
  return Status::OK();
}

Status Parser::ParseSos() {
  STOKER_RETURN_IF_ERROR(ReadSegment());
  if (!saw_sof_) return Bad("scan before frame header", seg_at_);
  if (seg_len_ < 1) return Bad("short scan header", seg_at_);
  const int ns = seg_[0];
  if (ns < 1 || ns > kMaxCompsInScan || seg_len_ != 4 + 2 * static_cast<size_t>(ns)) {
    return Bad("bad scan header", seg_at_);
  }
  int blocks = 0;
  bool used[kJpegMaxComponents] = {};
  for (int i = 0; i < ns; ++i) {
    const uint8_t id = seg_[1 + 2 * i];
    const uint8_t tables = seg_[2 + 2 * i];
    int found = -1;
    for (int c = 0; c < info_.components; ++c) {
      if (info_.comp[c].id == id && !used[c]) {
        found = c;
        break;
      }
    }
    if (found < 0) return Bad("scan names an unknown component", seg_at_);
    used[found] = true;
    if ((tables >> 4) >= kNumTables || (tables & 15) >= kNumTables) {
      return Bad("bad entropy table index", seg_at_);
    }
    const JpegComponentInfo& ci = info_.comp[found];
    if (!quant_defined_[ci.quant_table]) return Bad("quantization table missing", seg_at_);
    blocks += ns == 1 ? 1 : ci.h_samp * ci.v_samp;
  }
  if (blocks > kMaxBlocksInMcu) return Bad("too many blocks per MCU", seg_at_);
  info_.header_size = pos_;
  return Status::OK();
}

Status Parser::ParseDht() {
  STOKER_RETURN_IF_ERROR(ReadSegment());
  size_t at = 0;
  while (seg_len_ - at > 16) {
    const uint8_t index = seg_[at];
    size_t count = 0;
    for (int i = 1; i <= 16; ++i) count += seg_[at + i];
    at += 17;
    if (count > 256 || count > seg_len_ - at) return Bad("bad Huffman table", seg_at_);
    at += count;
    if ((index & 0x0f) >= kNumTables || (index >> 4) > 1) {
      return Bad("bad Huffman table index", seg_at_);
    }
  }
  if (at != seg_len_) return Bad("bad Huffman segment length", seg_at_);
  return Status::OK();
}

Status Parser::ParseDqt() {
  STOKER_RETURN_IF_ERROR(ReadSegment());
  size_t at = 0;
  while (at < seg_len_) {
    const int prec = seg_[at] >> 4;
    const int index = seg_[at] & 15;
    ++at;
    if (index >= kNumTables) return Bad("bad quantization table index", seg_at_);
    // A short last table is zero-filled by libjpeg-turbo; take it likewise.
    const size_t want = 64 * (prec ? 2 : 1);
    at += std::min(want, (seg_len_ - at) & ~size_t{prec ? 1u : 0u});
    quant_defined_[index] = true;
  }
  if (at != seg_len_) return Bad("bad quantization segment length", seg_at_);
  return Status::OK();
}

Status Parser::ParseDri() {
  STOKER_RETURN_IF_ERROR(ReadSegment());
  if (seg_len_ != 2) return Bad("bad restart interval segment", seg_at_);
  info_.restart_interval = Be16(0);
  return Status::OK();
}

void Parser::ParseApp(uint8_t marker) {
  // libjpeg looks at the first 14 (JFIF) or 12 (Adobe) bytes only.
  if (marker == kAPP0 && seg_len_ >= 14 && std::memcmp(seg_, "JFIF\0", 5) == 0) {
    info_.jfif = true;
  } else if (marker == kAPP14 && seg_len_ >= 12 && std::memcmp(seg_, "Adobe", 5) == 0) {
    info_.adobe = true;
    info_.adobe_transform = seg_[11];
  }
}

void Parser::DecideColorSpace() {
  const auto& c = info_.comp;
  switch (info_.components) {
    case 1:
      info_.color_space = JpegColorSpace::kGrayscale;
      break;
    case 3:
      if (info_.jfif) {
        info_.color_space = JpegColorSpace::kYCbCr;
      } else if (info_.adobe) {
        info_.color_space =
            info_.adobe_transform == 0 ? JpegColorSpace::kRGB : JpegColorSpace::kYCbCr;
      } else if (c[0].id == 'R' && c[1].id == 'G' && c[2].id == 'B') {
        info_.color_space = JpegColorSpace::kRGB;
      } else {
        info_.color_space = JpegColorSpace::kYCbCr;
      }
      break;
    case 4:
      info_.color_space =
          info_.adobe && info_.adobe_transform != 0 ? JpegColorSpace::kYCCK : JpegColorSpace::kCMYK;
      break;
    default:
      info_.color_space = JpegColorSpace::kUnknown;
  }
}

void Parser::DecideSubsampling() {
  const auto& c = info_.comp;
  if (info_.components == 1) {
    info_.subsampling = ChromaSubsampling::kGray;
    return;
  }
  // Chroma is components 1 and 2; a fourth (K of CMYK/YCCK) should sample
  // like the first.
  for (int i = 1; i < info_.components; ++i) {
    const bool ok = i < 3 ? c[i].h_samp == 1 && c[i].v_samp == 1
                          : c[i].h_samp == c[0].h_samp && c[i].v_samp == c[0].v_samp;
    if (!ok) {
      info_.subsampling = ChromaSubsampling::kOther;
      return;
    }
  }
  const int h = c[0].h_samp, v = c[0].v_samp;
  if (h == 1 && v == 1) {
    info_.subsampling = ChromaSubsampling::k444;
  } else if (h == 2 && v == 1) {
    info_.subsampling = ChromaSubsampling::k422;
  } else if (h == 2 && v == 2) {
    info_.subsampling = ChromaSubsampling::k420;
  } else if (h == 1 && v == 2) {
    info_.subsampling = ChromaSubsampling::k440;
  } else if (h == 4 && v == 1) {
    info_.subsampling = ChromaSubsampling::k411;
  } else if (h == 1 && v == 4) {
    info_.subsampling = ChromaSubsampling::k441;
  } else {
    info_.subsampling = ChromaSubsampling::kOther;
  }
}

Result<JpegInfo> Parser::Run() {
  if (len_ < 2) return len_ == 1 && p_[0] == 0xFF ? Truncated(1) : Bad("no SOI marker", 0);
  if (p_[0] != 0xFF || p_[1] != kSOI) return Bad("no SOI marker (not a JPEG)", 0);
  pos_ = 2;
  for (;;) {
    uint8_t m = 0;
    STOKER_RETURN_IF_ERROR(NextMarker(&m));
    if (m >= 0xC0 && m <= 0xCF && m != kDHT && m != kJPG && m != kDAC) {
      STOKER_RETURN_IF_ERROR(ParseSof(m));
    } else if (m == kSOS) {
      STOKER_RETURN_IF_ERROR(ParseSos());
      break;
    } else if (m == kDHT) {
      STOKER_RETURN_IF_ERROR(ParseDht());
    } else if (m == kDQT) {
      STOKER_RETURN_IF_ERROR(ParseDqt());
    } else if (m == kDRI) {
      STOKER_RETURN_IF_ERROR(ParseDri());
    } else if ((m >= kAPP0 && m <= kAPP15) || m == kCOM || m == kDAC || m == kDNL) {
      STOKER_RETURN_IF_ERROR(ReadSegment());
      ParseApp(m);
    } else if ((m >= 0xD0 && m <= 0xD7) || m == kTEM) {
      continue;  // parameterless; libjpeg ignores them here
    } else if (m == kEOI) {
      return Bad("end of image before the first scan", pos_ - 2);
    } else if (m == kSOI) {
      return Bad("second SOI marker", pos_ - 2);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", m);
      return Bad(std::string("unknown marker ") + hex, pos_ - 2);
    }
  }
  DecideColorSpace();
  DecideSubsampling();
  return info_;
}

}  // namespace

const char* ToString(JpegProcess p) {
  switch (p) {
    case JpegProcess::kBaseline:
      return "baseline";
    case JpegProcess::kExtendedSequential:
      return "extended";
    case JpegProcess::kProgressive:
      return "progressive";
    case JpegProcess::kLossless:
      return "lossless";
    case JpegProcess::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

const char* ToString(JpegColorSpace c) {
  switch (c) {
    case JpegColorSpace::kGrayscale:
      return "grayscale";
    case JpegColorSpace::kYCbCr:
      return "YCbCr";
    case JpegColorSpace::kRGB:
      return "RGB";
    case JpegColorSpace::kCMYK:
      return "CMYK";
    case JpegColorSpace::kYCCK:
      return "YCCK";
    case JpegColorSpace::kUnknown:
      return "unknown";
  }
  return "?";
}

const char* ToString(ChromaSubsampling s) {
  switch (s) {
    case ChromaSubsampling::kGray:
      return "gray";
    case ChromaSubsampling::k444:
      return "4:4:4";
    case ChromaSubsampling::k422:
      return "4:2:2";
    case ChromaSubsampling::k420:
      return "4:2:0";
    case ChromaSubsampling::k440:
      return "4:4:0";
    case ChromaSubsampling::k411:
      return "4:1:1";
    case ChromaSubsampling::k441:
      return "4:4:1";
    case ChromaSubsampling::kOther:
      return "other";
  }
  return "?";
}

bool LooksLikeJpeg(const uint8_t* data, size_t len) {
  return len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

Result<JpegInfo> ProbeJpeg(const uint8_t* data, size_t len, const JpegProbeOptions& options) {
  if (data == nullptr) len = 0;
  return Parser(data, len, options).Run();
}

Result<int> OutputChannels(const JpegInfo& info, int requested) {
  const bool cmyk =
      info.color_space == JpegColorSpace::kCMYK || info.color_space == JpegColorSpace::kYCCK;
  switch (requested) {
    case 0:
      if (info.components == 1) return 1;
      if (info.components == 3 || cmyk) return 3;
      break;
    case 1:
      if (!cmyk && info.color_space != JpegColorSpace::kUnknown) return 1;
      break;
    case 3:
      if (info.color_space != JpegColorSpace::kUnknown) return 3;
      break;
    default:
      return Status::Invalid("channels must be 0, 1 or 3, not " + std::to_string(requested));
  }
  return Status::Error(ENOTSUP, std::string("jpeg: no conversion from ") +
                                    ToString(info.color_space) + " to " +
                                    std::to_string(requested) + " channels");
}

}  // namespace stoker
