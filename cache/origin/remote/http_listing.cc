#include "cache/origin/remote/http_listing.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "cache/origin/origin.h"
#include "cache/origin/remote/http_date.h"
#include "cache/origin/remote/url.h"
#include "cache/origin/remote/xml.h"

namespace stoker {
namespace {

bool UsableName(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos &&
         n.find('\0') == std::string::npos;
}

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

}  // namespace

Result<std::vector<RemoteEntry>> ParseAutoindexJson(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return Status::Corruption("autoindex JSON is not an array");
  std::vector<RemoteEntry> out;
  for (const auto& item : j) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string() ||
        !item.contains("type") || !item["type"].is_string()) {
      return Status::Corruption("autoindex JSON entry without a name and type");
    }
    RemoteEntry e;
    e.name = item["name"].get<std::string>();
    const std::string type = item["type"].get<std::string>();
    if (type != "file" && type != "directory") continue;
    if (!UsableName(e.name)) continue;
    e.is_dir = type == "directory";
    if (!e.is_dir) {
      if (!item.contains("size") || !item["size"].is_number_unsigned()) {
        return Status::Corruption("autoindex JSON file '" + e.name + "' without a size");
      }
      e.size = item["size"].get<uint64_t>();
    }
    if (item.contains("mtime") && item["mtime"].is_string()) {
      e.mtime = ParseHttpDate(item["mtime"].get<std::string>()).value_or(0);
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<RemoteEntry>> ParseAutoindexHtml(const std::string& body) {
  std::vector<RemoteEntry> out;
  const std::string open = "<a href=\"";
  size_t pos = 0;
  for (;;) {
    size_t a = body.find(open, pos);
    if (a == std::string::npos) break;
    size_t q = body.find('"', a + open.size());
    if (q == std::string::npos) return Status::Corruption("autoindex HTML: href not closed");
    std::string href = body.substr(a + open.size(), q - a - open.size());
    size_t close = body.find("</a>", q);
    if (close == std::string::npos) return Status::Corruption("autoindex HTML: link not closed");
    size_t eol = body.find('\n', close);
    std::string rest = Trim(
        body.substr(close + 4, eol == std::string::npos ? std::string::npos : eol - close - 4));
    pos = close + 4;
    std::string unescaped, name;
    if (!DecodeEntities(href, &unescaped) || !PercentDecode(unescaped, &name)) {
      return Status::Corruption("autoindex HTML: bad href '" + href + "'");
    }
    RemoteEntry e;
    if (!name.empty() && name.back() == '/') {
      e.is_dir = true;
      name.pop_back();
    }
    if (href.find("://") != std::string::npos || href.find('?') != std::string::npos) continue;
    if (!UsableName(name)) continue;  // "../", links elsewhere
    e.name = name;
    // "03-Dec-2026 12:00   1234" or "... -" for a directory.
    if (rest.size() >= 17) e.mtime = ParseAutoindexDate(rest.substr(0, 17)).value_or(0);
    std::string size = rest.size() > 17 ? Trim(rest.substr(17)) : "";
    if (!e.is_dir) {
      if (size.empty() || size.find_first_not_of("0123456789") != std::string::npos) {
        return Status::Corruption("autoindex HTML: no exact size for '" + name +
                                  "' (autoindex_exact_size must be on)");
      }
      if (size.size() > 19) {  // more than 64 bits (std::stoull would throw)
        return Status::Corruption("autoindex HTML: size of '" + name + "' is too large");
      }
      e.size = std::stoull(size);
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<RemoteEntry>> ParseAutoindex(const std::string& content_type,
                                                const std::string& body) {
  size_t first = body.find_first_not_of(" \t\r\n");
  bool json = content_type.find("json") != std::string::npos ||
              (first != std::string::npos && body[first] == '[');
  return json ? ParseAutoindexJson(body) : ParseAutoindexHtml(body);
}

Result<Manifest> Manifest::Parse(const std::string& text) {
  Manifest m;
  m.dirs_[""];
  std::set<std::string> files, dirs;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? text.size() + 1 : eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    const std::string where = "manifest line " + std::to_string(line_no);
    size_t blank = t.find_last_of(" \t");
    if (blank == std::string::npos) return Status::Invalid(where + ": expected 'PATH SIZE'");
    std::string size = t.substr(blank + 1);
    std::string path = Trim(t.substr(0, blank));
    if (size.empty() || size.size() > 19 ||
        size.find_first_not_of("0123456789") != std::string::npos) {
      return Status::Invalid(where + ": size '" + size + "' is not a whole number");
    }
    if (path.rfind("./", 0) == 0) path = path.substr(2);
    while (!path.empty() && path[0] == '/') path = path.substr(1);
    if (path.empty() || !IsPlainRelativePath(path)) {
      return Status::Invalid(where + ": '" + path + "' is not a plain relative path");
    }
    if (!files.insert(path).second)
      return Status::Invalid(where + ": '" + path + "' is listed twice");
    if (dirs.count(path))
      return Status::Invalid(where + ": '" + path + "' is a file and a directory");
    std::string dir = ParentOf(path);
    RemoteEntry file;
    file.name = BaseName(path);
    file.size = std::stoull(size);
    m.dirs_[dir].push_back(std::move(file));
    // Its directories not seen before, each entered in its parent.
    while (!dir.empty() && dirs.insert(dir).second) {
      if (files.count(dir))
        return Status::Invalid(where + ": '" + dir + "' is a file and a directory");
      std::string parent = ParentOf(dir);
      RemoteEntry e;
      e.name = BaseName(dir);
      e.is_dir = true;
      m.dirs_[parent].push_back(std::move(e));
      m.dirs_[dir];
      dir = parent;
    }
    if (m.first_file_.empty()) m.first_file_ = path;
    ++m.files_;
  }
  return m;
}

const std::vector<RemoteEntry>* Manifest::Dir(const std::string& dir) const {
  auto it = dirs_.find(dir);
  return it == dirs_.end() ? nullptr : &it->second;
}

const RemoteEntry* Manifest::Find(const std::string& path) const {
  if (path.empty()) return nullptr;
  const std::vector<RemoteEntry>* d = Dir(ParentOf(path));
  if (d == nullptr) return nullptr;
  const std::string name = BaseName(path);
  for (const RemoteEntry& e : *d) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace stoker
