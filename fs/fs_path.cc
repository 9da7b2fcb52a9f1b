#include "fs/fs_path.h"

#include <vector>

namespace stoker {

bool IsValidComponent(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

namespace {

// Strips redundant separators of a '/'-joined path.
std::string_view TrimSlashes(std::string_view p) {
  while (!p.empty() && p.front() == '/') p.remove_prefix(1);
  while (!p.empty() && p.back() == '/') p.remove_suffix(1);
  return p;
}

}  // namespace

Result<std::string> NormalizeClientPath(std::string_view path, std::string_view mountpoint) {
  std::string_view rest = path;
  if (!rest.empty() && rest.front() == '/') {
    std::string_view mp = mountpoint;
    while (mp.size() > 1 && mp.back() == '/') mp.remove_suffix(1);
    const bool under = mp.size() > 1 && rest.substr(0, mp.size()) == mp &&
                       (rest.size() == mp.size() || rest[mp.size()] == '/');
    if (!under) {
      return Status::Invalid("path '" + std::string(path) + "' is not under the mountpoint '" +
                             std::string(mountpoint) + "'");
    }
    rest.remove_prefix(mp.size());
  }
  rest = TrimSlashes(rest);
  std::string out;
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    std::string_view comp = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (comp.empty() || comp == ".") continue;
    if (comp == ".." || comp.find('\0') != std::string_view::npos) {
      return Status::Invalid("path '" + std::string(path) + "' must not contain '..'");
    }
    if (!out.empty()) out.push_back('/');
    out.append(comp);
  }
  return out;
}

}  // namespace stoker
