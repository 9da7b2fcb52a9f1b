// ViewOptions: what one decoded view (--view NAME[:OPTIONS]) does to the
// files it understands, and the parser for its command-line spelling.
//
//   --view decoded                       all defaults
//   --view small:channels=3,dct=accurate,feature=jpeg,on_error=skip
//
// The keys (ViewOptionKeys() lists them, with their values and meaning):
// channels, dct, fancy_upsampling, ratio, max_side (not both, nor with
// decoder=gpu: DecodeParams), feature, on_error, max_pixels, arithmetic,
// decoder (default: the mount's --decoder), fallback (a GPU view: images the
// GPU cannot decode go to the CPU, or fail), compression (how TFRecord files
// are compressed: auto by their name suffix, see CompressionFromName; the
// others for every file, as TFRecordDataset's compression_type says for a
// whole dataset).
// Errors: EINVAL naming the bad key or value; an unknown key's error lists
// the keys.
//
// Fingerprint() names everything that changes a view's bytes; derived
// objects and layouts are keyed by it, so changing an option (or the
// decoder, or this format) never serves bytes made under the old one.
//
// Thread-safety: values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "decode/jpeg/jpeg_decoder.h"
#include "decode/jpeg/jpeg_probe.h"
#include "decode/tfrecord/example_codec.h"
#include "decode/tfrecord/tfrecord_compressed.h"
#include "util/status.h"

namespace stoker {

// Which JpegDecoder a view uses. A GPU view's bytes differ from a CPU
// view's (gpu_jpeg_decoder.h): the decoder's name is in the fingerprint.
enum class ViewDecoder {
  kMount,  // as the mount's --decoder says
  kCpu,
  kGpu,
};

enum class OnError {
  kFail,  // a record or file that does not decode reads as EIO
  kSkip,  // it is left out of the view's layout
};

struct ViewOptions {
  DecodeParams decode;
  // The Example feature holding the JPEG. Default: "image/encoded".
  std::string feature = kDefaultImageFeature;
  // Default: kFail.
  OnError on_error = OnError::kFail;
  JpegProbeOptions probe;
  // Default: kMount.
  ViewDecoder decoder = ViewDecoder::kMount;
  // A GPU view decodes what the GPU cannot (progressive, CMYK, a device
  // error, out of memory) on the CPU, counted in stat. Default: true.
  bool gpu_fallback = true;
  // Compression of every TFRecord file; nullopt (auto): by name suffix.
  // Uncompressed TFRecords are recognised either way. Default: nullopt.
  std::optional<TfRecordCompression> compression;

  // "v1;channels=0;dct=fast;..." plus decoder_name; changes whenever any
  // input to the view's bytes does.
  std::string Fingerprint(const std::string& decoder_name) const;

  // Why this view decodes on the CPU whatever the mount's --decoder says (a
  // ratio other than 1, or max_side: nvJPEG has no DCT scaling); nullptr
  // where the GPU may decode it.
  const char* CpuOnlyReason() const;
};

struct ViewSpec {
  std::string name;
  ViewOptions options;
};

// One key of a view's OPTIONS as ParseViewSpec takes it, for --help and
// errors: values is what it takes ("fast|accurate", "N"; docs/views.md says
// what each does).
struct ViewOptionKey {
  std::string_view key;
  std::string_view values;
};

// Every key ParseViewSpec takes, and no other, in the order to list them.
std::vector<ViewOptionKey> ViewOptionKeys();

// "channels=0|1|3,dct=fast|accurate,...": every key with its values.
std::string ViewOptionSyntax();

// Parses "NAME" or "NAME:key=value,key=value". The name must be a plain
// file name (no '/', not "." or "..", not empty).
Result<ViewSpec> ParseViewSpec(std::string_view spec);

}  // namespace stoker
