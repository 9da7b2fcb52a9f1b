// DerivedSource: what the cache asks about files made from other files of
// the same cache (a decoded view's, decode/view/), beyond what any origin
// answers. Their attributes, listings and bytes come through the Origin seam
// (Stat, ReadDir, Open: for a reader), or through StatFor and ReadDirFor
// for the cache's own work; this interface says which paths those are and
// what only their maker knows: which ranges read as errors, and when a
// waiting reader should move work up. fs/ never asks it: the cache does,
// and gives fs/ one Status.
//
// A mount without views has none (ObjectCache::Open's derived is null:
// nothing is derived).
//
// Thread-safety: every method may be called from any thread at once.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/origin/origin.h"
#include "util/status.h"

namespace stoker {

class DerivedSource {
 public:
  virtual ~DerivedSource() = default;

  // True if path's content is made from other paths of the same cache (a
  // decoded view reads its raw file through the cache): Stat and Open of it
  // may open those paths in the cache, so the cache locks derived paths
  // apart from (and before) plain ones.
  virtual bool IsDerived(const std::string& path) const = 0;

  // For a derived path: the st_dev its Stat gives (kDerivedDevBit set), which
  // names what it is derived with (a view's options and decoder). The cache
  // takes no record of the path made under another device for this one, not
  // even within --revalidate or while the origin is unreachable. 0 for a
  // plain path.
  virtual uint64_t DerivedDevice(const std::string& path) const = 0;

  // Whether a reader may have [off, off + len) of a derived path: EIO where
  // the range holds bytes that did not decode (a decoded view's failed
  // records, which its data holds as zeros). The cache asks before and after
  // each read of a derived file (the read itself may find such a record).
  virtual Status CheckRead(const std::string& path, uint64_t off, uint64_t len) = 0;

  // Whether some range of a derived path reads as EIO now (CheckRead would
  // refuse it), without counting a failed read: such a file must be read
  // through the cache, never leased whole to the kernel.
  virtual bool HasUnreadableRanges(const std::string& path) = 0;

  // Stat and ReadDir of a derived path as the Origin seam answers them, for
  // work done for who: what the source makes to answer (a decoded view's
  // layout) is made at who's priority. The cache asks these for its own
  // work (a prefetch's or a warm's open, a warm's walk); the Origin seam's
  // Stat and ReadDir are a reader's.
  virtual Result<struct stat> StatFor(const std::string& path, Urgency who) = 0;
  virtual Status ReadDirFor(const std::string& path, Urgency who,
                            const std::function<bool(const OriginDirEntry&)>& fn) = 0;

  // A caller (for whom: who) is waiting on data of path that other work is
  // producing now (a reader that joined a prefetch's or a warm's fetch of a
  // chunk): a source that schedules its own work (a decoded view's decode
  // jobs) may move that work up to who's urgency. A hint: it changes no
  // result, and work that has not begun yet may not be found.
  virtual void Expedite(const std::string& path, Urgency who) = 0;

  // The derived paths made from the plain path prefix or from what lies
  // below it, as prefixes in IsAtOrUnder's sense (util/path.h): what
  // `stoker refresh` of prefix marks unchecked beside it. Default: none.
  virtual std::vector<std::string> DerivedPrefixes(const std::string& prefix) const {
    (void)prefix;
    return {};
  }
};

// A mount without decoded views: no path is derived.
class NothingDerived final : public DerivedSource {
 public:
  bool IsDerived(const std::string&) const override { return false; }
  uint64_t DerivedDevice(const std::string&) const override { return 0; }
  Status CheckRead(const std::string&, uint64_t, uint64_t) override { return Status::OK(); }
  bool HasUnreadableRanges(const std::string&) override { return false; }
  Result<struct stat> StatFor(const std::string& path, Urgency) override {
    return NotDerived(path);
  }
  Status ReadDirFor(const std::string& path, Urgency,
                    const std::function<bool(const OriginDirEntry&)>&) override {
    return NotDerived(path);
  }
  void Expedite(const std::string&, Urgency) override {}

 private:
  static Status NotDerived(const std::string& path) {
    return Status::NotFound("'" + path + "' is not a derived file");
  }
};

}  // namespace stoker
