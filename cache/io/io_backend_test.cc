// Conformance suite every IoBackend passes (typed tests), then the fault
// injector's own behaviour.
#include "cache/io/io_backend.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/io/io_backend_impl.h"
#include "util/test_files.h"

namespace stoker {
namespace {

using testing::OpenFdCount;
using testing::Pattern;

// A scratch directory that makes the tests' files.
class TempDir : public testing::ScratchDir {
 public:
  TempDir() : ScratchDir("io") {}
  std::string File(const std::string& name, const std::string& data) const {
    const std::string p = Sub(name);
    testing::WriteFile(p, data);
    return p;
  }
};

struct SyscallKind {
  static Result<std::unique_ptr<IoBackend>> Make() {
    return MakeIoBackend(IoBackendKind::kSyscall);
  }
};
struct UringKind {
  static Result<std::unique_ptr<IoBackend>> Make() { return MakeIoBackend(IoBackendKind::kUring); }
};
struct AutoKind {
  static Result<std::unique_ptr<IoBackend>> Make() { return MakeIoBackend(IoBackendKind::kAuto); }
};
// A fault injector whose faults never match must be indistinguishable from
// what it wraps.
struct QuietFaultyKind {
  static Result<std::unique_ptr<IoBackend>> Make() {
    FaultSpec never;
    never.path_substr = "/no/such/path/ever";
    FaultSpec never_write = never;
    never_write.op = FaultSpec::kWrite;
    return MakeFaultyIoBackend(MakeSyscallIoBackend(), {never, never_write});
  }
};

template <typename Kind>
class IoBackendConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<IoBackend>> io = Kind::Make();
    if (!io.ok()) {
      GTEST_SKIP() << "backend unavailable here: " << io.status().message();
    }
    io_ = std::move(io).value();
    fds_before_ = OpenFdCount();
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
    if (io_) {
      EXPECT_EQ(OpenFdCount(), fds_before_) << "descriptor leaked";
    }
  }
  int OpenFile(const std::string& path, int flags) {
    int fd = open(path.c_str(), flags | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << path << ": " << std::strerror(errno);
    fds_.push_back(fd);
    return fd;
  }

  TempDir dir_;
  std::unique_ptr<IoBackend> io_;
  std::vector<int> fds_;
  int fds_before_ = 0;
};

using Kinds = ::testing::Types<SyscallKind, UringKind, AutoKind, QuietFaultyKind>;
TYPED_TEST_SUITE(IoBackendConformance, Kinds);

TYPED_TEST(IoBackendConformance, HasAName) { EXPECT_FALSE(this->io_->Name().empty()); }

TYPED_TEST(IoBackendConformance, ReadsAtOffsets) {
  const std::string data = Pattern(3 * 4096 + 17, 1);
  int fd = this->OpenFile(this->dir_.File("f", data), O_RDONLY);
  for (size_t off : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{8000}}) {
    std::string buf(1000, 'x');
    Result<size_t> n = this->io_->Read(fd, buf.data(), buf.size(), off);
    ASSERT_TRUE(n.ok()) << n.status().message();
    ASSERT_EQ(*n, buf.size());
    EXPECT_EQ(buf, data.substr(off, buf.size())) << "at " << off;
  }
}

TYPED_TEST(IoBackendConformance, ShortOnlyAtEndOfFile) {
  const std::string data = Pattern(10000, 2);
  int fd = this->OpenFile(this->dir_.File("f", data), O_RDONLY);
  std::string buf(4096, 'x');
  Result<size_t> n = this->io_->Read(fd, buf.data(), buf.size(), 8000);
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_EQ(*n, 2000u);
  EXPECT_EQ(buf.substr(0, 2000), data.substr(8000));
  n = this->io_->Read(fd, buf.data(), buf.size(), 10000);  // exactly at EOF
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  n = this->io_->Read(fd, buf.data(), buf.size(), 1 << 30);  // far beyond
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TYPED_TEST(IoBackendConformance, ZeroLengthReadAndWrite) {
  int fd = this->OpenFile(this->dir_.File("f", "abc"), O_RDWR);
  char c = 'x';
  Result<size_t> n = this->io_->Read(fd, &c, 0, 0);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_TRUE(this->io_->Write(fd, &c, 0, 1).ok());
  n = this->io_->Read(fd, &c, 1, 1);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(c, 'b');
}

TYPED_TEST(IoBackendConformance, LargeRead) {
  const std::string data = Pattern((8u << 20) + 3, 3);
  int fd = this->OpenFile(this->dir_.File("big", data), O_RDONLY);
  std::string buf(16u << 20, '\0');
  Result<size_t> n = this->io_->Read(fd, buf.data(), buf.size(), 0);
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_EQ(*n, data.size());
  EXPECT_TRUE(buf.compare(0, data.size(), data) == 0);
}

TYPED_TEST(IoBackendConformance, WriteThenReadBack) {
  int fd = this->OpenFile(this->dir_.path() + "/w", O_RDWR | O_CREAT);
  const std::string big = Pattern(2u << 20, 4);
  ASSERT_TRUE(this->io_->Write(fd, big.data(), big.size(), 4096).ok());
  ASSERT_TRUE(this->io_->Write(fd, "hello", 5, 100).ok());
  std::string buf(big.size() + 4096 + 10, '\0');
  Result<size_t> n = this->io_->Read(fd, buf.data(), buf.size(), 0);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, big.size() + 4096);
  EXPECT_EQ(buf.substr(100, 5), "hello");
  EXPECT_EQ(buf.substr(0, 100), std::string(100, '\0'));  // a hole reads as zeros
  EXPECT_TRUE(buf.compare(4096, big.size(), big) == 0);
}

TYPED_TEST(IoBackendConformance, ErrorsAreStatusCodes) {
  const std::string path = this->dir_.File("f", "data");
  int ro = this->OpenFile(path, O_RDONLY);
  int wo = this->OpenFile(path, O_WRONLY);
  char buf[4] = {};
  Status w = this->io_->Write(ro, "x", 1, 0);
  EXPECT_EQ(w.code(), EBADF) << w.message();
  EXPECT_NE(w.message().find(path), std::string::npos) << w.message();
  EXPECT_EQ(this->io_->Read(wo, buf, 4, 0).status().code(), EBADF);
  EXPECT_EQ(this->io_->Read(-1, buf, 4, 0).status().code(), EBADF);
  EXPECT_EQ(this->io_->Read(ro, buf, 4, -5).status().code(), EINVAL);
  int d = this->OpenFile(this->dir_.path(), O_RDONLY | O_DIRECTORY);
  EXPECT_EQ(this->io_->Read(d, buf, 4, 0).status().code(), EISDIR);
}

TYPED_TEST(IoBackendConformance, BatchOfManyOps) {
  const std::string data = Pattern(1u << 20, 5);
  int fd = this->OpenFile(this->dir_.File("f", data), O_RDONLY);
  int wo = this->OpenFile(this->dir_.path() + "/wo", O_WRONLY | O_CREAT);
  std::mt19937 rng(7);
  // More ops than any queue depth, with bad fds, empty ops and EOF among them.
  const size_t kOps = 300;
  std::vector<std::string> bufs(kOps);
  std::vector<ReadOp> ops(kOps);
  for (size_t i = 0; i < kOps; ++i) {
    ReadOp& op = ops[i];
    op.fd = fd;
    op.len = rng() % 70000;
    op.off = rng() % data.size();
    if (i % 17 == 3) op.fd = -1;
    if (i % 23 == 5) op.fd = wo;
    if (i % 29 == 7) op.len = 0;
    if (i % 31 == 11) op.off = data.size() - 10;
    bufs[i].assign(op.len, 'x');
    op.buf = bufs[i].data();
    op.done = 12345;
    op.status = Status::IOError("not run");
  }
  this->io_->ReadBatch(ops);
  for (size_t i = 0; i < kOps; ++i) {
    const ReadOp& op = ops[i];
    SCOPED_TRACE("op " + std::to_string(i));
    if (op.fd != fd) {
      EXPECT_EQ(op.status.code(), EBADF) << op.status.message();
      EXPECT_EQ(op.done, 0u);
      continue;
    }
    ASSERT_TRUE(op.status.ok()) << op.status.message();
    size_t want = std::min(op.len, data.size() - static_cast<size_t>(op.off));
    ASSERT_EQ(op.done, want);
    EXPECT_TRUE(bufs[i].compare(0, want, data, op.off, want) == 0);
  }
  std::vector<ReadOp> none;
  this->io_->ReadBatch(none);
}

TYPED_TEST(IoBackendConformance, ManyThreadsAtOnce) {
  const std::string data = Pattern(256u << 10, 6);
  int fd = this->OpenFile(this->dir_.File("f", data), O_RDONLY);
  std::vector<std::thread> threads;
  std::vector<int> bad(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 200; ++i) {
        size_t off = rng() % data.size(), len = rng() % 9000;
        std::string buf(len, '\0');
        Result<size_t> n = this->io_->Read(fd, buf.data(), len, off);
        size_t want = std::min(len, data.size() - off);
        if (!n.ok() || *n != want || buf.compare(0, want, data, off, want) != 0) ++bad[t];
        std::vector<ReadOp> ops(3);
        for (ReadOp& op : ops) {
          op.fd = fd;
          op.buf = buf.data();
          op.len = len;
          op.off = off;
        }
        this->io_->ReadBatch(ops);
        for (const ReadOp& op : ops) {
          if (!op.status.ok() || op.done != want) ++bad[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

// io_uring does not wait for the disk on an O_NONBLOCK fd (it answers
// EAGAIN); a backend must still return the bytes.
TYPED_TEST(IoBackendConformance, NonBlockingFdStillReads) {
  const std::string data = Pattern(4u << 20, 10);
  const std::string path = this->dir_.File("cold", data);
  int wfd = this->OpenFile(path, O_RDONLY);
  ASSERT_EQ(fdatasync(wfd), 0);
  ASSERT_EQ(posix_fadvise(wfd, 0, 0, POSIX_FADV_DONTNEED), 0);  // out of the page cache
  int fd = this->OpenFile(path, O_RDONLY | O_NONBLOCK);
  std::string buf(data.size(), '\0');
  Result<size_t> n = this->io_->Read(fd, buf.data(), buf.size(), 0);
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_EQ(*n, data.size());
  EXPECT_TRUE(buf == data);
}

// io-wq workers that serve the calling thread's ring (named iou-wrk-TID).
int IoWorkersOf(pid_t tid) {
  const std::string want = "iou-wrk-" + std::to_string(tid);
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (struct dirent* de = readdir(d)) {
    if (de->d_name[0] == '.') continue;
    char comm[64] = {0};
    std::string p = std::string("/proc/self/task/") + de->d_name + "/comm";
    FILE* f = std::fopen(p.c_str(), "re");
    if (f == nullptr) continue;  // exited meanwhile
    if (std::fgets(comm, sizeof(comm), f) != nullptr && want + "\n" == comm) ++n;
    std::fclose(f);
  }
  closedir(d);
  return n;
}

// A chunk write is one synchronous write: it must be done in the calling
// thread. (io_uring hands a buffered write that ext4 cannot do without
// blocking to an io-wq worker thread: two context switches per chunk.)
TYPED_TEST(IoBackendConformance, WritesRunInTheCallingThread) {
  const std::string data = Pattern(100 << 10, 12);
  int fd = this->OpenFile(this->dir_.path() + "/w", O_RDWR | O_CREAT);
  int workers = -1;
  std::thread t([&] {  // a fresh thread: its own ring, no workers yet
    for (int i = 0; i < 32; ++i) {
      Status s =
          this->io_->Write(fd, data.data(), data.size(), static_cast<off_t>(i) * data.size());
      ASSERT_TRUE(s.ok()) << s.message();
    }
    workers = IoWorkersOf(static_cast<pid_t>(::gettid()));
  });
  t.join();
  EXPECT_EQ(workers, 0);
  std::string back(data.size(), '\0');
  Result<size_t> n = this->io_->Read(fd, back.data(), back.size(), 31 * data.size());
  ASSERT_TRUE(n.ok() && *n == data.size());
  EXPECT_TRUE(back == data);
}

// A forked child (the daemon forks after start) must not submit to its
// parent's rings.
TYPED_TEST(IoBackendConformance, WorksInAForkedChild) {
  const std::string data = Pattern(10000, 11);
  int fd = this->OpenFile(this->dir_.File("f", data), O_RDONLY);
  std::string buf(100, '\0');
  ASSERT_TRUE(this->io_->Read(fd, buf.data(), buf.size(), 0).ok());  // the parent's ring
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Result<size_t> n = this->io_->Read(fd, buf.data(), buf.size(), 5000);
    std::vector<ReadOp> ops(2);
    for (ReadOp& op : ops) {
      op.fd = fd;
      op.buf = buf.data();
      op.len = 10;
    }
    this->io_->ReadBatch(ops);
    bool good = n.ok() && *n == 100 && buf.compare(10, 90, data, 5010, 90) == 0 &&
                ops[0].status.ok() && ops[1].done == 10;
    _exit(good ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  ASSERT_TRUE(this->io_->Read(fd, buf.data(), buf.size(), 0).ok());  // parent unharmed
}

TEST(MakeIoBackend, AutoNamesWhatItChose) {
  Result<std::unique_ptr<IoBackend>> io = MakeIoBackend(IoBackendKind::kAuto);
  ASSERT_TRUE(io.ok());
  Result<std::unique_ptr<IoBackend>> uring = MakeIoBackend(IoBackendKind::kUring);
  EXPECT_EQ((*io)->Name(), uring.ok() ? "io_uring" : "syscall");
  if (!uring.ok()) {
    EXPECT_NE(uring.status().message().find("io_uring"), std::string::npos);
  }
}

// The fault injector itself.
class FaultyIoBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<IoBackend> Faulty(std::vector<FaultSpec> faults) {
    return MakeFaultyIoBackend(MakeSyscallIoBackend(), std::move(faults));
  }
  int Open(const std::string& path, int flags) {
    int fd = open(path.c_str(), flags | O_CLOEXEC, 0644);
    fds_.push_back(fd);
    return fd;
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
  }
  TempDir dir_;
  std::vector<int> fds_;
};

TEST_F(FaultyIoBackendTest, FailsEveryNthMatchingRead) {
  FaultSpec f;
  f.error = ETIMEDOUT;
  f.every_nth = 3;
  std::unique_ptr<IoBackend> io = Faulty({f});
  EXPECT_EQ(io->Name(), "faulty(syscall)");
  int fd = Open(dir_.File("f", "0123456789"), O_RDONLY);
  char buf[4];
  std::vector<int> codes;
  for (int i = 0; i < 7; ++i) codes.push_back(io->Read(fd, buf, 4, 0).status().code());
  EXPECT_EQ(codes, (std::vector<int>{0, 0, ETIMEDOUT, 0, 0, ETIMEDOUT, 0}));
  EXPECT_TRUE(io->Write(fd, "x", 1, 0).code() == EBADF);  // writes are not matched
}

TEST_F(FaultyIoBackendTest, MatchesByPath) {
  FaultSpec f;
  f.path_substr = "victim";
  std::unique_ptr<IoBackend> io = Faulty({f});
  int victim = Open(dir_.File("the-victim-file", "abcd"), O_RDONLY);
  int other = Open(dir_.File("other", "abcd"), O_RDONLY);
  char buf[4];
  Status s = io->Read(victim, buf, 4, 0).status();
  EXPECT_EQ(s.code(), EIO);
  EXPECT_NE(s.message().find("the-victim-file"), std::string::npos) << s.message();
  EXPECT_TRUE(io->Read(other, buf, 4, 0).ok());
}

TEST_F(FaultyIoBackendTest, CorruptFlipsOneByte) {
  FaultSpec f;
  f.error = 0;
  f.corrupt = true;
  std::unique_ptr<IoBackend> io = Faulty({f});
  const std::string data = Pattern(5000, 8);
  int fd = Open(dir_.File("f", data), O_RDONLY);
  std::string buf(5000, '\0');
  Result<size_t> n = io->Read(fd, buf.data(), buf.size(), 0);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, data.size());
  int differ = 0;
  for (size_t i = 0; i < data.size(); ++i) differ += buf[i] != data[i];
  EXPECT_EQ(differ, 1);
}

TEST_F(FaultyIoBackendTest, WriteFaultSurfacesAsItsCode) {
  FaultSpec f;
  f.op = FaultSpec::kWrite;
  f.error = ENOSPC;
  std::unique_ptr<IoBackend> io = Faulty({f});
  int fd = Open(dir_.path() + "/w", O_RDWR | O_CREAT);
  Status s = io->Write(fd, "abc", 3, 0);
  EXPECT_EQ(s.code(), ENOSPC) << s.message();
  char buf[3];
  Result<size_t> n = io->Read(fd, buf, 3, 0);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u) << "a failed write must not reach the file";
}

TEST_F(FaultyIoBackendTest, BatchGetsFaultsPerOp) {
  FaultSpec f;
  f.every_nth = 2;
  f.error = ECONNRESET;
  FaultSpec c;
  c.error = 0;
  c.path_substr = "corrupt-me";
  std::unique_ptr<IoBackend> io = Faulty({f, c});
  const std::string data = Pattern(100, 9);
  int fd = Open(dir_.File("corrupt-me", data), O_RDONLY);
  std::vector<std::string> bufs(6, std::string(100, '\0'));
  std::vector<ReadOp> ops(6);
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].fd = fd;
    ops[i].buf = bufs[i].data();
    ops[i].len = 100;
  }
  io->ReadBatch(ops);
  for (size_t i = 0; i < ops.size(); ++i) {
    SCOPED_TRACE(i);
    if (i % 2 == 1) {
      EXPECT_EQ(ops[i].status.code(), ECONNRESET);
      continue;
    }
    ASSERT_TRUE(ops[i].status.ok());
    EXPECT_EQ(ops[i].done, 100u);
    EXPECT_NE(bufs[i], data);  // the path rule fired and flipped a byte
  }
}

}  // namespace
}  // namespace stoker
