#include "decode/jpeg/cpu_jpeg_decoder.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

namespace stoker {
namespace {

#define STOKER_STR2(x) #x
#define STOKER_STR(x) STOKER_STR2(x)

// Everything one decode touches, in one POD the caller owns, so nothing
// with a destructor lives between setjmp and longjmp and no local variable
// of the jumping frame is read after the jump.
struct DecodeState {
  jpeg_decompress_struct cinfo;
  struct ErrorMgr {
    jpeg_error_mgr pub;
    jmp_buf jump;
  } err;
  jpeg_source_mgr src;
  const uint8_t* data;
  size_t len;
  char message[JMSG_LENGTH_MAX];
  int code;  // errno of a failure found outside libjpeg, 0 if none
  size_t want_len;
  size_t got_len;
};

void ErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<DecodeState::ErrorMgr*>(cinfo->err);
  auto* st =
      reinterpret_cast<DecodeState*>(reinterpret_cast<char*>(err) - offsetof(DecodeState, err));
  (*cinfo->err->format_message)(cinfo, st->message);
  std::longjmp(err->jump, 1);
}

// Warnings are counted, never printed: a daemon has no terminal, and
// tf.io.decode_jpeg ignores them as well.
void EmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0) cinfo->err->num_warnings++;
}
void OutputMessage(j_common_ptr) {}

void InitSource(j_decompress_ptr cinfo) {
  auto* st = reinterpret_cast<DecodeState*>(cinfo);
  cinfo->src->next_input_byte = st->data;
  cinfo->src->bytes_in_buffer = st->len;
}

// All data is in the buffer from the start, so a refill means the JPEG
// ended early. TensorFlow (try_recover_truncated=False) fails here too
// rather than padding with a fake EOI the way jpeg_mem_src does.
boolean FillInputBuffer(j_decompress_ptr cinfo) {
  auto* st = reinterpret_cast<DecodeState*>(cinfo);
  if (cinfo->src->next_input_byte == st->data && cinfo->src->bytes_in_buffer == 0) {
    ERREXIT(cinfo, JERR_INPUT_EMPTY);
  }
  ERREXIT(cinfo, JERR_INPUT_EOF);
  return FALSE;
}

void SkipInputData(j_decompress_ptr cinfo, long n) {
  if (n <= 0) return;
  if (static_cast<unsigned long>(n) > cinfo->src->bytes_in_buffer) ERREXIT(cinfo, JERR_INPUT_EOF);
  cinfo->src->next_input_byte += n;
  cinfo->src->bytes_in_buffer -= n;
}

void TermSource(j_decompress_ptr) {}

// TensorFlow's CMYK -> RGB (jpeg_mem.cc): Adobe files store inverted CMYK.
void CmykRowToRgb(const JSAMPLE* cmyk, uint8_t* rgb, JDIMENSION width, bool adobe) {
  for (JDIMENSION i = 0; i < width; ++i) {
    const int c = cmyk[4 * i], m = cmyk[4 * i + 1], y = cmyk[4 * i + 2], k = cmyk[4 * i + 3];
    if (adobe) {
      rgb[3 * i] = static_cast<uint8_t>(k * c / 255);
      rgb[3 * i + 1] = static_cast<uint8_t>(k * m / 255);
      rgb[3 * i + 2] = static_cast<uint8_t>(k * y / 255);
    } else {
      rgb[3 * i] = static_cast<uint8_t>((255 - k) * (255 - c) / 255);
      rgb[3 * i + 1] = static_cast<uint8_t>((255 - k) * (255 - m) / 255);
      rgb[3 * i + 2] = static_cast<uint8_t>((255 - k) * (255 - y) / 255);
    }
  }
}

// Error manager and memory source for st (before setjmp), then the
// decompressor (after it).
void InitErrors(DecodeState* st) {
  st->cinfo.err = jpeg_std_error(&st->err.pub);
  st->err.pub.error_exit = ErrorExit;
  st->err.pub.emit_message = EmitMessage;
  st->err.pub.output_message = OutputMessage;
}

void CreateWithSource(DecodeState* st, size_t max_memory) {
  jpeg_decompress_struct* cinfo = &st->cinfo;
  jpeg_create_decompress(cinfo);
  cinfo->mem->max_memory_to_use = static_cast<long>(max_memory);
  st->src.init_source = InitSource;
  st->src.fill_input_buffer = FillInputBuffer;
  st->src.skip_input_data = SkipInputData;
  st->src.resync_to_restart = jpeg_resync_to_restart;
  st->src.term_source = TermSource;
  st->src.bytes_in_buffer = 0;
  st->src.next_input_byte = nullptr;
  cinfo->src = &st->src;
}

// Returns false after a libjpeg error (message in st->message) or a failure
// of ours (st->code set). No C++ object with a destructor in this frame.
__attribute__((noinline)) bool DecodeLow(DecodeState* st, const DecodeParams& params,
                                         size_t max_memory, uint8_t* out) {
  jpeg_decompress_struct* cinfo = &st->cinfo;
  InitErrors(st);
  if (setjmp(st->err.jump)) {
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  CreateWithSource(st, max_memory);

  jpeg_read_header(cinfo, TRUE);
  int components = params.channels == 0 ? std::min(cinfo->num_components, 3) : params.channels;
  switch (components) {
    case 1:
      cinfo->out_color_space = JCS_GRAYSCALE;
      break;
    case 3:
      cinfo->out_color_space =
          cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK ? JCS_CMYK
                                                                                     : JCS_RGB;
      break;
    default:
      st->code = ENOTSUP;
      std::snprintf(st->message, sizeof(st->message), "%d-component JPEG not supported",
                    cinfo->num_components);
      jpeg_destroy_decompress(cinfo);
      return false;
  }
  cinfo->do_fancy_upsampling = params.fancy_upsampling ? TRUE : FALSE;
  cinfo->scale_num = 1;
  cinfo->scale_denom = ScaleRatio(cinfo->image_width, cinfo->image_height, params);
  cinfo->dct_method = params.dct == DctMethod::kAccurate ? JDCT_ISLOW : JDCT_IFAST;
  jpeg_calc_output_dimensions(cinfo);
  st->got_len = size_t{cinfo->output_width} * cinfo->output_height * components;
  if (st->got_len != st->want_len) {
    st->code = EINVAL;
    std::snprintf(st->message, sizeof(st->message),
                  "decoded size %ux%ux%d differs from the expected %zu bytes", cinfo->output_height,
                  cinfo->output_width, components, st->want_len);
    jpeg_destroy_decompress(cinfo);
    return false;
  }

  jpeg_start_decompress(cinfo);
  const bool cmyk = cinfo->out_color_space == JCS_CMYK;
  const size_t stride = size_t{cinfo->output_width} * components;
  JSAMPARRAY temp = nullptr;
  if (cmyk) {
    // From libjpeg's image pool: freed by jpeg_destroy even after a longjmp.
    temp = (*cinfo->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(cinfo), JPOOL_IMAGE,
                                       cinfo->output_width * 4, 1);
  }
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* row = out + stride * cinfo->output_scanline;
    JSAMPROW dest = cmyk ? temp[0] : row;
    if (jpeg_read_scanlines(cinfo, &dest, 1) != 1) {
      st->code = EBADMSG;  // a suspension; our source never suspends
      std::snprintf(st->message, sizeof(st->message), "decoder stopped at line %u of %u",
                    cinfo->output_scanline, cinfo->output_height);
      jpeg_destroy_decompress(cinfo);
      return false;
    }
    if (cmyk) CmykRowToRgb(temp[0], row, cinfo->output_width, cinfo->saw_Adobe_marker);
  }
  jpeg_finish_decompress(cinfo);
  jpeg_destroy_decompress(cinfo);
  return true;
}

// Whether the first marker in [p, end) that is not a restart marker (fill
// bytes and stuffed 0xFF 0x00 aside) is EOI.
bool FirstMarkerIsEoi(const uint8_t* p, const uint8_t* end) {
  for (;;) {
    p = static_cast<const uint8_t*>(std::memchr(p, 0xFF, end - p));
    if (p == nullptr) return false;
    while (p < end && *p == 0xFF) ++p;
    if (p == end) return false;
    const uint8_t m = *p++;
    if (m == 0x00 || (m >= 0xD0 && m <= 0xD7)) continue;
    return m == 0xD9;
  }
}

// CheckJpegDecodes: the headers and every scan's entropy data, to the EOI,
// with no pixels made. Same frame rules as DecodeLow.
__attribute__((noinline)) bool CheckLow(DecodeState* st, size_t max_memory) {
  jpeg_decompress_struct* cinfo = &st->cinfo;
  InitErrors(st);
  if (setjmp(st->err.jump)) {
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  CreateWithSource(st, max_memory);
  jpeg_read_header(cinfo, TRUE);
  // One Huffman-coded scan whose entropy data runs into an EOI: decoding it
  // cannot fail, as the Huffman decoder stops at that marker at the latest
  // (padding with zeros, a warning, wrong restart markers resynchronised)
  // and the markers after the scan are that EOI. Only its tables can still
  // be bad, and starting the decompressor (no conversion) builds them. Any
  // other file has its entropy data decoded.
  if (!jpeg_has_multiple_scans(cinfo) && !cinfo->arith_code &&
      FirstMarkerIsEoi(cinfo->src->next_input_byte,
                       cinfo->src->next_input_byte + cinfo->src->bytes_in_buffer)) {
    cinfo->out_color_space = cinfo->jpeg_color_space;
    jpeg_start_decompress(cinfo);
    jpeg_destroy_decompress(cinfo);
    return true;
  }
  jpeg_read_coefficients(cinfo);
  jpeg_finish_decompress(cinfo);
  jpeg_destroy_decompress(cinfo);
  return true;
}

// The Status of a failed DecodeLow or CheckLow.
Status FailureOf(const DecodeState& st) {
  int code = st.code;
  if (code == 0) {
    const int msg = st.err.pub.msg_code;
    code = msg == JERR_OUT_OF_MEMORY || msg == JERR_NO_BACKING_STORE ? ENOMEM : EBADMSG;
    if (msg == JERR_CONVERSION_NOTIMPL || msg == JERR_SOF_UNSUPPORTED ||
        msg == JERR_BAD_PRECISION || msg == JERR_NOT_COMPILED || msg == JERR_FRACT_SAMPLE_NOTIMPL) {
      code = ENOTSUP;
    }
  }
  return Status::Error(code, std::string("jpeg: ") + st.message);
}

std::unique_ptr<DecodeState> NewState(const uint8_t* jpeg, size_t len) {
  auto st = std::make_unique<DecodeState>();
  std::memset(st.get(), 0, sizeof(DecodeState));
  st->data = jpeg;
  st->len = len;
  return st;
}

class CpuJpegDecoder final : public JpegDecoder {
 public:
  explicit CpuJpegDecoder(const CpuJpegDecoderOptions& options) : options_(options) {}

  std::string name() const override { return "libjpeg-turbo " STOKER_STR(LIBJPEG_TURBO_VERSION); }

  Status Decode(const uint8_t* jpeg, size_t len, const DecodeParams& params, uint8_t* out,
                size_t out_len) override {
    if (params.channels != 0 && params.channels != 1 && params.channels != 3) {
      return Status::Invalid("channels must be 0, 1 or 3, not " + std::to_string(params.channels));
    }
    STOKER_RETURN_IF_ERROR(CheckScaleParams(params));
    if (jpeg == nullptr || len == 0) return Status::Corruption("jpeg: empty input");
    if (out_len > 0 && out == nullptr) return Status::Invalid("no output buffer");
    auto st = NewState(jpeg, len);
    st->want_len = out_len;
    if (DecodeLow(st.get(), params, options_.max_memory_bytes, out)) return Status::OK();
    return FailureOf(*st);
  }

 private:
  CpuJpegDecoderOptions options_;
};

}  // namespace

Status CheckJpegDecodes(const uint8_t* jpeg, size_t len, const CpuJpegDecoderOptions& options) {
  if (jpeg == nullptr || len == 0) return Status::Corruption("jpeg: empty input");
  auto st = NewState(jpeg, len);
  if (CheckLow(st.get(), options.max_memory_bytes)) return Status::OK();
  return FailureOf(*st);
}

std::unique_ptr<JpegDecoder> NewCpuJpegDecoder(const CpuJpegDecoderOptions& options) {
  return std::make_unique<CpuJpegDecoder>(options);
}

}  // namespace stoker
