// Url: the origin URLs stoker takes (s3://BUCKET/PREFIX, http(s)://HOST/PATH/)
// and the percent-encoding that object keys and paths need on the wire.
//
// Credentials never travel in a URL: one with user info ("user:pw@host") is
// refused, so that no error message, log line or stat output can show it.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace stoker {

struct Url {
  std::string scheme;  // lower case: "s3", "http", "https"
  std::string host;    // with ":port" if one was given; the bucket for s3
  std::string path;    // after the host, without the leading '/'; may be ""
};

// Splits "scheme://host[:port]/path". EINVAL with a one-line message for an
// empty host, user info, a query or fragment, or a bad port.
Result<Url> ParseUrl(const std::string& text);

// RFC 3986 encoding: every byte but A-Z a-z 0-9 - _ . ~ becomes %XX (upper
// case hex); '/' is kept when keep_slash. This is also what AWS SigV4 wants
// in canonical paths and query values.
std::string PercentEncode(std::string_view s, bool keep_slash);

// Decodes %XX; false for a malformed escape. '+' stays '+'.
bool PercentDecode(std::string_view s, std::string* out);

}  // namespace stoker
