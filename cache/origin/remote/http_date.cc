#include "cache/origin/remote/http_date.h"

#include <cctype>
#include <cstring>
#include <ctime>
#include <string>

namespace stoker {
namespace {

int MonthOf(std::string_view m) {
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i) {
    if (m.size() == 3 && strncasecmp(m.data(), kMonths[i], 3) == 0) return i;
  }
  return -1;
}

// Reads exactly n digits at *pos.
bool Digits(std::string_view s, size_t* pos, size_t n, int* out) {
  if (*pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[*pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view s, size_t* pos, char c) {
  if (*pos >= s.size() || s[*pos] != c) return false;
  ++*pos;
  return true;
}

std::optional<int64_t> ToEpoch(int year, int mon, int day, int h, int m, int sec) {
  if (mon < 0 || mon > 11 || day < 1 || day > 31 || h > 23 || m > 59 || sec > 60) {
    return std::nullopt;
  }
  struct tm tm = {};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = sec;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

std::optional<int64_t> ParseHttpDate(std::string_view s) {
  size_t pos = 0;
  size_t comma = s.find(',');
  if (comma != std::string_view::npos) pos = comma + 1;
  while (pos < s.size() && s[pos] == ' ') ++pos;
  int day, year, h, m, sec;
  if (!Digits(s, &pos, 2, &day) || !Expect(s, &pos, ' ')) return std::nullopt;
  if (pos + 3 > s.size()) return std::nullopt;
  int mon = MonthOf(s.substr(pos, 3));
  pos += 3;
  if (!Expect(s, &pos, ' ') || !Digits(s, &pos, 4, &year) || !Expect(s, &pos, ' ') ||
      !Digits(s, &pos, 2, &h) || !Expect(s, &pos, ':') || !Digits(s, &pos, 2, &m) ||
      !Expect(s, &pos, ':') || !Digits(s, &pos, 2, &sec)) {
    return std::nullopt;
  }
  if (s.substr(pos) != " GMT") return std::nullopt;
  return ToEpoch(year, mon, day, h, m, sec);
}

std::optional<int64_t> ParseIso8601(std::string_view s) {
  size_t pos = 0;
  int year, mon, day, h, m, sec;
  if (!Digits(s, &pos, 4, &year) || !Expect(s, &pos, '-') || !Digits(s, &pos, 2, &mon) ||
      !Expect(s, &pos, '-') || !Digits(s, &pos, 2, &day) || !Expect(s, &pos, 'T') ||
      !Digits(s, &pos, 2, &h) || !Expect(s, &pos, ':') || !Digits(s, &pos, 2, &m) ||
      !Expect(s, &pos, ':') || !Digits(s, &pos, 2, &sec)) {
    return std::nullopt;
  }
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
    if (pos == start) return std::nullopt;
  }
  if (s.substr(pos) != "Z" && s.substr(pos) != "+00:00") return std::nullopt;
  return ToEpoch(year, mon - 1, day, h, m, sec);
}

std::optional<int64_t> ParseAutoindexDate(std::string_view s) {
  size_t pos = 0;
  int day, year, h, m;
  if (!Digits(s, &pos, 2, &day) || !Expect(s, &pos, '-') || pos + 3 > s.size()) {
    return std::nullopt;
  }
  int mon = MonthOf(s.substr(pos, 3));
  pos += 3;
  if (!Expect(s, &pos, '-') || !Digits(s, &pos, 4, &year) || !Expect(s, &pos, ' ') ||
      !Digits(s, &pos, 2, &h) || !Expect(s, &pos, ':') || !Digits(s, &pos, 2, &m) ||
      pos != s.size()) {
    return std::nullopt;
  }
  return ToEpoch(year, mon, day, h, m, 0);
}

}  // namespace stoker
