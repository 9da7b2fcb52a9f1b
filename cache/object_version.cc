#include "cache/object_version.h"

#include "util/log.h"

namespace stoker {

Result<std::shared_ptr<OriginFile>> OriginHandle::Get() {
  MutexLock l(mu_);
  if (!file_) {
    STOKER_ASSIGN_OR_RETURN(file_, origin_->OpenVersion(path_, version_, via_));
  }
  return file_;
}

bool ObjectVersion::AtOrigin(const OriginIdentity& now) const {
  MutexLock l(at_mu);
  if (at_origin == now) return true;
  if (!SameContent(at_origin, now)) return false;
  LOG_INFO("origin file '{}' is the same content at {} (was {}); its cached data stays valid", path,
           now.ToString(), at_origin.ToString());
  at_origin = now;
  return true;
}

void ObjectVersion::MovedTo(const OriginIdentity& now) const {
  MutexLock l(at_mu);
  LOG_INFO("origin file '{}' is another inode now ({}, was {}) with the same bytes", path,
           now.ToString(), at_origin.ToString());
  at_origin = now;
}

void OriginHandle::Forget(const OriginFile* file) {
  MutexLock l(mu_);
  if (file_.get() == file) file_.reset();
}

}  // namespace stoker
