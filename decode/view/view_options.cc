#include "decode/view/view_options.h"

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

namespace stoker {
namespace {

// Bump when the bytes a view produces change for the same inputs.
constexpr const char* kViewFormatVersion = "v1";

// "view option KEY: 'V' is not WANT": every option's error says so.
Status NotA(std::string_view key, std::string_view v, const std::string& want) {
  return Status::Invalid("view option " + std::string(key) + ": '" + std::string(v) + "' is not " +
                         want);
}

Result<bool> ParseBool(std::string_view key, std::string_view v) {
  if (v == "true" || v == "1" || v == "on") return true;
  if (v == "false" || v == "0" || v == "off") return false;
  return NotA(key, v, "true or false");
}

// The value of the choice named v; else the error names them all ("a or
// b", "a, b or c").
template <typename T>
Result<T> ParseChoice(std::string_view key, std::string_view v,
                      std::initializer_list<std::pair<std::string_view, T>> choices) {
  std::string names;
  size_t i = 0;
  for (const auto& [name, value] : choices) {
    if (name == v) return value;
    names += (i == 0 ? "" : i + 1 < choices.size() ? ", " : " or ") + std::string(name);
    ++i;
  }
  return NotA(key, v, names);
}

// The feature holding the images: any but the shape features a view adds.
Result<std::string> ParseFeature(std::string_view key, std::string_view v) {
  if (v.empty()) return NotA(key, v, "a feature name");
  if (v == kHeightFeature || v == kWidthFeature || v == kChannelsFeature) {
    return NotA(key, v, "a feature other than the shape features");
  }
  return std::string(v);
}

Result<uint64_t> ParsePositive(std::string_view key, std::string_view v) {
  uint64_t n = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || n == 0) {
    return NotA(key, v, "a positive number");
  }
  return n;
}

// *field = r's value, or r's error.
template <typename T, typename R>
Status Assign(T* field, Result<R> r) {
  if (!r.ok()) return r.status();
  *field = std::move(r).value();
  return Status::OK();
}

// Status (*)(key, value, options): sets one key's field from its value.
using SetFn = Status (*)(std::string_view, std::string_view, ViewOptions*);

struct KeyEntry {
  ViewOptionKey doc;
  SetFn set;
};

// Every key, in the order --help and docs/views.md list them.
const KeyEntry kKeys[] = {
    {{"channels", "0|1|3"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->decode.channels, ParseChoice<int>(k, v, {{"0", 0}, {"1", 1}, {"3", 3}}));
     }},
    {{"dct", "fast|accurate"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->decode.dct,
                     ParseChoice<DctMethod>(
                         k, v, {{"fast", DctMethod::kFast}, {"accurate", DctMethod::kAccurate}}));
     }},
    {{"fancy_upsampling", "true|false"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->decode.fancy_upsampling, ParseBool(k, v));
     }},
    {{"ratio", "1|2|4|8"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->decode.ratio,
                     ParseChoice<int>(k, v, {{"1", 1}, {"2", 2}, {"4", 4}, {"8", 8}}));
     }},
    {{"max_side", "N"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       STOKER_ASSIGN_OR_RETURN(uint64_t side, ParsePositive(k, v));
       if (side > UINT32_MAX) return NotA(k, v, "a side in pixels");
       o->decode.max_side = static_cast<uint32_t>(side);
       return Status::OK();
     }},
    {{"feature", "KEY"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->feature, ParseFeature(k, v));
     }},
    {{"on_error", "fail|skip"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->on_error, ParseChoice<OnError>(
                                       k, v, {{"fail", OnError::kFail}, {"skip", OnError::kSkip}}));
     }},
    {{"max_pixels", "N"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->probe.max_pixels, ParsePositive(k, v));
     }},
    {{"arithmetic", "true|false"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->probe.allow_arithmetic, ParseBool(k, v));
     }},
    {{"decoder", "cpu|gpu"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->decoder,
                     ParseChoice<ViewDecoder>(
                         k, v, {{"cpu", ViewDecoder::kCpu}, {"gpu", ViewDecoder::kGpu}}));
     }},
    {{"fallback", "cpu|none"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->gpu_fallback, ParseChoice<bool>(k, v, {{"cpu", true}, {"none", false}}));
     }},
    {{"compression", "auto|none|gzip|zlib"},
     [](std::string_view k, std::string_view v, ViewOptions* o) -> Status {
       return Assign(&o->compression, ParseChoice<std::optional<TfRecordCompression>>(
                                          k, v,
                                          {{"auto", std::nullopt},
                                           {"none", TfRecordCompression::kNone},
                                           {"gzip", TfRecordCompression::kGzip},
                                           {"zlib", TfRecordCompression::kZlib}}));
     }},
};

Status SetOption(std::string_view key, std::string_view v, ViewOptions* o) {
  for (const KeyEntry& e : kKeys) {
    if (e.doc.key == key) return e.set(key, v, o);
  }
  std::string names;
  for (const KeyEntry& e : kKeys) names += (names.empty() ? "" : ", ") + std::string(e.doc.key);
  return Status::Invalid("unknown view option '" + std::string(key) + "' (the options: " + names +
                         ")");
}

}  // namespace

std::vector<ViewOptionKey> ViewOptionKeys() {
  std::vector<ViewOptionKey> keys;
  for (const KeyEntry& e : kKeys) keys.push_back(e.doc);
  return keys;
}

std::string ViewOptionSyntax() {
  std::string out;
  for (const KeyEntry& e : kKeys) {
    out += (out.empty() ? "" : ",") + std::string(e.doc.key) + "=" + std::string(e.doc.values);
  }
  return out;
}

const char* ViewOptions::CpuOnlyReason() const {
  if (decode.ratio != 1) return "ratio= needs DCT scaling, which nvJPEG does not have";
  if (decode.max_side != 0) return "max_side= needs DCT scaling, which nvJPEG does not have";
  return nullptr;
}

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
  // Named only when set, so that caches made before these keep their layouts.
  if (decode.ratio != 1) f += ";ratio=" + std::to_string(decode.ratio);
  if (decode.max_side != 0) f += ";max_side=" + std::to_string(decode.max_side);
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
  const DecodeParams& d = out.options.decode;
  if (d.max_side != 0 && d.ratio != 1) {
    return Status::Invalid("view options ratio=" + std::to_string(d.ratio) +
                           " and max_side=" + std::to_string(d.max_side) + " exclude each other");
  }
  if (out.options.decoder == ViewDecoder::kGpu && out.options.CpuOnlyReason() != nullptr) {
    return Status::Invalid(std::string("view option decoder=gpu: ") + out.options.CpuOnlyReason());
  }
  return out;
}

}  // namespace stoker
