#include "fs/errno_map.h"

#include <cerrno>

namespace stoker {

int ErrnoFor(const Status& status) {
  if (status.ok()) return 0;
  const int code = status.code();
  switch (code) {
    case ENOSYS:    // would disable the operation for the whole mount
    case EBADMSG:   // corruption is the cache's business, not the reader's
    case ENOTCONN:  // the origin is unreachable, not our mount
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENOSPC:  // the cache serves from the origin when full
    case EDQUOT:
      return EIO;
    default:
      break;
  }
  if (code <= 0 || code >= 4096) return EIO;
  return code;
}

int XattrErrnoFor(const Status& status) {
  if (status.ok()) return 0;
  switch (status.code()) {
    case ENOTSUP:
#if EOPNOTSUPP != ENOTSUP
    case EOPNOTSUPP:
#endif
    case ENOSYS:
      return ENOTSUP;
    default:
      return ErrnoFor(status);
  }
}

}  // namespace stoker
