// IoBackend over io_uring for reads (a batch of chunk checks goes to the
// device at once); writes are pwrite (see Write). Each thread that does I/O
// gets its own ring (thread_local), so the many FUSE and fetch threads submit
// without sharing a lock or a submission queue. A ring lives until its thread
// exits; after fork() the child makes fresh rings instead of touching the
// parent's.
#include <liburing.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "cache/io/io_backend_impl.h"
#include "util/log.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#include <sanitizer/tsan_interface.h>
#endif
#endif

namespace stoker {
namespace {

// Requests in flight per ring; a batch larger than this slides through it.
constexpr unsigned kQueueDepth = 64;
// An sqe's length is 32 bits; larger transfers go as several requests.
constexpr size_t kMaxSqeBytes = 1u << 30;

std::atomic<uint64_t> g_fork_generation{0};

// liburing maps rings with raw syscalls that ThreadSanitizer cannot see, so a
// new thread's ring at the address of an exited thread's ring looks like a
// race. The kernel orders the munmap before the mmap; say so to TSan.
#if defined(__SANITIZE_THREAD__)
#define STOKER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STOKER_TSAN 1
#endif
#endif
#ifdef STOKER_TSAN
char g_ring_mapping;
void RingUnmapping() { __tsan_release(&g_ring_mapping); }
void RingMapped() { __tsan_acquire(&g_ring_mapping); }
#else
void RingUnmapping() {}
void RingMapped() {}
#endif

int InitRing(io_uring* ring) {
  // SINGLE_ISSUER|DEFER_TASKRUN (6.1+) fits one ring per thread that submits
  // and reaps itself; older kernels get a plain ring.
  int r = io_uring_queue_init(kQueueDepth, ring,
                              IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
  if (r == -EINVAL) r = io_uring_queue_init(kQueueDepth, ring, 0);
  if (r == 0) RingMapped();
  return r;
}

class ThreadRing {
 public:
  ThreadRing() = default;
  ThreadRing(const ThreadRing&) = delete;
  ThreadRing& operator=(const ThreadRing&) = delete;
  ~ThreadRing() {
    if (ready_) {
      RingUnmapping();
      io_uring_queue_exit(&ring_);
    }
  }

  // The calling thread's ring, made on first use; nullptr with *err set when
  // the kernel refuses one (ENOMEM, a lowered limit).
  io_uring* Get(int* err) {
    uint64_t gen = g_fork_generation.load(std::memory_order_relaxed);
    if (ready_ && gen != gen_) {
      RingUnmapping();
      io_uring_queue_exit(&ring_);  // the parent's; it keeps its own mapping
      ready_ = false;
    }
    if (!ready_) {
      int r = InitRing(&ring_);
      if (r < 0) {
        *err = -r;
        return nullptr;
      }
      ready_ = true;
      gen_ = gen;
    }
    return &ring_;
  }

 private:
  io_uring ring_{};
  bool ready_ = false;
  uint64_t gen_ = 0;
};

thread_local ThreadRing t_ring;

struct Req {
  int fd;
  char* buf;
  size_t len;
  uint64_t off;
  size_t done = 0;
  int err = 0;
};

// io_uring answers EAGAIN instead of waiting on an O_NONBLOCK fd (where the
// filesystem cannot wait asynchronously, e.g. NFS); positional syscalls wait
// on regular files whatever the flag, so they finish the request.
void FinishWithSyscall(Req& r) {
  while (r.done < r.len) {
    size_t n = std::min(r.len - r.done, kMaxSqeBytes);
    ssize_t got = ::pread(r.fd, r.buf + r.done, n, r.off + r.done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      r.err = errno;
      return;
    }
    if (got == 0) return;
    r.done += static_cast<size_t>(got);
  }
}

// Runs every read through the ring with at most kQueueDepth in flight,
// resubmitting the remainder of a short transfer until it completes, fails or
// reaches end of file.
void Run(io_uring* ring, Req* reqs, size_t n) {
  size_t next = 0;
  std::vector<size_t> resubmit;
  unsigned inflight = 0;
  for (;;) {
    while (inflight < kQueueDepth) {
      size_t i;
      if (!resubmit.empty()) {
        i = resubmit.back();
        resubmit.pop_back();
      } else if (next < n) {
        i = next++;
        if (reqs[i].len == 0) continue;
      } else {
        break;
      }
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      STOKER_CHECK(sqe != nullptr, "io_uring submission queue full below its depth");
      Req& r = reqs[i];
      unsigned chunk = static_cast<unsigned>(std::min(r.len - r.done, kMaxSqeBytes));
      io_uring_prep_read(sqe, r.fd, r.buf + r.done, chunk, r.off + r.done);
      io_uring_sqe_set_data64(sqe, i);
      ++inflight;
    }
    if (inflight == 0) return;

    int s = io_uring_submit_and_wait(ring, 1);
    if (s < 0 && s != -EINTR && s != -EAGAIN && s != -EBUSY && s != -ENOMEM) {
      // Unsubmitted sqes stay queued on the transient errors above; any other
      // error means the ring itself is broken and the in-flight buffers'
      // fate is unknown.
      std::fprintf(stderr, "stoker: io_uring_enter failed: %s\n", std::strerror(-s));
      std::abort();
    }
    unsigned head;
    unsigned seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      --inflight;
      Req& r = reqs[io_uring_cqe_get_data64(cqe)];
      int res = cqe->res;
      if (res == -EINTR) {
        resubmit.push_back(&r - reqs);
      } else if (res == -EAGAIN) {
        FinishWithSyscall(r);
      } else if (res < 0) {
        r.err = -res;
      } else if (res > 0) {
        r.done += static_cast<size_t>(res);
        if (r.done < r.len) resubmit.push_back(&r - reqs);
      }
    }
    io_uring_cq_advance(ring, seen);
  }
}

class UringIoBackend final : public IoBackend {
 public:
  UringIoBackend() : fallback_(MakeSyscallIoBackend()) {}

  std::string Name() const override { return "io_uring"; }

  Result<size_t> Read(int fd, void* buf, size_t len, off_t off) override {
    if (off < 0) return IoErrorStatus(EINVAL, "read", fd, 0);
    if (len == 0) return size_t{0};
    io_uring* ring = Ring();
    if (ring == nullptr) return fallback_->Read(fd, buf, len, off);
    Req r{fd, static_cast<char*>(buf), len, static_cast<uint64_t>(off)};
    Run(ring, &r, 1);
    if (r.err != 0) return IoErrorStatus(r.err, "read", fd, r.off + r.done);
    return r.done;
  }

  // One write at a time gains nothing from a ring, and costs a context
  // switch where the filesystem cannot write buffered without blocking
  // (ext4): io_uring hands such a write to an io-wq worker thread. pwrite
  // does it in the calling thread.
  Status Write(int fd, const void* buf, size_t len, off_t off) override {
    return fallback_->Write(fd, buf, len, off);
  }

  void ReadBatch(std::vector<ReadOp>& ops) override {
    io_uring* ring = Ring();
    if (ring == nullptr) return fallback_->ReadBatch(ops);
    std::vector<Req> reqs;
    reqs.reserve(ops.size());
    for (ReadOp& op : ops) {
      // A negative offset fails on its own (EINVAL) without reaching the ring.
      reqs.push_back(Req{op.fd, static_cast<char*>(op.buf), op.off < 0 ? 0 : op.len,
                         static_cast<uint64_t>(op.off), 0, op.off < 0 ? EINVAL : 0});
    }
    Run(ring, reqs.data(), reqs.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const Req& r = reqs[i];
      ops[i].done = r.err ? 0 : r.done;
      ops[i].status = r.err ? IoErrorStatus(r.err, "read", r.fd, r.off + r.done) : Status::OK();
    }
  }

 private:
  io_uring* Ring() {
    int err = 0;
    io_uring* ring = t_ring.Get(&err);
    if (ring == nullptr && !warned_.exchange(true)) {
      LOG_WARN("io_uring ring for a thread failed ({}); that thread uses syscalls",
               std::strerror(err));
    }
    return ring;
  }

  std::unique_ptr<IoBackend> fallback_;
  std::atomic<bool> warned_{false};
};

}  // namespace

Result<std::unique_ptr<IoBackend>> MakeUringIoBackend() {
  static std::once_flag atfork_once;
  std::call_once(atfork_once, [] {
    pthread_atfork(nullptr, nullptr,
                   [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
  });
  io_uring ring;
  int r = io_uring_queue_init(kQueueDepth, &ring, 0);
  if (r < 0) return Status::FromErrno(-r, "io_uring unavailable");
  RingMapped();
  // Sandboxes (gVisor, some seccomp filters) offer rings without the opcodes.
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  bool usable = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                io_uring_opcode_supported(probe, IORING_OP_WRITE);
  if (probe != nullptr) io_uring_free_probe(probe);
  RingUnmapping();
  io_uring_queue_exit(&ring);
  if (!usable) return Status::Error(ENOSYS, "io_uring unavailable: no read/write opcodes");
  return std::unique_ptr<IoBackend>(std::make_unique<UringIoBackend>());
}

}  // namespace stoker
