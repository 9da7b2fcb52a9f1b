// Test-only helpers: generated images and JPEGs encoded from them, with
// TurboJPEG (tjCompress2) and with the libjpeg API where TurboJPEG 2.1 has
// no knob (progressive, restart markers, arithmetic coding, CMYK/YCCK, RGB
// without colour transform, odd sampling factors), plus a TurboJPEG
// reference decode (whole or scaled). Header-only so that nothing test-only lands in
// stoker_decode. Failures abort: they are bugs in the test.
#pragma once

#include <turbojpeg.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// jpeglib.h needs FILE and size_t first.
#include <jpeglib.h>

namespace stoker::testing {

// Smooth gradients with some edges and noise, so that every DCT method and
// upsampler produces distinct output.
inline std::vector<uint8_t> MakeImage(int w, int h, int channels, uint32_t seed = 1) {
  std::vector<uint8_t> img(size_t(w) * h * channels);
  uint32_t s = seed * 2654435761u + 1;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        s = s * 1664525u + 1013904223u;
        int v = (x * (3 + c) + y * (5 - c)) % 256;
        if (((x / 16) + (y / 16) + c) % 3 == 0) v = 255 - v;
        v += static_cast<int>((s >> 24) % 16) - 8;
        img[(size_t(y) * w + x) * channels + c] = static_cast<uint8_t>(v < 0     ? 0
                                                                       : v > 255 ? 255
                                                                                 : v);
      }
    }
  }
  return img;
}

// tjpf: TJPF_RGB or TJPF_GRAY (channels 3 or 1); subsamp: TJSAMP_*.
inline std::string EncodeTj(const std::vector<uint8_t>& pixels, int w, int h, int tjpf, int subsamp,
                            int quality = 90) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(tj, pixels.data(), w, 0, h, tjpf, &buf, &size, subsamp, quality, 0) != 0) {
    std::fprintf(stderr, "tjCompress2: %s\n", tjGetErrorStr2(tj));
    std::abort();
  }
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

enum class JpegColor { kYCbCr, kGray, kRgb, kCmyk, kYcck };

struct LibjpegOptions {
  int quality = 90;
  JpegColor color = JpegColor::kYCbCr;
  int h_samp = 2, v_samp = 2;  // of the first component; others 1x1
  bool progressive = false;
  bool arithmetic = false;
  unsigned restart_interval = 0;  // in MCUs
  int restart_in_rows = 0;
  bool write_jfif = true;
  // Sequential, one scan per component (not interleaved).
  bool non_interleaved = false;
};

inline void AbortOnJpegError(j_common_ptr cinfo) {
  char msg[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, msg);
  std::fprintf(stderr, "libjpeg (test encoder): %s\n", msg);
  std::abort();
}

// pixels: 1, 3 or 4 samples per pixel (gray, RGB, CMYK) matching color.
inline std::string EncodeLibjpeg(const std::vector<uint8_t>& pixels, int w, int h,
                                 const LibjpegOptions& o) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jerr.error_exit = AbortOnJpegError;
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = w;
  cinfo.image_height = h;
  switch (o.color) {
    case JpegColor::kGray:
      cinfo.input_components = 1;
      cinfo.in_color_space = JCS_GRAYSCALE;
      break;
    case JpegColor::kYCbCr:
    case JpegColor::kRgb:
      cinfo.input_components = 3;
      cinfo.in_color_space = JCS_RGB;
      break;
    case JpegColor::kCmyk:
    case JpegColor::kYcck:
      cinfo.input_components = 4;
      cinfo.in_color_space = JCS_CMYK;
      break;
  }
  jpeg_set_defaults(&cinfo);
  if (o.color == JpegColor::kRgb) jpeg_set_colorspace(&cinfo, JCS_RGB);
  if (o.color == JpegColor::kYcck) jpeg_set_colorspace(&cinfo, JCS_YCCK);
  jpeg_set_quality(&cinfo, o.quality, TRUE);
  if (cinfo.num_components > 1) {
    cinfo.comp_info[0].h_samp_factor = o.h_samp;
    cinfo.comp_info[0].v_samp_factor = o.v_samp;
    for (int i = 1; i < cinfo.num_components; ++i) {
      cinfo.comp_info[i].h_samp_factor = 1;
      cinfo.comp_info[i].v_samp_factor = 1;
    }
    if (cinfo.num_components == 4) {
      cinfo.comp_info[3].h_samp_factor = o.h_samp;
      cinfo.comp_info[3].v_samp_factor = o.v_samp;
    }
  }
  cinfo.write_JFIF_header =
      o.write_jfif && (o.color == JpegColor::kYCbCr || o.color == JpegColor::kGray);
  if (o.progressive) jpeg_simple_progression(&cinfo);
  jpeg_scan_info scans[4];  // read by jpeg_start_compress below
  if (o.non_interleaved) {
    for (int c = 0; c < cinfo.num_components; ++c) {
      scans[c] = jpeg_scan_info{1, {c, 0, 0, 0}, 0, 63, 0, 0};
    }
    cinfo.scan_info = scans;
    cinfo.num_scans = cinfo.num_components;
  }
  cinfo.arith_code = o.arithmetic ? TRUE : FALSE;
  cinfo.restart_interval = o.restart_interval;
  cinfo.restart_in_rows = o.restart_in_rows;
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = size_t(w) * cinfo.input_components;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels.data() + stride * cinfo.next_scanline);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buf), size);
  std::free(buf);
  return out;
}

// The reference decode, at 1/ratio of the size (1, 2, 4 or 8: TurboJPEG
// picks that scaling factor from the scaled size it is asked for). flags:
// TJFLAG_ACCURATEDCT, TJFLAG_FASTDCT, TJFLAG_FASTUPSAMPLE. w and h get the
// decoded size. Returns empty on failure.
inline std::vector<uint8_t> DecodeTjScaled(const std::string& jpeg, int tjpf, int flags, int ratio,
                                           int* w = nullptr, int* h = nullptr) {
  tjhandle tj = tjInitDecompress();
  int width = 0, height = 0, subsamp = 0, cs = 0;
  auto* data = reinterpret_cast<const unsigned char*>(jpeg.data());
  std::vector<uint8_t> out;
  if (tjDecompressHeader3(tj, data, jpeg.size(), &width, &height, &subsamp, &cs) == 0) {
    const tjscalingfactor f{1, ratio};
    width = TJSCALED(width, f);
    height = TJSCALED(height, f);
    out.resize(size_t(width) * height * tjPixelSize[tjpf]);
    if (tjDecompress2(tj, data, jpeg.size(), out.data(), width, 0, height, tjpf, flags) != 0) {
      out.clear();
    }
  }
  tjDestroy(tj);
  if (w) *w = width;
  if (h) *h = height;
  return out;
}

inline std::vector<uint8_t> DecodeTj(const std::string& jpeg, int tjpf, int flags, int* w = nullptr,
                                     int* h = nullptr) {
  return DecodeTjScaled(jpeg, tjpf, flags, 1, w, h);
}

}  // namespace stoker::testing
