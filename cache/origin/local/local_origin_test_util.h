// What the LocalOrigin tests share: a fixture with a scratch root (and a
// directory outside it) under /tmp, run with openat2 and with the component
// walk, that checks no descriptor is left behind.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/io/direct_io.h"
#include "cache/io/io_backend.h"
#include "cache/origin/local/local_origin.h"
#include "cache/origin/origin.h"
#include "util/test_files.h"

namespace stoker {
namespace local_origin_test {

using testing::OpenFdCount;
using testing::WriteFile;

inline std::string ReadAll(OriginFile& f, size_t max = 1 << 20) {
  std::string buf(max, '\0');
  Result<size_t> n = f.ReadAt(buf.data(), buf.size(), 0);
  if (!n.ok()) return "<error " + n.status().message() + ">";
  buf.resize(*n);
  return buf;
}

// ELOOP from openat2's RESOLVE_NO_SYMLINKS; EXDEV if it saw an escape.
inline bool RefusedAsSymlink(int code) { return code == ELOOP || code == EXDEV; }

class LocalOriginTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker-origin-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(outside_.c_str(), 0755), 0);
    Result<std::unique_ptr<IoBackend>> io = MakeIoBackend(IoBackendKind::kAuto);
    ASSERT_TRUE(io.ok());
    io_ = std::shared_ptr<IoBackend>(std::move(io).value());
    fds_before_ = OpenFdCount();
    Recreate();
  }
  void TearDown() override {
    origin_.reset();
    EXPECT_EQ(OpenFdCount(), fds_before_) << "descriptor leaked";
    std::system(("rm -rf '" + base_ + "'").c_str());
  }
  void Recreate(int reopen_interval_ms = 0) {
    LocalOrigin::Options o;
    o.use_openat2 = GetParam();
    o.reopen_interval_ms = reopen_interval_ms;
    Result<std::shared_ptr<LocalOrigin>> origin = LocalOrigin::Create(root_, io_, o);
    ASSERT_TRUE(origin.ok()) << origin.status().message();
    origin_ = *origin;
    ASSERT_EQ(origin_->uses_openat2(), GetParam());
  }
  std::string In(const std::string& rel) const { return root_ + "/" + rel; }

  std::string base_, root_, outside_;
  std::shared_ptr<IoBackend> io_;
  std::shared_ptr<LocalOrigin> origin_;
  int fds_before_ = 0;
};

}  // namespace local_origin_test
}  // namespace stoker
