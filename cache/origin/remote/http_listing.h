// Directory listings of an HTTP origin: nginx's autoindex pages (JSON or
// HTML) and a manifest file (one "PATH SIZE" per line).
//
// Entries that cannot be paths of stoker's tree ("", ".", "..", a '/' or NUL
// in a name, nginx's "other" type) are left out.
//
// Thread-safety: pure functions; a Manifest is immutable once parsed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cache/origin/remote/remote_entry.h"
#include "util/status.h"

namespace stoker {

// autoindex_format json: [{"name":..., "type":"file"|"directory", "mtime":
// "<HTTP date>", "size":N}, ...]. EBADMSG if it is not that.
Result<std::vector<RemoteEntry>> ParseAutoindexJson(const std::string& body);

// autoindex_format html: '<a href="NAME">...</a>  DD-Mon-YYYY HH:MM  SIZE'
// lines (sizes exact: autoindex_exact_size on, nginx's default).
Result<std::vector<RemoteEntry>> ParseAutoindexHtml(const std::string& body);

// Either of the two, by content type (or the body's first character).
Result<std::vector<RemoteEntry>> ParseAutoindex(const std::string& content_type,
                                                const std::string& body);

// A tree given up front. Lines: "PATH SIZE" (the last blank-separated field
// is the size, so paths may hold blanks); blank lines and '#' comments are
// skipped; a leading '/' or "./" is dropped. Directories are implied by the
// paths. Modification times are unknown (0) until a HEAD tells them.
class Manifest {
 public:
  // EINVAL naming the line for a bad line, a duplicate, or a path that is a
  // file and a directory at once.
  static Result<Manifest> Parse(const std::string& text);

  // The entries of dir, or null if dir is not a directory of the manifest.
  const std::vector<RemoteEntry>* Dir(const std::string& dir) const;
  // The entry of path (never the root), or null.
  const RemoteEntry* Find(const std::string& path) const;
  size_t files() const { return files_; }
  // Some file of the manifest ("" if none), for probing the server.
  const std::string& first_file() const { return first_file_; }

 private:
  std::map<std::string, std::vector<RemoteEntry>> dirs_;
  size_t files_ = 0;
  std::string first_file_;
};

}  // namespace stoker
