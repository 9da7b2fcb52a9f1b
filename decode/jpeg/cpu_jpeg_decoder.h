// The CPU JpegDecoder: libjpeg-turbo through its libjpeg API, set up exactly
// as TensorFlow's tensorflow/core/lib/jpeg/jpeg_mem.cc does for
// tf.io.decode_jpeg (no crop, try_recover_truncated=False,
// acceptable_fraction=1), so its pixels equal TensorFlow's bit for bit when
// both use the same libjpeg-turbo: same out_color_space choice (CMYK/YCCK
// decoded as CMYK and converted to RGB with TensorFlow's formula), same
// dct_method and do_fancy_upsampling, scale_num = 1 and scale_denom = the
// ratio (ScaleRatio: libjpeg scales in the DCT domain, and sizes the output
// as ScaledSide), other decompression parameters at libjpeg's defaults, and
// a memory source that fails on premature end of data instead of padding.
//
// Errors go through a setjmp/longjmp error manager (libjpeg never calls
// exit()); messages carry libjpeg's text. Each Decode call has its own
// decompressor, so calls are independent.
//
// Thread-safety: Decode is safe from many threads at once.
#pragma once

#include <memory>

#include "decode/jpeg/jpeg_decoder.h"
#include "util/status.h"

namespace stoker {

struct CpuJpegDecoderOptions {
  // libjpeg's max_memory_to_use for one decode: progressive JPEGs buffer
  // every coefficient (about 2 bytes per sample); past this the decode
  // fails with ENOMEM rather than growing. Default: 1 GiB.
  size_t max_memory_bytes = size_t{1} << 30;
};

std::unique_ptr<JpegDecoder> NewCpuJpegDecoder(const CpuJpegDecoderOptions& options = {});

// Whether a JPEG decodes, as the CPU decoder's Decode decides it, without
// making pixels: libjpeg reads the headers and entropy-decodes every scan up
// to the EOI (jpeg_read_coefficients), so it fails where Decode fails on the
// data (a scan cut short, a bad table or marker between scans), with the same
// errors, but skips the IDCT, upsampling and colour conversion; a single
// Huffman-coded scan whose data runs into an EOI (which it then cannot fail
// on) is not even entropy-decoded, only its tables are built. What it
// cannot see: an output the caller's buffer does not fit (EINVAL in Decode),
// which the probe and OutputShape decide. Warnings pass, as in Decode.
// Thread-safe.
Status CheckJpegDecodes(const uint8_t* jpeg, size_t len, const CpuJpegDecoderOptions& options = {});

}  // namespace stoker
