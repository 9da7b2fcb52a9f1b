// ControlFiles: the virtual MOUNTPOINT/.stoker directory, where a running
// mount shows what it thinks. It holds stats.json (read-only, 0444): the
// cache's counters (ObjectCache::Stats) plus fs-level fields, as one JSON
// object followed by a newline; and errors (0444): the records and files the
// decoded views could not decode, one "FILE: offset N: message" line each
// (empty without views).
//
// .stoker is reached by lookup from the root but not listed by readdir of the
// root, so the mount shows the origin's tree exactly. If the origin has its own
// ".stoker" at its root, ours wins: the origin's entry is neither listed nor
// reachable through the mount.
//
// Virtual nodes have fixed ids below InodeTable's first dynamic id; lookups of
// them are not counted (forget of them is a no-op). Their st_ino values sit at
// the top of the 64-bit range, away from any origin inode number. stats.json and errors
// report size 0 and are opened direct_io: each open takes one snapshot, and
// reads are served from it, so a reader sees one consistent document.
//
// With --opens kernel no open reaches the daemon (FUSE no_open), so there is
// no open to take a snapshot at and the kernel caches what it reads. Then
// each getattr (their attributes never stay valid) calls Refresh, which
// takes a new snapshot only when the content changed and reports it with its
// own size and mtime (the kernel drops its pages when the mtime changes);
// reads serve the latest snapshot. stats.json is padded with spaces (before
// its final newline) to a multiple of 4 KiB that only grows: a reader's next
// read() past the end finds the end rather than the tail of a newer, longer
// document, and a read answered from one snapshot while another's size was
// reported never comes up short.
//
// Thread-safety: all methods are thread-safe; the stats source is called
// without locks held and must itself be thread-safe.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/origin/origin.h"
#include "util/mutex.h"

namespace stoker {

class ControlFiles {
 public:
  static constexpr uint64_t kDirId = 2;
  static constexpr uint64_t kStatsId = 3;
  static constexpr uint64_t kErrorsId = 4;
  // First id InodeTable may hand out.
  static constexpr uint64_t kFirstDynamicId = 16;
  static constexpr std::string_view kDirName = ".stoker";
  static constexpr std::string_view kStatsName = "stats.json";
  static constexpr std::string_view kErrorsName = "errors";

  using StatsSource = std::function<nlohmann::json()>;
  using ErrorsSource = std::function<std::string()>;
  explicit ControlFiles(StatsSource stats, ErrorsSource errors = {});

  static bool IsVirtual(uint64_t id) { return id > 1 && id < kFirstDynamicId; }
  // True if (parent, name) names a virtual node; *id is set then.
  std::optional<uint64_t> Lookup(uint64_t parent, std::string_view name) const;
  // REQUIRES: IsVirtual(id).
  struct stat Attr(uint64_t id) const;
  bool IsDir(uint64_t id) const { return id == kDirId; }
  // Entries of a virtual directory, "." and ".." excluded.
  // REQUIRES: IsDir(id).
  std::vector<OriginDirEntry> List(uint64_t id) const;
  // The content of a virtual file as of now. REQUIRES: IsVirtual(id), !IsDir(id).
  std::string Snapshot(uint64_t id) const;

  // For --opens kernel (see above). REQUIRES: IsVirtual(id), !IsDir(id).
  struct Held {
    std::shared_ptr<const std::string> bytes;
    struct timespec mtime {};
  };
  // A snapshot of now, or the latest if its content is the same.
  Held Refresh(uint64_t id);
  // The latest snapshot (taken now if there is none).
  Held Latest(uint64_t id);
  // Attr(id) with held's size and mtime.
  struct stat AttrOf(uint64_t id, const Held& held) const;

 private:
  StatsSource stats_;
  ErrorsSource errors_;
  const time_t created_;
  const uid_t uid_;
  const gid_t gid_;
  Held& HeldLocked(uint64_t id) REQUIRES(mu_) {
    return id == kStatsId ? held_stats_ : held_errors_;
  }
  Mutex mu_;
  Held held_stats_ GUARDED_BY(mu_);
  Held held_errors_ GUARDED_BY(mu_);
};

}  // namespace stoker
