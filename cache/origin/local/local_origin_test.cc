// LocalOrigin against real directories under /tmp: paths, names, symlinks,
// attributes, reads. Every test runs twice: resolving with openat2, and
// with the component walk used where a sandbox forbids openat2.
#include "cache/origin/local/local_origin.h"

#include <gtest/gtest.h>

#include "cache/origin/local/local_origin_test_util.h"

namespace stoker {
namespace local_origin_test {
namespace {

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

}  // namespace
}  // namespace local_origin_test
}  // namespace stoker
