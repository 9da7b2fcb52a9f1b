// The CPU JpegDecoder: libjpeg-turbo through its libjpeg API, set up exactly
// as TensorFlow's tensorflow/core/lib/jpeg/jpeg_mem.cc does for
// tf.io.decode_jpeg (ratio 1, no crop, try_recover_truncated=False,
// acceptable_fraction=1), so its pixels equal TensorFlow's bit for bit when
// both use the same libjpeg-turbo: same out_color_space choice (CMYK/YCCK
// decoded as CMYK and converted to RGB with TensorFlow's formula), same
// dct_method and do_fancy_upsampling, other decompression parameters at
// libjpeg's defaults, and a memory source that fails on premature end of
// data instead of padding.
//
// Errors go through a setjmp/longjmp error manager (libjpeg never calls
// exit()); messages carry libjpeg's text. Each Decode call has its own
// decompressor, so calls are independent.
//
// Thread-safety: Decode is safe from many threads at once.
#pragma once

#include <memory>

#include "decode/jpeg_decoder.h"

namespace stoker {

struct CpuJpegDecoderOptions {
  // libjpeg's max_memory_to_use for one decode: progressive JPEGs buffer
  // every coefficient (about 2 bytes per sample); past this the decode
  // fails with ENOMEM rather than growing. Default: 1 GiB.
  size_t max_memory_bytes = size_t{1} << 30;
};

std::unique_ptr<JpegDecoder> NewCpuJpegDecoder(const CpuJpegDecoderOptions& options = {});

}  // namespace stoker
