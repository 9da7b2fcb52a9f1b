#include "util/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace stoker {

Result<std::string> ReadWholeFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("'" + path + "'");
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status st = Status::FromErrno("read '" + path + "'");
      close(fd);
      return st;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

Status WriteSmallFile(const std::string& path, std::string_view text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("'" + path + "'");
  ssize_t n;
  do {
    n = write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  Status st = Status::OK();
  if (n < 0) {
    st = Status::FromErrno("write '" + path + "'");
  } else if (static_cast<size_t>(n) != text.size()) {
    st = Status::IOError("write '" + path + "': short write");
  }
  close(fd);
  return st;
}

Status MakeDirs(const std::string& dir, mode_t leaf_mode, mode_t parent_mode,
                std::vector<std::string>* made) {
  size_t pos = 0;
  while (pos != std::string::npos) {
    const size_t next = dir.find('/', pos + 1);
    const std::string partial = dir.substr(0, next);
    pos = next;
    if (partial.empty() || partial == "/") continue;
    const bool leaf = next == std::string::npos || next + 1 == dir.size();
    if (mkdir(partial.c_str(), leaf ? leaf_mode : parent_mode) == 0) {
      if (made != nullptr) made->push_back(partial);
    } else if (errno != EEXIST) {
      return Status::FromErrno("cannot create directory '" + partial + "'");
    }
    if (leaf) break;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return Status::FromErrno("'" + dir + "'");
  if (!S_ISDIR(st.st_mode)) return Status::Error(ENOTDIR, "'" + dir + "' is not a directory");
  return Status::OK();
}

}  // namespace stoker
