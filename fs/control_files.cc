#include "fs/control_files.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "util/status.h"

namespace stoker {

namespace {
constexpr uint64_t kInoBase = 0xFFFFFFFFFFFF0000ull;
}  // namespace

ControlFiles::ControlFiles(StatsSource stats, ErrorsSource errors)
    : stats_(std::move(stats)),
      errors_(std::move(errors)),
      created_(time(nullptr)),
      uid_(getuid()),
      gid_(getgid()) {}

std::optional<uint64_t> ControlFiles::Lookup(uint64_t parent, std::string_view name) const {
  if (parent == 1 && name == kDirName) return kDirId;
  if (parent == kDirId && name == kStatsName) return kStatsId;
  if (parent == kDirId && name == kErrorsName) return kErrorsId;
  return std::nullopt;
}

struct stat ControlFiles::Attr(uint64_t id) const {
  STOKER_CHECK(IsVirtual(id), "attributes of a non-virtual node");
  struct stat st {};
  st.st_ino = kInoBase + id;
  st.st_uid = uid_;
  st.st_gid = gid_;
  st.st_atime = st.st_mtime = st.st_ctime = created_;
  st.st_blksize = 4096;
  if (id == kDirId) {
    st.st_mode = S_IFDIR | 0555;
    st.st_nlink = 2;
  } else {
    st.st_mode = S_IFREG | 0444;
    st.st_nlink = 1;
    st.st_size = 0;  // unknown until opened; served direct_io
  }
  return st;
}

std::vector<OriginDirEntry> ControlFiles::List(uint64_t id) const {
  STOKER_CHECK(id == kDirId, "listing a virtual node that is not a directory");
  return {OriginDirEntry{std::string(kStatsName), Attr(kStatsId)},
          OriginDirEntry{std::string(kErrorsName), Attr(kErrorsId)}};
}

std::string ControlFiles::Snapshot(uint64_t id) const {
  STOKER_CHECK(id == kStatsId || id == kErrorsId, "snapshot of a virtual node that is not a file");
  if (id == kErrorsId) return errors_ ? errors_() : std::string();
  nlohmann::json j = stats_ ? stats_() : nlohmann::json::object();
  // Never throw on odd bytes in a path: replace them.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

ControlFiles::Held ControlFiles::Refresh(uint64_t id) {
  std::string now = Snapshot(id);
  MutexLock lock(mu_);
  Held& held = HeldLocked(id);
  if (id == kStatsId) {
    // Spaces before the final newline, to a size that changes seldom: a
    // read answered from one snapshot while another's size was reported
    // must not come up short (the kernel would show zeros up to the size).
    const size_t prev = held.bytes != nullptr ? held.bytes->size() : 0;
    const size_t want = std::max(prev, (now.size() + 1024 + 4095) / 4096 * 4096);
    now.insert(now.size() - 1, want - now.size(), ' ');
  }
  if (held.bytes != nullptr && now == *held.bytes) return held;
  // A new mtime for new content, even within the clock's resolution.
  struct timespec t {};
  clock_gettime(CLOCK_REALTIME, &t);
  if (t.tv_sec < held.mtime.tv_sec ||
      (t.tv_sec == held.mtime.tv_sec && t.tv_nsec <= held.mtime.tv_nsec)) {
    t = held.mtime;
    if (++t.tv_nsec == 1000000000) {
      t.tv_nsec = 0;
      ++t.tv_sec;
    }
  }
  held.bytes = std::make_shared<const std::string>(std::move(now));
  held.mtime = t;
  return held;
}

ControlFiles::Held ControlFiles::Latest(uint64_t id) {
  {
    MutexLock lock(mu_);
    Held& held = HeldLocked(id);
    if (held.bytes != nullptr) return held;
  }
  return Refresh(id);
}

struct stat ControlFiles::AttrOf(uint64_t id, const Held& held) const {
  struct stat st = Attr(id);
  st.st_size = static_cast<off_t>(held.bytes->size());
  st.st_mtim = held.mtime;
  st.st_ctim = held.mtime;
  return st;
}

}  // namespace stoker
