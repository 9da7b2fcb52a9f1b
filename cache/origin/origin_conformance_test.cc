// The origin conformance suite: every backend behind cache/origin/origin.h
// answers the same calls the same way over the same tree. Backends: a local
// directory (through the default I/O backend, and through the fault-injecting
// one with no fault armed), HTTP (a directory served like nginx's JSON
// autoindex) and S3 (path-style ListObjectsV2, HEAD, ranged GET), both from
// in-process servers (origin_test_servers.h). What the mount does with these
// answers is the integration suite's (tests/integration, with nginx and
// moto); here is only what the cache may rely on from any origin.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "cache/io/io_backend.h"
#include "cache/origin/origin.h"
#include "cache/origin/origin_test_servers.h"
#include "util/test_files.h"

namespace stoker {
namespace {

using testing::Pattern;
using testing::ScratchDir;
using testing::TreeServer;
using testing::WriteFile;

enum class Backend { kLocal, kLocalFaulty, kHttp, kS3 };

std::string NameOf(Backend b) {
  switch (b) {
    case Backend::kLocal:
      return "local";
    case Backend::kLocalFaulty:
      return "local_faulty";
    case Backend::kHttp:
      return "http";
    case Backend::kS3:
      return "s3";
  }
  return "?";
}

// Sets mtime (and atime) to t seconds: a change the remote backends see
// (Last-Modified has whole seconds).
void SetMtime(const std::string& path, time_t t) {
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  STOKER_CHECK(utimensat(AT_FDCWD, path.c_str(), ts, 0) == 0, "utimensat");
}

class OriginConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    root_ = scratch_.path();
    files_ = {{"a.bin", Pattern(300000, 1)},
              {"empty", ""},
              {"sub/b.txt", "hello"},
              {"sub/deep/c.bin", Pattern(5000, 2)}};
    for (const auto& [rel, data] : files_) {
      WriteFile(root_ + "/" + rel, data);
      SetMtime(root_ + "/" + rel, 1700000000);
    }
    origin_ = Make();
    ASSERT_NE(origin_, nullptr);
  }

  void TearDown() override {
    origin_.reset();
    server_.reset();
  }

  bool remote() const { return GetParam() == Backend::kHttp || GetParam() == Backend::kS3; }

  std::shared_ptr<Origin> Make() {
    OriginOptions options;
    options.listing_ttl_seconds = 0;  // a changed tree is seen at once
    options.retries = 0;
    options.connect_timeout_s = 2;
    options.stall_timeout_s = 5;
    options.backoff_seconds = 0;
    std::string spec = root_;
    switch (GetParam()) {
      case Backend::kLocal:
        break;
      case Backend::kLocalFaulty: {
        Result<std::unique_ptr<IoBackend>> inner = MakeIoBackend(IoBackendKind::kAuto);
        EXPECT_TRUE(inner.ok());
        Result<std::shared_ptr<Origin>> o = MakeOrigin(
            spec, std::shared_ptr<IoBackend>(MakeFaultyIoBackend(std::move(*inner), {})), options);
        EXPECT_TRUE(o.ok()) << o.status().message();
        return o.ok() ? *o : nullptr;
      }
      case Backend::kHttp:
        server_ = std::make_unique<TreeServer>(TreeServer::Kind::kHttp, root_);
        server_->Start();
        spec = server_->endpoint() + "/";
        break;
      case Backend::kS3:
        server_ = std::make_unique<TreeServer>(TreeServer::Kind::kS3, root_);
        server_->Start();
        options.s3_endpoint = server_->endpoint();
        options.s3_page_size = 2;  // listings of several pages
        spec = std::string("s3://") + TreeServer::kBucket;
        break;
    }
    Result<std::shared_ptr<Origin>> o = MakeOrigin(spec, options);
    EXPECT_TRUE(o.ok()) << o.status().message();
    return o.ok() ? *o : nullptr;
  }

  std::string ReadRange(OriginFile& f, uint64_t off, size_t len) {
    std::string buf(len, '\0');
    Result<size_t> n = f.ReadAt(buf.data(), len, off);
    if (!n.ok()) return "<error " + n.status().message() + ">";
    buf.resize(*n);
    return buf;
  }

  ScratchDir scratch_{"origin-conformance"};
  std::string root_;
  std::map<std::string, std::string> files_;
  std::unique_ptr<TreeServer> server_;
  std::shared_ptr<Origin> origin_;
};

TEST_P(OriginConformanceTest, DirectoriesAreDirectories) {
  for (const std::string dir : {"", "sub", "sub/deep"}) {
    Result<struct stat> st = origin_->Stat(dir);
    ASSERT_TRUE(st.ok()) << "'" << dir << "': " << st.status().message();
    EXPECT_TRUE(S_ISDIR(st->st_mode)) << dir;
  }
}

TEST_P(OriginConformanceTest, FilesHaveTheirSizesAndTimes) {
  for (const auto& [rel, data] : files_) {
    Result<struct stat> st = origin_->Stat(rel);
    ASSERT_TRUE(st.ok()) << rel << ": " << st.status().message();
    EXPECT_TRUE(S_ISREG(st->st_mode)) << rel;
    EXPECT_EQ(static_cast<size_t>(st->st_size), data.size()) << rel;
    EXPECT_EQ(st->st_mtim.tv_sec, 1700000000) << rel;
  }
}

TEST_P(OriginConformanceTest, WhatIsNotThereIsEnoent) {
  for (const std::string path : {"nope", "sub/nope", "sub/deep/nope/deeper"}) {
    Result<struct stat> st = origin_->Stat(path);
    EXPECT_EQ(st.status().code(), ENOENT) << path << ": " << st.status().message();
    Result<std::unique_ptr<OriginFile>> f = origin_->Open(path);
    EXPECT_EQ(f.status().code(), ENOENT) << path << ": " << f.status().message();
  }
}

TEST_P(OriginConformanceTest, ADirectoryIsNotOpenedAsAFile) {
  for (const std::string dir : {"", "sub", "sub/deep"}) {
    EXPECT_EQ(origin_->Open(dir).status().code(), EISDIR) << "'" << dir << "'";
  }
}

TEST_P(OriginConformanceTest, ReadDirListsEachEntryOnceWithItsType) {
  const std::map<std::string, std::map<std::string, bool>> want = {
      {"", {{"a.bin", false}, {"empty", false}, {"sub", true}}},
      {"sub", {{"b.txt", false}, {"deep", true}}},
      {"sub/deep", {{"c.bin", false}}}};
  for (const auto& [dir_name, entries] : want) {
    const std::string& dir = dir_name;  // clang 14 captures no structured binding
    std::map<std::string, bool> got;
    int calls = 0;
    Status s = origin_->ReadDir(dir, [&](const OriginDirEntry& e) {
      ++calls;
      got[e.name] = S_ISDIR(e.st.st_mode);
      if (!S_ISDIR(e.st.st_mode) && e.attrs_complete) {
        EXPECT_EQ(static_cast<size_t>(e.st.st_size),
                  files_[dir.empty() ? e.name : dir + "/" + e.name].size())
            << e.name;
      }
      return true;
    });
    ASSERT_TRUE(s.ok()) << dir << ": " << s.message();
    EXPECT_EQ(got, entries) << "'" << dir << "'";
    EXPECT_EQ(calls, static_cast<int>(entries.size())) << "'" << dir << "'";
  }
  // fn returning false stops the walk.
  int calls = 0;
  ASSERT_TRUE(origin_->ReadDir("", [&](const OriginDirEntry&) { return ++calls < 1; }).ok());
  EXPECT_EQ(calls, 1);
}

TEST_P(OriginConformanceTest, ReadsAreByteExactAndShortOnlyAtTheEnd) {
  const std::string& a = files_["a.bin"];
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("a.bin");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(ReadRange(**f, 0, a.size()), a);
  EXPECT_EQ(ReadRange(**f, 4095, 8193), a.substr(4095, 8193));
  EXPECT_EQ(ReadRange(**f, a.size() - 10, 100), a.substr(a.size() - 10));  // short at the end
  EXPECT_EQ(ReadRange(**f, a.size(), 100), "");                            // at EOF
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {
    const uint64_t off = rng() % a.size();
    const size_t len = 1 + rng() % 70000;
    EXPECT_EQ(ReadRange(**f, off, len), a.substr(off, len)) << off << "+" << len;
  }
  Result<std::unique_ptr<OriginFile>> e = origin_->Open("empty");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(ReadRange(**e, 0, 10), "");
}

TEST_P(OriginConformanceTest, AnOpenFileHasTheIdentityStatGives) {
  for (const std::string rel : {"a.bin", "sub/deep/c.bin"}) {
    Result<struct stat> st = origin_->Stat(rel);
    ASSERT_TRUE(st.ok()) << st.status().message();
    Result<std::unique_ptr<OriginFile>> f = origin_->Open(rel);
    ASSERT_TRUE(f.ok()) << f.status().message();
    Result<OriginIdentity> id = (*f)->Identity();
    ASSERT_TRUE(id.ok()) << id.status().message();
    EXPECT_TRUE(SameContent(IdentityFromStat(*st), *id))
        << IdentityFromStat(*st).ToString() << " vs " << id->ToString();
  }
}

TEST_P(OriginConformanceTest, AChangedFileIsAnotherContent) {
  Result<struct stat> before = origin_->Stat("a.bin");
  ASSERT_TRUE(before.ok()) << before.status().message();
  const std::string next = Pattern(123457, 3);
  WriteFile(root_ + "/a.bin", next);
  SetMtime(root_ + "/a.bin", 1700000100);
  Result<struct stat> after = origin_->Stat("a.bin");
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(after->st_size, 123457);
  EXPECT_FALSE(SameContent(IdentityFromStat(*before), IdentityFromStat(*after)));
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("a.bin");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(ReadRange(**f, 0, next.size() + 10), next);
  // A deleted file is gone.
  ASSERT_EQ(unlink((root_ + "/sub/b.txt").c_str()), 0);
  EXPECT_EQ(origin_->Stat("sub/b.txt").status().code(), ENOENT);
}

TEST_P(OriginConformanceTest, PathsThatAreNotPlainAreRefused) {
  for (const std::string path : {"../x", "a.bin/..", "sub//b.txt", "./a.bin", "/a.bin", "sub/"}) {
    EXPECT_EQ(origin_->Stat(path).status().code(), EINVAL) << path;
    EXPECT_EQ(origin_->Open(path).status().code(), EINVAL) << path;
  }
}

TEST_P(OriginConformanceTest, NoSymlinksOrXattrsWhereThereAreNone) {
  EXPECT_EQ(origin_->ReadLink("a.bin").status().code(), EINVAL);
  Result<std::vector<std::string>> names = origin_->ListXattr("a.bin");
  ASSERT_TRUE(names.ok()) << names.status().message();
  for (const std::string& n : *names) EXPECT_NE(n.rfind("user.", 0), 0u) << n;
  const int code = origin_->GetXattr("a.bin", "user.none").status().code();
  EXPECT_TRUE(code == ENODATA || code == ENOTSUP) << code;
}

TEST_P(OriginConformanceTest, AnUnreachableOriginIsNotAMissingFile) {
  if (!remote()) GTEST_SKIP() << "a local directory is always reachable";
  server_->Stop();
  Result<struct stat> st = origin_->Stat("a.bin");
  EXPECT_TRUE(IsOriginUnavailable(st.status().code())) << st.status().message();
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("sub/deep/c.bin");
  EXPECT_TRUE(IsOriginUnavailable(f.status().code())) << f.status().message();
}

INSTANTIATE_TEST_SUITE_P(Backends, OriginConformanceTest,
                         ::testing::Values(Backend::kLocal, Backend::kLocalFaulty, Backend::kHttp,
                                           Backend::kS3),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return NameOf(info.param);
                         });

}  // namespace
}  // namespace stoker
