// RecentBytes: the one store of bytes the daemon made recently and expects
// to be asked for again soon, held in memory under one bound
// (CacheOptions::recent_bytes). Every such holder is a group of its
// entries, so that no performance fix grows a buffer of its own:
//
//   kReadahead  one open file's chunks, fetched ahead of its reader or for
//               it (Readahead): its next reads find them even when a full
//               cache did not keep them. Held until the reader passes them
//               or the file closes.
//   kUnstored   chunks fetched from the origin whose store into the cache is
//               put off until their reader has its reply (ChunkFetch): a read
//               of one meanwhile takes these bytes, not the origin's again.
//               Held until stored.
//   kProduced   bytes a maker of derived files produced (a decoded view's
//               record cut by the end of a read, a decoded image): the next
//               read of that file, in this open or another, copies them
//               instead of decoding again. Kept while room lasts.
//
// Held entries (Hold) stay until dropped; a Hold that would pass the bound,
// or its kind's share of it, holds nothing: its reader fetches again rather
// than the daemon growing. Kept entries (Keep) give way, oldest first, to
// any entry that wants their room. All of it is memory only: a crash or a
// restart loses nothing the cache needs.
//
// Bytes are shared, never copied: an entry and every ChunkBytes taken from
// it keep the same buffer alive, so dropping an entry never invalidates
// bytes a reader holds.
//
// Thread-safety: all methods are thread-safe; the lock is a leaf (taken
// under the caller's locks, never calling out while held).
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "cache/chunk.h"
#include "util/mutex.h"

namespace stoker {

class RecentBytes {
 public:
  enum class Kind : uint8_t { kReadahead = 0, kUnstored = 1, kProduced = 2 };
  static constexpr size_t kKinds = 3;

  // An entry's name: a group (kind, a, b) and an index within it.
  //   kReadahead: a = the Readahead's NewGroup(), b = 0, index = chunk.
  //   kUnstored:  a = object id, b = version, index = chunk.
  //   kProduced:  a = what the maker names a file version by (kept alive by
  //               the entry's pin), b = 0, index = its record.
  struct Key {
    Kind kind = Kind::kReadahead;
    uint64_t a = 0, b = 0;
    uint64_t index = 0;
    auto operator<=>(const Key&) const = default;
  };

  struct Limits {
    uint64_t total = 384ull << 20;      // all entries together
    uint64_t readahead = 256ull << 20;  // kReadahead entries
    uint64_t unstored = 64ull << 20;    // kUnstored entries
    // kProduced entries. Small: most are records another read already
    // used (a read that cut a record at its start decodes it too), left to
    // give way; their buffers go back to the decode pool's free list when
    // they do.
    uint64_t produced = 64ull << 20;
  };
  explicit RecentBytes(Limits limits) : limits_(limits) {}
  RecentBytes(const RecentBytes&) = delete;
  RecentBytes& operator=(const RecentBytes&) = delete;
  ~RecentBytes();

  // A group number no one else uses (for kReadahead keys).
  uint64_t NewGroup();

  // Holds bytes under key until dropped. With max_in_group, a group that
  // holds that many already drops its lowest-indexed entries first. False,
  // and nothing held, if key is taken or the bound (or the kind's share)
  // would be passed once kept entries gave their room.
  bool Hold(const Key& key, const ChunkBytes& bytes, size_t max_in_group = SIZE_MAX);
  // Keeps bytes under key (replacing what it had) while room lasts: the
  // oldest kept entries go to make room, within the bound and the kProduced
  // share; more than the room left beside held entries keeps nothing. pin lives as long as the
  // entry (what names the group, so that its address is not reused meanwhile).
  void Keep(const Key& key, const ChunkBytes& bytes, std::shared_ptr<const void> pin = nullptr);

  std::optional<ChunkBytes> Get(const Key& key) const;
  bool Contains(const Key& key) const;
  void Drop(const Key& key);
  // Drops the group's entries with index < end (all of them: UINT64_MAX).
  void DropBelow(Kind kind, uint64_t a, uint64_t b, uint64_t end);

  uint64_t bytes() const;
  uint64_t bytes(Kind kind) const;
  const Limits& limits() const { return limits_; }

 private:
  struct Entry {
    ChunkBytes bytes;
    std::shared_ptr<const void> pin;
    std::list<Key>::iterator kept;  // in kept_order_; kProduced only
  };
  using Map = std::map<Key, Entry>;
  // Takes it out of the map; its bytes go to *gone, released by the caller
  // after the lock.
  void EraseLocked(Map::iterator it, std::vector<Entry>* gone) REQUIRES(mu_);
  // Drops the oldest kept entries until len more bytes fit under the bound
  // (and, for a kept entry, under the kProduced share).
  void MakeRoomLocked(uint64_t len, bool kept, std::vector<Entry>* gone) REQUIRES(mu_);
  uint64_t& KindBytesLocked(Kind k) REQUIRES(mu_) { return kind_bytes_[static_cast<size_t>(k)]; }

  const Limits limits_;
  mutable Mutex mu_;
  Map entries_ GUARDED_BY(mu_);
  std::list<Key> kept_order_ GUARDED_BY(mu_);  // kProduced entries, oldest first
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  std::array<uint64_t, kKinds> kind_bytes_ GUARDED_BY(mu_) = {};
  uint64_t next_group_ GUARDED_BY(mu_) = 1;
};

}  // namespace stoker
