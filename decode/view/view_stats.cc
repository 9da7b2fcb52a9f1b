#include "decode/view/view_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/log.h"

namespace stoker {

namespace {

std::string LineOf(const std::string& file, uint64_t offset, const std::string& message) {
  std::string line = file + ": offset " + std::to_string(offset) + ": " + message;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  return line;
}

}  // namespace

bool ViewErrorList::Add(const std::string& file, uint64_t offset, const std::string& message) {
  std::string line = LineOf(file, offset, message);
  MutexLock l(mu_);
  if (!AddLocked(line)) return false;
  AppendLocked(line);
  return true;
}

bool ViewErrorList::AddLocked(std::string line) {
  if (!seen_.insert(line).second) return false;
  lines_.push_back(std::move(line));
  if (lines_.size() > kMaxErrors) {
    seen_.erase(lines_.front());
    lines_.pop_front();
  }
  return true;
}

void ViewErrorList::ForgetFile(const std::string& file) {
  const std::string prefix = file + ": offset ";
  MutexLock l(mu_);
  const size_t before = lines_.size();
  for (auto it = lines_.begin(); it != lines_.end();) {
    if (it->compare(0, prefix.size(), prefix) == 0) {
      seen_.erase(*it);
      it = lines_.erase(it);
    } else {
      ++it;
    }
  }
  if (lines_.size() != before) RewriteLocked();
}

std::string ViewErrorList::Text() const {
  MutexLock l(mu_);
  std::string out;
  for (const std::string& line : lines_) {
    out += line;
    out += '\n';
  }
  return out;
}

size_t ViewErrorList::size() const {
  MutexLock l(mu_);
  return lines_.size();
}

Result<size_t> ViewErrorList::Persist(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status::Error(errno, "open view errors '" + path + "': " + std::strerror(errno));
  char buf[64 << 10];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::Error(err, "read view errors '" + path + "': " + std::strerror(err));
    }
    if (n == 0 || text.size() > kMaxFileBytes) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  MutexLock l(mu_);
  const std::deque<std::string> ours = std::move(lines_);
  lines_.clear();
  seen_.clear();
  size_t in_file = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;  // a line cut short by a crash
    in_file++;
    if (end > pos) AddLocked(text.substr(pos, end - pos));
    pos = end + 1;
  }
  const size_t loaded = lines_.size();
  // This daemon's own lines (none yet, as mount calls it) come after.
  for (const std::string& line : ours) AddLocked(line);
  path_ = path;
  file_lines_ = in_file;
  if (in_file != lines_.size() || text.size() > kMaxFileBytes) RewriteLocked();
  return loaded;
}

void ViewErrorList::AppendLocked(const std::string& line) {
  if (path_.empty()) return;
  // Past twice the list, the file is mostly lines already dropped.
  if (file_lines_ >= 2 * kMaxErrors) {
    RewriteLocked();
    return;
  }
  if (WriteLocked(path_, O_APPEND, line + "\n")) file_lines_++;
}

void ViewErrorList::RewriteLocked() {
  if (path_.empty()) return;
  const std::string tmp = path_ + ".tmp";
  std::string out;
  for (const std::string& line : lines_) out += line + "\n";
  if (!WriteLocked(tmp, O_TRUNC, out)) {
    ::unlink(tmp.c_str());
    return;
  }
  if (::rename(tmp.c_str(), path_.c_str()) == 0) {
    file_lines_ = lines_.size();
    return;
  }
  ::unlink(tmp.c_str());
  WriteFailedLocked();
}

bool ViewErrorList::WriteLocked(const std::string& path, int flags, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0600);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0 && ::close(fd) != 0) ok = false;
  if (!ok) WriteFailedLocked();
  return ok;
}

void ViewErrorList::WriteFailedLocked() {
  if (write_failed_) return;
  write_failed_ = true;
  LOG_WARN("writing view errors '{}': {}; listing them in memory only", path_,
           std::strerror(errno));
}

}  // namespace stoker
