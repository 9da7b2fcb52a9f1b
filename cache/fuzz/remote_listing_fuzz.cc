// Fuzzes what remote origins parse from servers they do not control: S3
// ListObjectsV2 pages and error documents (and the XML reader under them),
// nginx autoindex listings (JSON and HTML) and --manifest files. The first
// byte picks the parser.
// Invariants: nothing crashes, hangs or reads out of bounds; no listing ever
// yields a name that is not one plain path component ("", ".", "..", '/' or
// NUL would let a server name paths outside the tree); a truncated S3 page
// always carries its continuation token; a manifest's tree, walked from its
// root, holds plain names only and exactly its files. (Turning S3 keys into
// names is S3Origin's, checked against a real server by test_s3_origin.)
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cache/origin/origin.h"
#include "cache/origin/remote/http_listing.h"
#include "cache/origin/remote/remote_entry.h"
#include "cache/origin/remote/s3_list.h"
#include "cache/origin/remote/xml.h"

namespace {

using namespace stoker;

void Check(bool ok) {
  if (!ok) std::abort();
}

bool PlainName(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos &&
         n.find('\0') == std::string::npos;
}

void CheckEntries(const Result<std::vector<RemoteEntry>>& entries) {
  if (!entries.ok()) return;
  for (const RemoteEntry& e : *entries) Check(PlainName(e.name));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      auto page = ParseListObjectsV2(in);
      if (page.ok() && page->truncated) Check(!page->next_token.empty());
      (void)S3ErrorCode(in);
      break;
    }
    case 1:
      (void)ParseXml(in);
      break;
    case 2:
      CheckEntries(ParseAutoindexJson(in));
      break;
    case 3:
      CheckEntries(ParseAutoindexHtml(in));
      break;
    case 4: {
      auto manifest = Manifest::Parse(in);
      if (!manifest.ok()) break;
      Check(manifest->Dir("") != nullptr);
      // Every directory reachable from the root: plain names, and each
      // subdirectory listed in turn.
      std::vector<std::string> dirs = {""};
      size_t files = 0;
      while (!dirs.empty() && dirs.size() < 100000) {
        const std::string dir = dirs.back();
        dirs.pop_back();
        const std::vector<RemoteEntry>* entries = manifest->Dir(dir);
        Check(entries != nullptr);
        for (const RemoteEntry& e : *entries) {
          Check(PlainName(e.name));
          const std::string path = dir.empty() ? e.name : dir + "/" + e.name;
          Check(IsPlainRelativePath(path) && manifest->Find(path) != nullptr);
          if (e.is_dir) {
            dirs.push_back(path);
          } else {
            ++files;
          }
        }
      }
      Check(files == manifest->files());
      break;
    }
  }
  return 0;
}
