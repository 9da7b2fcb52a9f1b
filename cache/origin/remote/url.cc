#include "cache/origin/remote/url.h"

#include <cctype>

namespace stoker {

Result<Url> ParseUrl(const std::string& text) {
  const std::string what = "origin URL '" + text + "'";
  size_t sep = text.find("://");
  if (sep == std::string::npos || sep == 0) return Status::Invalid(what + ": no scheme");
  Url u;
  for (size_t i = 0; i < sep; ++i) {
    u.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  size_t host_start = sep + 3;
  size_t slash = text.find('/', host_start);
  std::string authority =
      text.substr(host_start, slash == std::string::npos ? std::string::npos : slash - host_start);
  if (authority.find('@') != std::string::npos) {
    // Shown without the authority: it holds a password.
    return Status::Invalid("origin URL " + u.scheme +
                           "://...: credentials in the URL are not supported");
  }
  if (text.find_first_of("?#") != std::string::npos) {
    return Status::Invalid(what + ": a query or fragment is not supported");
  }
  if (authority.empty()) return Status::Invalid(what + ": no host");
  for (unsigned char c : authority) {
    if (std::isspace(c) || c < 0x20) return Status::Invalid(what + ": bad host");
  }
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']') == std::string::npos) {
    std::string port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) == 0 ||
        std::stoul(port) > 65535) {
      return Status::Invalid(what + ": bad port '" + port + "'");
    }
    if (colon == 0) return Status::Invalid(what + ": no host");
  }
  u.host = authority;
  u.path = slash == std::string::npos ? "" : text.substr(slash + 1);
  return u;
}

std::string PercentEncode(std::string_view s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool PercentDecode(std::string_view s, std::string* out) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      *out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return false;
    int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace stoker
