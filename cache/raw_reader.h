// RawReader: how a maker of derived files (a decoded view, decode/view/)
// reads the files it derives from: through the cache that caches them, as
// the cache's own background work, never from the origin directly. It is
// all a view may ask of the cache; the cache asks the view back only
// through DerivedSource (cache/derived_source.h).
//
// The ObjectCache is the RawReader. A mount's views are made by
// ObjectCache::Open (its make_derived) with the cache they read through, so
// a view never exists without its reader and nothing is attached later.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/recent_bytes.h"
#include "util/status.h"

namespace stoker {

class OpenFileState;  // private to cache/

// One piece of a read reply: either bytes in a file (fd, off) to be spliced
// zero-copy, or bytes in memory.
struct ReadSegment {
  int fd = -1;
  off_t off = 0;
  const char* mem = nullptr;
  size_t len = 0;
};

// What a read returns. Holds the pins and buffers its segments refer to.
class ReadReply {
 public:
  ReadReply() = default;
  ReadReply(const ReadReply&) = delete;
  ReadReply& operator=(const ReadReply&) = delete;
  ~ReadReply();
  const std::vector<ReadSegment>& segments() const { return segments_; }
  size_t size() const;

  // For cache/ internals.
  struct Keepalive {
    virtual ~Keepalive() = default;
  };
  void AddFd(int fd, off_t off, size_t len) { segments_.push_back({fd, off, nullptr, len}); }
  void AddMem(const char* p, size_t len) { segments_.push_back({-1, 0, p, len}); }
  void Keep(std::unique_ptr<Keepalive> k) { keep_.push_back(std::move(k)); }

 private:
  std::vector<ReadSegment> segments_;
  std::vector<std::unique_ptr<Keepalive>> keep_;
};

class RawReader {
 public:
  virtual ~RawReader() = default;

  struct Opened {
    std::shared_ptr<OpenFileState> file;
    // The cached version is the one the kernel may already hold pages of:
    // safe to set FOPEN_KEEP_CACHE.
    bool keep_cache = false;
    // The origin file changed since this daemon last saw it: fs/ must
    // invalidate the kernel's cache for the inode (outside this request).
    bool changed = false;
    // Names the content of the version opened: equal tags, equal bytes. fs/
    // binds each kernel inode to one tag (the kernel keeps one page cache per
    // inode), so a changed file gets a new inode. Hard links of one origin
    // file opened by their two names get one tag.
    uint64_t content_tag = 0;
    struct stat st {};  // attributes of the version opened
    // The version's chunks go to a data file of its own (not a slab slot,
    // not empty): once it is held whole, an open of it may be passed
    // through to that file (fs/passthrough.h).
    bool own_data_file = false;
  };
  // Opens path as the cache's own background work does (warm, prefetch):
  // for a derived object (a decoded view) reading its source. A change
  // found here is left for the next Open to report to fs/; no directory
  // scan is started. keep_cache and changed are always false.
  virtual Result<Opened> OpenForDerived(const std::string& path) = 0;

  // Small values made from the version an OpenFileState reads (a view's
  // layout), kept in the index under name and dropped with that version.
  // Get: nullopt if none. Put on a superseded version is a no-op.
  virtual Result<std::optional<std::string>> GetDerived(const OpenFileState& file,
                                                        const std::string& name) = 0;
  virtual Status PutDerived(const OpenFileState& file, const std::string& name,
                            const std::string& value) = 0;

  // Reads [off, off+len) of an opened file, clipped to its size. Fills out.
  // Detects sequential access per OpenFileState and prefetches ahead.
  virtual Status Read(OpenFileState& file, uint64_t off, size_t len, ReadReply* out) = 0;
  // Where a derived file keeps what it produced and will be asked for
  // again (RecentBytes::Kind::kProduced): the cache's one bounded store of
  // such bytes, not a buffer of the view's own.
  virtual RecentBytes& recent() = 0;
};

}  // namespace stoker
