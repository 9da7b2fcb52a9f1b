#include "fs/opens_policy.h"

#include "util/size.h"

namespace stoker {

bool OpensPolicy::Note(bool small) {
  MutexLock lock(mu_);
  if (decided_) return false;
  bool& slot = ring_[seen_ % kWindow];
  if (seen_ >= kWindow && slot) small_--;
  slot = small;
  if (small) small_++;
  seen_++;
  if (seen_ < kWindow || small_ < kSmallShare) return false;
  decided_ = Decision{std::to_string(small_) + " of the last " + std::to_string(kWindow) +
                          " opens were small files (at most " + FormatSize(small_max_) +
                          ", never passed through)",
                      seen_};
  return true;
}

void OpensPolicy::Inherit() {
  MutexLock lock(mu_);
  if (!decided_) decided_ = Decision{"decided before a restart of the daemon", seen_};
}

std::optional<OpensPolicy::Decision> OpensPolicy::decision() const {
  MutexLock lock(mu_);
  return decided_;
}

}  // namespace stoker
