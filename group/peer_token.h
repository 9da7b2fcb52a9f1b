// PeerToken: the shared secret the members of a cache group present to each
// other (--peer-token-file: a file, a Kubernetes Secret's key mounted as one).
//
// The file holds the token on its first line (surrounding whitespace
// dropped; 16 to 4096 bytes). It is read again when it changes (its inode,
// size or mtime; looked at no more than once a second), so that a rotated
// Secret takes effect without a restart. Kubernetes updates the file on each
// node at its own time, so the token replaced stays accepted for kGrace
// after this member saw the change: members never refuse each other during
// a rotation. A file that cannot be read, or holds no valid token, keeps the
// tokens known (logged once per change); only Open fails on it.
//
// Comparisons take the same time whatever the presented bytes are.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class PeerToken {
 public:
  static constexpr size_t kMinBytes = 16;
  static constexpr size_t kMaxBytes = 4096;
  static constexpr std::chrono::seconds kGrace{600};

  // Reads path: ENOENT/EACCES (the file's errno) or EINVAL (no valid token),
  // each naming the file.
  static Result<std::unique_ptr<PeerToken>> Open(const std::string& path);

  // The token to present (the file's current one).
  std::string Current();
  // Whether presented is the current token, or the one before it within
  // kGrace of the change.
  bool Matches(std::string_view presented);

  // For tests: how stale a look at the file may be (default 1 s).
  void set_recheck_interval(std::chrono::steady_clock::duration d);

 private:
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileId&) const = default;
  };
  explicit PeerToken(std::string path) : path_(std::move(path)) {}
  // Reads the file if it changed since the last look.
  Status ReloadLocked(bool force) REQUIRES(mu_);

  const std::string path_;
  Mutex mu_;
  std::string current_ GUARDED_BY(mu_);
  std::string previous_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point changed_at_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point looked_at_ GUARDED_BY(mu_);
  std::chrono::steady_clock::duration recheck_ GUARDED_BY(mu_) = std::chrono::seconds(1);
  FileId id_ GUARDED_BY(mu_);
};

// Whether a equals b, in time that depends on their lengths only.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace stoker
