// MakeOrigin (which backend a source names), SameContent across
// filesystems, and reachability that is not absence.
#include <gtest/gtest.h>

#include "cache/origin/local/local_origin_test_util.h"
#include "cache/origin/origin.h"

namespace stoker {
namespace local_origin_test {
namespace {

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
}  // namespace local_origin_test
}  // namespace stoker
