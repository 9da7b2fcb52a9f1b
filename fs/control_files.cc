#include "fs/control_files.h"

#include <unistd.h>

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

}  // namespace stoker
