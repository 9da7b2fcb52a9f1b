#include "cache/index_size.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <memory>

namespace stoker {

IndexSize::IndexSize(std::string dir, uint64_t headroom, ChunkIndex* index, Quota* quota)
    : dir_(std::move(dir)), headroom_(headroom), index_(index), quota_(quota) {}

void IndexSize::Measure() {
  const uint64_t written = index_->bytes_written();
  uint64_t bytes = ChunkIndex::DiskBytes(dir_ + "/index");
  if (std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir_.c_str()), ::closedir); d) {
    while (struct dirent* de = ::readdir(d.get())) {
      struct stat st;
      if (::fstatat(::dirfd(d.get()), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISREG(st.st_mode)) {
        bytes += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
  }
  {
    MutexLock l(mu_);
    measured_ = bytes;
    written_at_ = written;
  }
  Refresh();
}

uint64_t IndexSize::Now() {
  MutexLock l(mu_);
  return measured_ + (index_->bytes_written() - written_at_);
}

void IndexSize::Refresh() { quota_->SetIndexBytes(Now() + headroom_); }

}  // namespace stoker
