// Files for unit tests: a scratch directory removed with everything in it,
// reproducible bytes, writing a file whole, and counting open descriptors.
// Test code only.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "util/status.h"

namespace stoker::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const char* tag = "cache") {
    std::string tmpl = std::string("/tmp/stoker-") + tag + "-XXXXXX";
    STOKER_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  STOKER_CHECK(fd >= 0, "create test file");
  STOKER_CHECK(::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()),
               "write test file");
  ::close(fd);
}

// Descriptors this process has open now, not counting io_uring rings (they
// live as long as their thread, by design): a test compares it before and
// after to find a leaked descriptor.
inline int OpenFdCount() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  STOKER_CHECK(d != nullptr, "open /proc/self/fd");
  while (struct dirent* de = ::readdir(d)) {
    if (de->d_name[0] == '.') continue;
    const std::string link = std::string("/proc/self/fd/") + de->d_name;
    char target[256];
    const ssize_t len = ::readlink(link.c_str(), target, sizeof(target) - 1);
    target[len > 0 ? len : 0] = '\0';
    if (std::strstr(target, "io_uring") == nullptr) ++n;
  }
  ::closedir(d);
  return n - 1;  // the one opendir holds
}

}  // namespace stoker::testing
