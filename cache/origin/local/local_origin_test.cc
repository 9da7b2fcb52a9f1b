// LocalOrigin and MakeOrigin against real directories under /tmp. Every
// LocalOrigin test runs twice: resolving with openat2, and with the
// component walk used where a sandbox forbids openat2.
#include "cache/origin/local/local_origin.h"

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
#include "cache/origin/origin.h"
#include "util/test_files.h"

namespace stoker {
namespace {

using testing::OpenFdCount;
using testing::WriteFile;

std::string ReadAll(OriginFile& f, size_t max = 1 << 20) {
  std::string buf(max, '\0');
  Result<size_t> n = f.ReadAt(buf.data(), buf.size(), 0);
  if (!n.ok()) return "<error " + n.status().message() + ">";
  buf.resize(*n);
  return buf;
}

// ELOOP from openat2's RESOLVE_NO_SYMLINKS; EXDEV if it saw an escape.
bool RefusedAsSymlink(int code) { return code == ELOOP || code == EXDEV; }

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

INSTANTIATE_TEST_SUITE_P(Resolvers, LocalOriginTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "openat2" : "walk";
                         });

TEST_P(LocalOriginTest, StatsRootFilesAndDirs) {
  ASSERT_EQ(mkdir(In("sub").c_str(), 0750), 0);
  WriteFile(In("sub/f"), "12345");
  Result<struct stat> st = origin_->Stat("");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISDIR(st->st_mode));
  st = origin_->Stat("sub");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISDIR(st->st_mode));
  EXPECT_EQ(st->st_mode & 07777, 0750u);
  st = origin_->Stat("sub/f");
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_TRUE(S_ISREG(st->st_mode));
  EXPECT_EQ(st->st_size, 5);
  Status missing = origin_->Stat("sub/nope").status();
  EXPECT_EQ(missing.code(), ENOENT);
  EXPECT_NE(missing.message().find(root_ + "/sub/nope"), std::string::npos) << missing.message();
  EXPECT_EQ(origin_->Stat("nope/f").status().code(), ENOENT);
  EXPECT_EQ(origin_->Stat("sub/f/x").status().code(), ENOTDIR);
}

TEST_P(LocalOriginTest, SymlinkInTheMiddleIsNeverFollowed) {
  ASSERT_EQ(mkdir(In("real").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(In("real/deeper").c_str(), 0755), 0);
  WriteFile(In("real/deeper/f"), "inside");
  ASSERT_EQ(symlink("real", In("link").c_str()), 0);
  for (const std::string p : {"link/deeper/f", "link/deeper"}) {
    SCOPED_TRACE(p);
    EXPECT_TRUE(RefusedAsSymlink(origin_->Stat(p).status().code()));
    EXPECT_TRUE(RefusedAsSymlink(origin_->ReadLink(p).status().code()));
    EXPECT_TRUE(RefusedAsSymlink(origin_->ListXattr(p).status().code()));
  }
  EXPECT_TRUE(RefusedAsSymlink(origin_->Open("link/deeper/f").status().code()));
  EXPECT_TRUE(RefusedAsSymlink(origin_->ReadDir("link", [](auto&) { return true; }).code()));
  EXPECT_TRUE(RefusedAsSymlink(origin_->ReadDir("link/deeper", [](auto&) { return true; }).code()));
  Result<struct stat> st = origin_->Stat("link");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISLNK(st->st_mode));
  // The real path still works.
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("real/deeper/f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ReadAll(**f), "inside");
}

TEST_P(LocalOriginTest, SymlinksOutsideAreReportedNotFollowed) {
  WriteFile(outside_ + "/secret", "secret");
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  ASSERT_EQ(symlink("../outside", In("escape").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), In("abs").c_str()), 0);
  ASSERT_EQ(symlink("/etc/passwd", In("passwd").c_str()), 0);
  ASSERT_EQ(symlink("../../outside/secret", In("d/up").c_str()), 0);
  struct Case {
    std::string path, target;
  };
  for (const Case& c : {Case{"escape", "../outside"}, Case{"abs", outside_},
                        Case{"passwd", "/etc/passwd"}, Case{"d/up", "../../outside/secret"}}) {
    SCOPED_TRACE(c.path);
    Result<struct stat> st = origin_->Stat(c.path);
    ASSERT_TRUE(st.ok()) << st.status().message();
    EXPECT_TRUE(S_ISLNK(st->st_mode));
    EXPECT_EQ(st->st_size, static_cast<off_t>(c.target.size()));
    Result<std::string> t = origin_->ReadLink(c.path);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(*t, c.target);
    EXPECT_TRUE(RefusedAsSymlink(origin_->Open(c.path).status().code()));
  }
  EXPECT_TRUE(RefusedAsSymlink(origin_->Open("escape/secret").status().code()));
  EXPECT_TRUE(RefusedAsSymlink(origin_->Open("abs/secret").status().code()));
  EXPECT_TRUE(RefusedAsSymlink(origin_->Stat("abs/secret").status().code()));
  EXPECT_TRUE(RefusedAsSymlink(origin_->ReadDir("abs", [](auto&) { return true; }).code()));
  std::set<std::string> links;
  ASSERT_TRUE(origin_
                  ->ReadDir("",
                            [&](const OriginDirEntry& e) {
                              if (S_ISLNK(e.st.st_mode)) links.insert(e.name);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(links, (std::set<std::string>{"escape", "abs", "passwd"}));
  EXPECT_EQ(origin_->ReadLink("d").status().code(), EINVAL);  // not a symlink
}

TEST_P(LocalOriginTest, RefusesPathsThatAreNotPlainRelative) {
  ASSERT_EQ(mkdir(In("a").c_str(), 0755), 0);
  WriteFile(In("a/b"), "x");
  for (const std::string& p :
       {std::string(".."), std::string("../outside"), std::string("a/../a/b"), std::string("a/.."),
        std::string("/etc/passwd"), std::string("/a/b"), std::string("a//b"), std::string("a/"),
        std::string("."), std::string("./a"), std::string("a/./b"), std::string("a\0b", 3),
        std::string("a/b\0", 4)}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(origin_->Stat(p).status().code(), EINVAL);
    EXPECT_EQ(origin_->Open(p).status().code(), EINVAL);
    EXPECT_EQ(origin_->ReadDir(p, [](auto&) { return true; }).code(), EINVAL);
    EXPECT_EQ(origin_->ReadLink(p).status().code(), EINVAL);
    EXPECT_EQ(origin_->GetXattr(p, "user.x").status().code(), EINVAL);
    EXPECT_EQ(origin_->ListXattr(p).status().code(), EINVAL);
  }
}

TEST_P(LocalOriginTest, UnicodeAndOddNames) {
  const std::vector<std::string> names = {"données été.txt", "日本語 ファイル", " leading",
                                          "trailing ",       "tab\tname",       "new\nline",
                                          "back\\slash",     "quote'\"",        "-dash"};
  ASSERT_EQ(mkdir(In("dir with spaces").c_str(), 0755), 0);
  for (const std::string& n : names) WriteFile(In("dir with spaces/" + n), "content:" + n);
  std::set<std::string> seen;
  ASSERT_TRUE(origin_
                  ->ReadDir("dir with spaces",
                            [&](const OriginDirEntry& e) {
                              seen.insert(e.name);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(seen, std::set<std::string>(names.begin(), names.end()));
  for (const std::string& n : names) {
    SCOPED_TRACE(n);
    Result<std::unique_ptr<OriginFile>> f = origin_->Open("dir with spaces/" + n);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ(ReadAll(**f), "content:" + n);
  }
}

TEST_P(LocalOriginTest, TenThousandEntryDirectory) {
  ASSERT_EQ(mkdir(In("many").c_str(), 0755), 0);
  const int kFiles = 10000;
  for (int i = 0; i < kFiles; ++i) {
    int fd = open(In("many/f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  std::set<std::string> names;
  int not_regular = 0;
  ASSERT_TRUE(origin_
                  ->ReadDir("many",
                            [&](const OriginDirEntry& e) {
                              names.insert(e.name);
                              not_regular += !S_ISREG(e.st.st_mode);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(names.size(), static_cast<size_t>(kFiles));
  EXPECT_EQ(not_regular, 0);
  EXPECT_TRUE(names.count("f0") && names.count("f9999"));
  int calls = 0;
  ASSERT_TRUE(origin_->ReadDir("many", [&](auto&) { return ++calls < 5; }).ok());
  EXPECT_EQ(calls, 5);
}

TEST_P(LocalOriginTest, DirEntriesCarryLstatAttributes) {
  ASSERT_EQ(mkdir(In("d").c_str(), 0700), 0);
  WriteFile(In("f"), "abc");
  ASSERT_EQ(symlink("f", In("l").c_str()), 0);
  struct stat want_d, want_f, want_l;
  ASSERT_EQ(lstat(In("d").c_str(), &want_d), 0);
  ASSERT_EQ(lstat(In("f").c_str(), &want_f), 0);
  ASSERT_EQ(lstat(In("l").c_str(), &want_l), 0);
  int n = 0;
  ASSERT_TRUE(origin_
                  ->ReadDir("",
                            [&](const OriginDirEntry& e) {
                              ++n;
                              const struct stat& want = e.name == "d"   ? want_d
                                                        : e.name == "f" ? want_f
                                                                        : want_l;
                              EXPECT_EQ(e.st.st_ino, want.st_ino) << e.name;
                              EXPECT_EQ(e.st.st_mode, want.st_mode) << e.name;
                              EXPECT_EQ(e.st.st_size, want.st_size) << e.name;
                              return true;
                            })
                  .ok());
  EXPECT_EQ(n, 3);
}

TEST_P(LocalOriginTest, HardLinksShareAnIdentity) {
  WriteFile(In("a"), "same bytes");
  ASSERT_EQ(link(In("a").c_str(), In("b").c_str()), 0);
  Result<struct stat> a = origin_->Stat("a"), b = origin_->Stat("b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->st_ino, b->st_ino);
  EXPECT_EQ(a->st_nlink, 2u);
  Result<std::unique_ptr<OriginFile>> fa = origin_->Open("a"), fb = origin_->Open("b");
  ASSERT_TRUE(fa.ok() && fb.ok());
  Result<OriginIdentity> ia = (*fa)->Identity(), ib = (*fb)->Identity();
  ASSERT_TRUE(ia.ok() && ib.ok());
  EXPECT_EQ(*ia, *ib);
  EXPECT_EQ(*ia, IdentityFromStat(*a));
  EXPECT_EQ(ReadAll(**fb), "same bytes");
}

TEST_P(LocalOriginTest, SparseFileReadsZerosInHoles) {
  const off_t kSize = 64 << 20, kData = 32 << 20;
  int fd = open(In("sparse").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, kSize), 0);
  ASSERT_EQ(pwrite(fd, "DATA", 4, kData), 4);
  ASSERT_EQ(pwrite(fd, "END", 3, kSize - 3), 3);
  close(fd);
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("sparse");
  ASSERT_TRUE(f.ok());
  std::string buf(8192, 'x');
  Result<size_t> n = (*f)->ReadAt(buf.data(), buf.size(), kData - 4096);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, buf.size());
  EXPECT_EQ(buf.substr(0, 4096), std::string(4096, '\0'));
  EXPECT_EQ(buf.substr(4096, 4), "DATA");
  EXPECT_EQ(buf.substr(4100), std::string(4092, '\0'));
  n = (*f)->ReadAt(buf.data(), buf.size(), kSize - 5);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, 5u);
  EXPECT_EQ(buf.substr(0, 5), std::string("\0\0END", 5));
  Result<OriginIdentity> id = (*f)->Identity();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size, static_cast<uint64_t>(kSize));
}

TEST_P(LocalOriginTest, Xattrs) {
  ASSERT_EQ(mkdir(In("sub").c_str(), 0755), 0);
  WriteFile(In("sub/f"), "x");
  const std::string value("v\0binary", 8);
  if (setxattr(In("sub/f").c_str(), "user.stoker", value.data(), value.size(), 0) != 0) {
    GTEST_SKIP() << "user xattrs unsupported under /tmp: " << std::strerror(errno);
  }
  ASSERT_EQ(setxattr(root_.c_str(), "user.root", "r", 1, 0), 0);
  ASSERT_EQ(setxattr(In("sub").c_str(), "user.empty", "", 0, 0), 0);
  ASSERT_EQ(symlink("f", In("sub/link").c_str()), 0);
  ASSERT_EQ(symlink("sub", In("dirlink").c_str()), 0);

  Result<std::string> v = origin_->GetXattr("sub/f", "user.stoker");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(*v, value);
  Result<std::vector<std::string>> names = origin_->ListXattr("sub/f");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(std::set<std::string>(names->begin(), names->end()).count("user.stoker"), 1u);
  EXPECT_EQ(origin_->GetXattr("sub/f", "user.none").status().code(), ENODATA);
  v = origin_->GetXattr("", "user.root");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(*v, "r");
  v = origin_->GetXattr("sub", "user.empty");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(*v, "");
  names = origin_->ListXattr("");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(std::set<std::string>(names->begin(), names->end()).count("user.root"), 1u);

  // The symlink's own (absent) attributes, never its target's.
  v = origin_->GetXattr("sub/link", "user.stoker");
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), ENODATA) << v.status().message();
  names = origin_->ListXattr("sub/link");
  ASSERT_TRUE(names.ok()) << names.status().message();
  EXPECT_EQ(std::set<std::string>(names->begin(), names->end()).count("user.stoker"), 0u);
  EXPECT_TRUE(RefusedAsSymlink(origin_->GetXattr("dirlink/f", "user.stoker").status().code()));
  EXPECT_EQ(origin_->GetXattr("sub/missing", "user.stoker").status().code(), ENOENT);
}

TEST_P(LocalOriginTest, OpenTakesOnlyRegularFiles) {
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  ASSERT_EQ(mkfifo(In("fifo").c_str(), 0644), 0);  // must not block the open
  EXPECT_EQ(origin_->Open("").status().code(), EISDIR);
  EXPECT_EQ(origin_->Open("d").status().code(), EISDIR);
  EXPECT_EQ(origin_->Open("fifo").status().code(), EINVAL);
  EXPECT_EQ(origin_->Open("missing").status().code(), ENOENT);
  Result<struct stat> st = origin_->Stat("fifo");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISFIFO(st->st_mode));
}

TEST_P(LocalOriginTest, OpenFileHoldsOneDescriptorAndSeesChanges) {
  WriteFile(In("f"), "first");
  int before = OpenFdCount();
  {
    Result<std::unique_ptr<OriginFile>> f = origin_->Open("f");
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(OpenFdCount(), before + 1);
    Result<OriginIdentity> id1 = (*f)->Identity();
    ASSERT_TRUE(id1.ok());
    EXPECT_EQ(id1->size, 5u);
    int fd = open(In("f").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "+more", 5), 5);
    close(fd);
    struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 678}};
    ASSERT_EQ(utimensat(AT_FDCWD, In("f").c_str(), times, 0), 0);
    Result<OriginIdentity> id2 = (*f)->Identity();
    ASSERT_TRUE(id2.ok());
    EXPECT_NE(*id1, *id2);
    EXPECT_EQ(id2->size, 10u);
    EXPECT_EQ(id2->mtime_ns, 12345 * 1000000000ll + 678);
    EXPECT_EQ(ReadAll(**f), "first+more");
  }
  EXPECT_EQ(OpenFdCount(), before);
}

// ReadAtAligned reads the aligned head of a large read direct and the rest
// buffered, or a read to the end of the file direct whole: every split must
// give the bytes a plain read gives, also when the file grew or shrank after
// it was opened.
TEST_P(LocalOriginTest, AlignedReadsMatchPlainReads) {
  auto bytes = [](size_t n, unsigned seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u + seed) >> 13);
    return s;
  };
  const size_t k = 256 << 10;
  const size_t m = kMinDirectOriginBytes;
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, m - 4097, m - 1, m, m + 1, size_t{100000},
                      k - 1, k, k + 1, k + 4097, size_t{(3u << 20) + 123}}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string data = bytes(size, static_cast<unsigned>(size));
    WriteFile(In("a"), data);
    Result<std::unique_ptr<OriginFile>> f = origin_->Open("a");
    ASSERT_TRUE(f.ok());
    std::shared_ptr<char[]> buf = AllocAligned(4u << 20);
    for (uint64_t off : {uint64_t{0}, uint64_t{4096}, uint64_t{k}, uint64_t{1u << 20}}) {
      for (size_t len : {size_t{1}, m - 1, m, size_t{100000}, k, k + 5, size_t{4u << 20}}) {
        Result<size_t> n = (*f)->ReadAtAligned(buf.get(), len, off, Urgency::kReader);
        ASSERT_TRUE(n.ok()) << n.status().message();
        size_t want = off >= size ? 0 : std::min<size_t>(len, size - off);
        ASSERT_EQ(*n, want) << "off " << off << " len " << len;
        ASSERT_EQ(std::string(buf.get(), *n), data.substr(std::min<size_t>(off, size), want));
      }
    }
  }
  // Grown after open: the part past the old size comes through the tail read.
  std::string before = bytes(k + 100, 1), after = bytes(2 * k, 2);
  WriteFile(In("g"), before);
  Result<std::unique_ptr<OriginFile>> g = origin_->Open("g");
  ASSERT_TRUE(g.ok());
  int fd = open(In("g").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, after.data(), after.size(), 0), static_cast<ssize_t>(after.size()));
  std::shared_ptr<char[]> buf = AllocAligned(2 * k);
  Result<size_t> n = (*g)->ReadAtAligned(buf.get(), 2 * k, 0, Urgency::kReader);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf.get(), *n), after);
  // Grown after open, read to where its end was: not a byte more than asked.
  n = (*g)->ReadAtAligned(buf.get(), k + 100, 0, Urgency::kReader);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf.get(), *n), after.substr(0, k + 100));
  // Shrunk after open: short, never an error or stale bytes past the end.
  ASSERT_EQ(ftruncate(fd, 1000), 0);
  close(fd);
  n = (*g)->ReadAtAligned(buf.get(), 2 * k, 0, Urgency::kReader);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(std::string(buf.get(), *n), after.substr(0, 1000));
}

TEST_P(LocalOriginTest, MetadataCallsKeepNoDescriptors) {
  ASSERT_EQ(mkdir(In("a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(In("a/b").c_str(), 0755), 0);
  WriteFile(In("a/b/f"), "x");
  ASSERT_EQ(symlink("f", In("a/b/l").c_str()), 0);
  int before = OpenFdCount();
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(origin_->Stat("a/b/f").ok());
    EXPECT_FALSE(origin_->Stat("a/b/none").ok());
    EXPECT_TRUE(origin_->ReadLink("a/b/l").ok());
    EXPECT_TRUE(origin_->ReadDir("a/b", [](auto&) { return false; }).ok());
    EXPECT_TRUE(origin_->ListXattr("a/b/f").ok());
    EXPECT_FALSE(origin_->GetXattr("a/b/f", "user.none").ok());
    EXPECT_FALSE(origin_->Open("a/b/l").ok());
  }
  EXPECT_EQ(OpenFdCount(), before);
}

TEST_P(LocalOriginTest, RootIsPinnedAcrossRename) {
  WriteFile(In("f"), "pinned");
  ASSERT_EQ(rename(root_.c_str(), (base_ + "/moved").c_str()), 0);
  ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);  // an impostor at the old name
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("f");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(ReadAll(**f), "pinned");
}

// A dead root (a shut-down disk, a dead NFS or FUSE mount) is reopened from
// its path; here the pinned directory is deleted, the one dead root a unit
// test can make without mounting (tests/integration/test_dead_origin.py
// kills real ones).
TEST_P(LocalOriginTest, DeletedRootIsReopenedWhenItIsBack) {
  WriteFile(In("f"), "before");
  ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
  EXPECT_EQ(origin_->Stat("f").status().code(), ENOENT);
  EXPECT_EQ(origin_->Open("f").status().code(), ENOENT);
  EXPECT_EQ(origin_->root_reopens(), 0u);
  ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  WriteFile(In("d/f"), "after!");
  Result<struct stat> st = origin_->Stat("d/f");
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->st_size, 6);
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("d/f");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(ReadAll(**f), "after!");
  std::vector<std::string> names;
  ASSERT_TRUE(origin_
                  ->ReadDir("",
                            [&](const OriginDirEntry& e) {
                              names.push_back(e.name);
                              return true;
                            })
                  .ok());
  EXPECT_EQ(names, std::vector<std::string>{"d"});
  EXPECT_EQ(origin_->root_reopens(), 1u);
}

TEST_P(LocalOriginTest, AMissingNameInALiveRootDoesNotReopen) {
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(origin_->Stat("none").status().code(), ENOENT);
    EXPECT_EQ(origin_->Stat("d/none").status().code(), ENOENT);
    EXPECT_EQ(origin_->Open("d/none").status().code(), ENOENT);
    EXPECT_EQ(origin_->ReadDir("none", [](auto&) { return true; }).code(), ENOENT);
  }
  EXPECT_EQ(origin_->root_reopens(), 0u);
}

TEST_P(LocalOriginTest, ReopeningIsRateLimited) {
  Recreate(3600 * 1000);
  WriteFile(In("f"), "x");
  ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
  EXPECT_EQ(origin_->Stat("f").status().code(), ENOENT);  // tries; nothing there yet
  ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
  WriteFile(In("f"), "x");
  EXPECT_EQ(origin_->Stat("f").status().code(), ENOENT) << "a second try within the interval";
  EXPECT_EQ(origin_->root_reopens(), 0u);
}

// Calls in flight keep the root they started with; none sees a closed or
// reused descriptor, and every answer is the old tree's, the new tree's or
// ENOENT (between the two).
TEST_P(LocalOriginTest, CallsInFlightWhileTheRootIsReplaced) {
  auto make_tree = [&](const std::string& dir, int gen) {
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir + "/d").c_str(), 0755), 0);
    WriteFile(dir + "/d/f", "generation " + std::to_string(gen % 10));
  };
  ASSERT_EQ(rmdir(root_.c_str()), 0);
  make_tree(root_, 0);
  Recreate();
  std::atomic<bool> stop{false};
  std::atomic<int> good{0};
  std::vector<std::string> problems[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto bad = [&](const std::string& what, const Status& s) {
        if (s.code() != ENOENT) problems[t].push_back(what + ": " + s.message());
      };
      while (!stop.load()) {
        Result<struct stat> st = origin_->Stat("d/f");
        if (!st.ok()) bad("stat", st.status());
        Result<std::unique_ptr<OriginFile>> f = origin_->Open("d/f");
        if (f.ok()) {
          std::string got = ReadAll(**f);
          if (got.rfind("generation ", 0) != 0 || got.size() != 12) {
            problems[t].push_back("read '" + got + "'");
          }
          good++;
        } else {
          bad("open", f.status());
        }
        Status s = origin_->ReadDir("d", [](auto&) { return true; });
        if (!s.ok()) bad("readdir", s);
      }
    });
  }
  for (int gen = 1; gen <= 40; ++gen) {
    std::string next = base_ + "/next";
    make_tree(next, gen);
    ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
    ASSERT_EQ(rename(next.c_str(), root_.c_str()), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto& th : threads) th.join();
  for (auto& p : problems) EXPECT_TRUE(p.empty()) << p.front();
  EXPECT_GT(good.load(), 0);
  Result<std::unique_ptr<OriginFile>> f = origin_->Open("d/f");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(ReadAll(**f), "generation 0");  // 40 % 10
  EXPECT_GE(origin_->root_reopens(), 1u);
}

TEST(MakeOriginTest, LocalDirectory) {
  char tmpl[] = "/tmp/stoker-mk-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  WriteFile(dir + "/f", "hello");
  {
    Result<std::shared_ptr<Origin>> o = MakeOrigin(dir);
    ASSERT_TRUE(o.ok()) << o.status().message();
    EXPECT_EQ((*o)->Describe(), "local:" + dir);
    Result<std::unique_ptr<OriginFile>> f = (*o)->Open("f");
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(ReadAll(**f), "hello");
  }
  Result<std::shared_ptr<Origin>> file = MakeOrigin(dir + "/f");
  EXPECT_EQ(file.status().code(), ENOTDIR);
  EXPECT_EQ(file.status().message(), "origin '" + dir + "/f' is not a directory");
  std::system(("rm -rf '" + dir + "'").c_str());
  Result<std::shared_ptr<Origin>> gone = MakeOrigin(dir);
  EXPECT_EQ(gone.status().code(), ENOENT);
  EXPECT_EQ(gone.status().message(), "origin '" + dir + "': No such file or directory");
}

TEST(MakeOriginTest, Schemes) {
  // Remote schemes reach their backends: a URL without a host is refused
  // before any request, and one with a password never shows it.
  for (const std::string s : {"s3", "http", "https"}) {
    Result<std::shared_ptr<Origin>> o = MakeOrigin(s + ":///prefix");
    EXPECT_EQ(o.status().code(), EINVAL) << s;
    Result<std::shared_ptr<Origin>> secret = MakeOrigin(s + "://user:hunter2@bucket/prefix");
    EXPECT_EQ(secret.status().code(), EINVAL) << s;
    EXPECT_EQ(secret.status().message().find("hunter2"), std::string::npos);
  }
  OriginOptions no_retries;
  no_retries.retries = 0;
  Result<std::shared_ptr<Origin>> closed = MakeOrigin("http://127.0.0.1:1/", no_retries);
  EXPECT_TRUE(IsOriginUnavailable(closed.status().code())) << closed.status().message();
  Result<std::shared_ptr<Origin>> ftp = MakeOrigin("ftp://host/x");
  EXPECT_EQ(ftp.status().code(), EINVAL);
  EXPECT_NE(ftp.status().message().find("unknown scheme 'ftp'"), std::string::npos);
  EXPECT_EQ(MakeOrigin("").status().code(), EINVAL);
  // A path that merely contains "://" is a path.
  EXPECT_EQ(MakeOrigin("/tmp/no/such/a://b").status().code(), ENOENT);
}

TEST(MakeOriginTest, InjectedBackendReachesReads) {
  char tmpl[] = "/tmp/stoker-mk-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  WriteFile(dir + "/flaky", "data");
  WriteFile(dir + "/fine", "data");
  FaultSpec f;
  f.error = ETIMEDOUT;
  f.path_substr = "flaky";
  Result<std::unique_ptr<IoBackend>> inner = MakeIoBackend(IoBackendKind::kSyscall);
  ASSERT_TRUE(inner.ok());
  std::shared_ptr<IoBackend> io = MakeFaultyIoBackend(std::move(inner).value(), {f});
  {
    Result<std::shared_ptr<Origin>> o = MakeOrigin(dir, io);
    ASSERT_TRUE(o.ok());
    Result<std::unique_ptr<OriginFile>> flaky = (*o)->Open("flaky");
    ASSERT_TRUE(flaky.ok());
    char buf[4];
    Status s = (*flaky)->ReadAt(buf, 4, 0).status();
    EXPECT_EQ(s.code(), ETIMEDOUT);
    EXPECT_TRUE(IsOriginUnavailable(s.code()));
    Result<std::unique_ptr<OriginFile>> fine = (*o)->Open("fine");
    ASSERT_TRUE(fine.ok());
    EXPECT_EQ(ReadAll(**fine), "data");
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(SameContentTest, AnotherFilesystemKeepsOnlySizeAndMtime) {
  OriginIdentity was{100, 5, 6, 7, 8, ""};
  EXPECT_TRUE(SameContent(was, was));
  OriginIdentity moved = was;  // cp -a to a tmpfs mounted in its place
  moved.dev = 9;
  moved.ino = 70;
  moved.ctime_ns = 60;
  EXPECT_TRUE(SameContent(was, moved));
  OriginIdentity other = moved;
  other.mtime_ns = 50;
  EXPECT_FALSE(SameContent(was, other));
  other = moved;
  other.size = 101;
  EXPECT_FALSE(SameContent(was, other));
  // On the same filesystem a new inode is another file, even with the same
  // size and mtime (rewritten and renamed within one clock tick).
  OriginIdentity renamed_over = was;
  renamed_over.ino = 70;
  EXPECT_FALSE(SameContent(was, renamed_over));
  EXPECT_TRUE(SameSizeAndTimes(was, renamed_over));
  // A new ctime alone is a chmod, a link, or a copy over the same inode
  // number (cp -a to a fresh tmpfs that got the same device number).
  OriginIdentity chmodded = was;
  chmodded.ctime_ns = 60;
  EXPECT_TRUE(SameContent(was, chmodded));
  OriginIdentity etag = was;
  etag.etag = "\"abc\"";
  EXPECT_FALSE(SameContent(was, etag));
  // Remote origins (no device) carry their ETag in ctime.
  OriginIdentity remote{100, 5, 6, 7, 0, ""};
  OriginIdentity reuploaded = remote;
  reuploaded.ctime_ns = 61;
  EXPECT_FALSE(SameContent(remote, reuploaded));
  EXPECT_FALSE(SameSizeAndTimes(remote, reuploaded));
  // A decoded view's file remounted with other options (another derived
  // device, and so another inode) has its raw file's size and times, not
  // its bytes. The same options give the same device and inode.
  OriginIdentity view{100, 5, 6, 90, kDerivedDevBit | 1, ""};
  OriginIdentity other_options = view;
  other_options.dev = kDerivedDevBit | 2;
  EXPECT_FALSE(SameContent(view, other_options));
  other_options.ino = 91;
  EXPECT_FALSE(SameContent(view, other_options));
  EXPECT_TRUE(SameContent(view, view));
  OriginIdentity raw = view;
  raw.dev = 8;
  EXPECT_FALSE(SameContent(view, raw));
  EXPECT_FALSE(SameContent(raw, view));
}

TEST(IsOriginUnavailableTest, ReachabilityIsNotAbsence) {
  for (int code : {EIO, ETIMEDOUT, ENOTCONN, EHOSTUNREACH, ENETUNREACH, ECONNREFUSED, ECONNRESET,
                   ESTALE, ENODEV, ENXIO, EAGAIN}) {
    EXPECT_TRUE(IsOriginUnavailable(code)) << std::strerror(code);
  }
  for (int code : {0, ENOENT, EACCES, EPERM, ENOTDIR, EISDIR, ELOOP, EINVAL, ENOSPC}) {
    EXPECT_FALSE(IsOriginUnavailable(code)) << std::strerror(code);
  }
}

}  // namespace
}  // namespace stoker
