#include "util/path.h"

namespace stoker {

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out;
  out.reserve(dir.size() + 1 + name.size());
  out.append(dir);
  if (!dir.empty() && dir.back() != '/') out.push_back('/');
  out.append(name);
  return out;
}

std::string ParentOf(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return "";
  return std::string(slash == 0 ? path.substr(0, 1) : path.substr(0, slash));
}

std::string BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::pair<std::string, std::string> SplitPath(std::string_view path) {
  return {ParentOf(path), BaseName(path)};
}

bool IsAtOrUnder(std::string_view path, std::string_view prefix) {
  if (prefix.empty() || path == prefix) return true;
  return path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix &&
         path[prefix.size()] == '/';
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace stoker
