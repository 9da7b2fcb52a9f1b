#include "decode/view/view_options.h"

#include <charconv>

namespace stoker {
namespace {

// Bump when the bytes a view produces change for the same inputs.
constexpr const char* kViewFormatVersion = "v1";

Result<bool> ParseBool(std::string_view key, std::string_view v) {
  if (v == "true" || v == "1" || v == "on") return true;
  if (v == "false" || v == "0" || v == "off") return false;
  return Status::Invalid("view option " + std::string(key) + ": '" + std::string(v) +
                         "' is not true or false");
}

Status SetOption(std::string_view key, std::string_view v, ViewOptions* o) {
  auto bad = [&](const char* want) {
    return Status::Invalid("view option " + std::string(key) + ": '" + std::string(v) +
                           "' is not " + want);
  };
  if (key == "channels") {
    if (v == "0" || v == "1" || v == "3") {
      o->decode.channels = v[0] - '0';
      return Status::OK();
    }
    return bad("0, 1 or 3");
  }
  if (key == "dct") {
    if (v == "fast") {
      o->decode.dct = DctMethod::kFast;
    } else if (v == "accurate") {
      o->decode.dct = DctMethod::kAccurate;
    } else {
      return bad("fast or accurate");
    }
    return Status::OK();
  }
  if (key == "fancy_upsampling") {
    STOKER_ASSIGN_OR_RETURN(o->decode.fancy_upsampling, ParseBool(key, v));
    return Status::OK();
  }
  if (key == "feature") {
    if (v.empty()) return bad("a feature name");
    if (v == kHeightFeature || v == kWidthFeature || v == kChannelsFeature) {
      return bad("a feature other than the shape features");
    }
    o->feature = std::string(v);
    return Status::OK();
  }
  if (key == "on_error") {
    if (v == "fail") {
      o->on_error = OnError::kFail;
    } else if (v == "skip") {
      o->on_error = OnError::kSkip;
    } else {
      return bad("fail or skip");
    }
    return Status::OK();
  }
  if (key == "max_pixels") {
    uint64_t n = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), n);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size() || n == 0) {
      return bad("a positive number");
    }
    o->probe.max_pixels = n;
    return Status::OK();
  }
  if (key == "arithmetic") {
    STOKER_ASSIGN_OR_RETURN(o->probe.allow_arithmetic, ParseBool(key, v));
    return Status::OK();
  }
  if (key == "decoder") {
    if (v == "cpu") {
      o->decoder = ViewDecoder::kCpu;
    } else if (v == "gpu") {
      o->decoder = ViewDecoder::kGpu;
    } else {
      return bad("cpu or gpu");
    }
    return Status::OK();
  }
  if (key == "fallback") {
    if (v == "cpu") {
      o->gpu_fallback = true;
    } else if (v == "none") {
      o->gpu_fallback = false;
    } else {
      return bad("cpu or none");
    }
    return Status::OK();
  }
  if (key == "compression") {
    if (v == "auto") {
      o->compression.reset();
    } else if (v == "none") {
      o->compression = TfRecordCompression::kNone;
    } else if (v == "gzip") {
      o->compression = TfRecordCompression::kGzip;
    } else if (v == "zlib") {
      o->compression = TfRecordCompression::kZlib;
    } else {
      return bad("auto, none, gzip or zlib");
    }
    return Status::OK();
  }
  return Status::Invalid("unknown view option '" + std::string(key) + "'");
}

}  // namespace

std::string ViewOptions::Fingerprint(const std::string& decoder_name) const {
  std::string f = kViewFormatVersion;
  f += ";channels=" + std::to_string(decode.channels);
  f += decode.dct == DctMethod::kFast ? ";dct=fast" : ";dct=accurate";
  f += decode.fancy_upsampling ? ";fancy=1" : ";fancy=0";
  f += ";feature=" + feature;
  // skip+check: its layouts leave out what does not decode (view_layout.h),
  // so those stored before that was done are not used.
  f += on_error == OnError::kFail ? ";on_error=fail" : ";on_error=skip+check";
  f += ";max_pixels=" + std::to_string(probe.max_pixels);
  f += probe.allow_arithmetic ? ";arith=1" : ";arith=0";
  f += ";decoder=" + decoder_name;
  // Which files are in the view, not their bytes; named all the same, and
  // only when set, so that caches made before it keep their layouts.
  if (compression) {
    static const char* kNames[] = {"none", "gzip", "zlib"};
    f += std::string(";compression=") + kNames[static_cast<int>(*compression)];
  }
  return f;
}

Result<ViewSpec> ParseViewSpec(std::string_view spec) {
  ViewSpec out;
  const size_t colon = spec.find(':');
  out.name = std::string(spec.substr(0, colon));
  if (out.name.empty() || out.name == "." || out.name == ".." ||
      out.name.find('/') != std::string::npos || out.name.find('\0') != std::string::npos) {
    return Status::Invalid("view name '" + out.name + "' is not a plain file name");
  }
  if (colon == std::string_view::npos) return out;
  std::string_view rest = spec.substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::Invalid("view option '" + std::string(item) + "' is not key=value");
    }
    STOKER_RETURN_IF_ERROR(SetOption(item.substr(0, eq), item.substr(eq + 1), &out.options));
  }
  return out;
}

}  // namespace stoker
