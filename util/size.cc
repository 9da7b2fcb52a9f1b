#include "util/size.h"

#include <cctype>
#include <cmath>

namespace stoker {

Result<uint64_t> ParseSize(const std::string& text) {
  auto bad = [&](const char* why) {
    return Status::Invalid("invalid size '" + text + "': " + why);
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  std::string number = text.substr(0, i);
  if (number.empty() || number == ".") return bad("expected a number such as 512M or 200G");
  if (number.find('.') != number.rfind('.')) return bad("more than one decimal point");
  std::string suffix;
  for (size_t j = i; j < text.size(); ++j) {
    suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(text[j])));
  }
  if (suffix.size() >= 3 && suffix.substr(suffix.size() - 2) == "IB") {
    suffix.resize(suffix.size() - 2);
  } else if (suffix.size() >= 2 && suffix.back() == 'B') {
    suffix.pop_back();
  } else if (suffix == "B") {
    suffix.clear();
  }
  int shift = 0;
  if (suffix.empty()) {
    shift = 0;
  } else if (suffix.size() == 1) {
    const std::string units = "KMGTPE";
    size_t pos = units.find(suffix[0]);
    if (pos == std::string::npos) return bad("unknown unit (use K, M, G, T, P or E)");
    shift = 10 * static_cast<int>(pos + 1);
  } else {
    return bad("unknown unit (use K, M, G, T, P or E)");
  }
  if (number.find('.') == std::string::npos) {
    if (number.size() > 20) return bad("too large");
    unsigned long long v = 0;
    for (char c : number) {
      unsigned long long d = static_cast<unsigned long long>(c - '0');
      if (v > (UINT64_MAX - d) / 10) return bad("too large");
      v = v * 10 + d;
    }
    if (shift > 0 && v > (UINT64_MAX >> shift)) return bad("too large");
    return static_cast<uint64_t>(v << shift);
  }
  long double v = std::strtold(number.c_str(), nullptr);
  v = std::ldexp(v, shift);
  if (!(v < 18446744073709551615.0L)) return bad("too large");
  return static_cast<uint64_t>(std::llround(v));
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : (v < 100 ? "%.1f %s" : "%.0f %s"), v,
                kUnits[u]);
  return buf;
}

}  // namespace stoker
