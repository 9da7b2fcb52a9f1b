// FileOpener: opens of origin paths as cached versions (ObjectCache::Open),
// and the attributes a lookup may be answered with (ObjectCache::HeldAttr).
//
// An open, under its path's stripe lock, finds the version this process
// serves (VersionTable), else the index's record, and gives it without
// asking the origin while it was checked less than --revalidate ago (by
// this process or, as the index records, an earlier one) or while the
// origin backs off and the cache holds it whole; otherwise it revalidates
// with the origin: the same version (its record's check time renewed), a
// new version when the origin file changed (the old one superseded, its
// reads drained, and queued for dropping), a new file's first version, or,
// while the origin cannot be reached, the version held. An origin that
// says ENOENT forgets the path. A record made under other derivation
// options (a view remounted differently) is never served.
//
// Owns the stripe locks; the versions it serves are the VersionTable's, the
// records the index's.
//
// Thread-safety: all methods are thread-safe. Opens of different paths run
// at once (a stripe per path hash); two opens of one path do not. An open
// stuck in a hung origin holds its stripe as long as the origin hangs, so
// while the origin is unreachable an open that cannot get its stripe is
// answered from what the cache holds whole instead of waiting.
//
// Lock order (outer first): a derived path's stripe -> a plain path's
// stripe (a derived path's Stat opens its source through the cache) ->
// ObjectVersion::serving, exclusively (a superseded version's reads
// drained; readers never wait on an open) -> the parts' locks (leaves).
#pragma once

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cache/cache_stats.h"
#include "cache/chunk_index.h"
#include "cache/chunk_writer.h"
#include "cache/derived_source.h"
#include "cache/evictor.h"
#include "cache/object_version.h"
#include "cache/open_file_state.h"
#include "cache/options.h"
#include "cache/origin/origin.h"
#include "cache/raw_reader.h"
#include "cache/readahead.h"
#include "cache/version_table.h"
#include "util/timed_mutex.h"

namespace stoker {

// Who opens: fs/ (a reader), or the cache itself (a view opening its raw
// file, a prefetch, a warm), which must neither report a change nor claim
// the kernel holds pages.
// kPeer: another member of a cache group, whose open reads misses from the
// origin only (Via::kOriginOnly), never from a third member.
enum class Opener { kFs, kForDerived, kPrefetch, kWarm, kPeer };

class FileOpener {
 public:
  using Opened = RawReader::Opened;

  // The parts it opens with; all outlive it.
  struct Parts {
    uint64_t chunk_size = 0;
    std::shared_ptr<Origin> origin;     // asked (Stat); each open file reads through it
    DerivedSource* derived = nullptr;   // which paths are derived, and their Stat
    ChunkIndex* index = nullptr;        // the records of paths
    VersionTable* versions = nullptr;   // the versions this process serves
    ChunkWriter* writer = nullptr;      // says once that a full disk stops caching
    Evictor* evictor = nullptr;         // drops superseded versions
    CacheCounters* counters = nullptr;  // revalidations, origin_changes, errors, ...
    // The Readahead of each new open file.
    std::function<std::shared_ptr<Readahead>()> new_readahead;
  };
  // options: revalidate_seconds and prefetch_bytes are used.
  FileOpener(const CacheOptions& options, Parts parts);

  // Opens path for who, revalidating it with the origin if it was last
  // checked more than --revalidate ago, or if force_revalidate. For fs/,
  // Opened::changed reports a change found since this process last
  // answered fs/ (by any opener), and keep_cache that fs/ was given this
  // version before. Errors: the origin's (ENOENT also forgets the path),
  // EISDIR/ELOOP/EINVAL for what is not a regular file, ETIMEDOUT while the
  // origin is unreachable and the cache does not hold the file whole.
  Result<Opened> Open(const std::string& path, bool force_revalidate, Opener who);

  // ObjectCache::HeldAttr. Never asks the origin.
  std::optional<struct stat> HeldAttr(const std::string& path, bool origin_failed);

  // ObjectCache::Refresh: the origin's kept listings under prefix go first
  // (Origin::Refresh), then each path's record is marked unchecked (its
  // check time 0, which no --revalidate window holds) under its stripe, so
  // that no open in between records an older check over it. The version a
  // record names is never changed here.
  Result<uint64_t> Refresh(const std::string& prefix);

 private:
  using ObjectEntry = VersionTable::Entry;
  // What Open knows of a path before asking the origin.
  struct OpenLookup {
    std::optional<ObjectEntry> entry;   // this process's (none if unrecorded)
    std::optional<ObjectRecord> known;  // the entry's record, else the index's
    bool unrecorded = false;            // the entry was not in the index (disk full)
    bool other = false;                 // known is another derivation's: never served
  };

  // Whom an opener works for (what a derived path's Stat makes, it makes at
  // that priority: DerivedSource::StatFor).
  static Urgency UrgencyOf(Opener who);
  // Fills l->known from the index where l has no entry (an undecodable
  // record is dropped: nothing known).
  Status LookUpRecord(const std::string& path, OpenLookup* l);
  // The entry to give without asking the origin: validated within
  // --revalidate by an earlier process, or held while the origin backs off
  // (counts revalidations_skipped); nullopt: ask.
  std::optional<ObjectEntry> HeldWithoutAsking(const std::string& path, const OpenLookup& l);
  // Asks the origin: the same version (revalidated), a changed one (a new
  // version; *changed), a new file, or what is held while it is
  // unreachable; ENOENT forgets the path.
  Result<ObjectEntry> Revalidate(const std::string& path, OpenLookup& l, Opener who, bool* changed);
  // The Opened for entry, which is kept as path's.
  Opened FinishOpen(const std::string& path, Opener who, ObjectEntry entry, bool changed);
  Status FailOpen(const Status& s);
  // An open of version v of path: its attributes, content tag and open file.
  Opened OpenedOf(const std::string& path, const std::shared_ptr<ObjectVersion>& v, Opener who);
  // Whether v, held whole, is to be given without asking the origin
  // (Origin::backoff()).
  bool OriginBackingOff(const ObjectVersion& v);
  // Whether every chunk of v is in the index.
  bool HeldWhole(const ObjectVersion& v);
  // An open whose stripe is taken while the origin is unreachable: the
  // version the cache holds whole, without remembering the open (the stripe
  // holder may be about to replace that version); else ETIMEDOUT.
  Result<Opened> OpenHeldUnlocked(const std::string& path);
  // rec as a version the index does not hold (ObjectVersion::uncached),
  // after recording it failed with ENOSPC.
  ObjectEntry UncachedEntry(const std::string& path, ObjectRecord rec, const Status& why);
  // Whether an identity checked at validated_ns (realtime) is still within
  // --revalidate (never with 0).
  bool ValidatedWithinWindow(int64_t validated_ns) const;
  // A derived path's index record made under other derivation options (a
  // view remounted with another dct, channels or decoder), or a plain
  // path's record of a derived file: not what the path holds now, however
  // recently it was validated. Every use of an index record checks it.
  bool OtherDerivation(const std::string& path, const ObjectRecord& r) const;
  // Marks v (if any) superseded once the reads past its check are answered,
  // and queues version key's drop.
  void Supersede(const std::shared_ptr<ObjectVersion>& v, const VersionKey& key);

  const uint64_t revalidate_seconds_;
  const uint64_t prefetch_bytes_;
  const Parts p_;

  // One stripe per path hash. Derived paths (DerivedSource::IsDerived) lock
  // derived_stripes_, and may then take a plain stripe while opening their
  // source: derived -> plain, never back.
  std::array<TimedMutex, 64> open_stripes_;
  std::array<TimedMutex, 64> derived_stripes_;
};

}  // namespace stoker
