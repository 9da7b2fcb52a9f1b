// Files for unit tests: a scratch directory removed with everything in it,
// reproducible bytes, and writing a file whole. Test code only.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace stoker::testing
