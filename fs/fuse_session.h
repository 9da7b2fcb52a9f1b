// The libfuse session of a mount, as RunMount (fs/mount.cc) sets it up: its
// arguments, libfuse's log in ours, the early mount made before the daemon
// starts its threads, the hand-over of INIT to a supervisor and the
// take-over after a crash, and the device's I/O hooks for passthrough.
//
// Thread-safety: LogFromFuse and LastFuseError may be called from any
// thread; EarlyMount::Unmount is thread-safe; the rest is called from the
// thread that sets the mount up.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse3/fuse_lowlevel.h>

#include <cstdarg>
#include <memory>
#include <string>
#include <vector>

#include "fs/fuse_io.h"
#include "fs/mount.h"
#include "fs/supervisor.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

// The most a READ asks for (max_read), unless the user's -o says otherwise.
inline constexpr unsigned kMaxRead = 1u << 20;
// Room for any request /dev/fuse will hand over (the kernel refuses a read
// into less than its largest WRITE).
inline constexpr size_t kRequestBuffer = (1u << 20) + (64u << 10);

// libfuse's log (fuse_set_log_func), joined into lines and sent to ours.
void LogFromFuse(enum fuse_log_level level, const char* fmt, va_list ap);
// What libfuse last said went wrong, for an error message: ": <line>" or "".
std::string LastFuseError();

// The user may set max_read; init() must then ask for the same value.
unsigned MaxReadFrom(const std::vector<std::string>& fuse_options);

// A libfuse argument vector and the strings it points into.
struct Args {
  std::vector<std::string> strings;
  std::vector<char*> argv;
  fuse_args Get() {
    argv.clear();
    for (std::string& s : strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    return FUSE_ARGS_INIT(static_cast<int>(strings.size()), argv.data());
  }
};

// The mount's arguments: fsname, subtype, max_read, the user's -o options,
// default_permissions where asked, and ro last.
Args FuseArgs(const MountOptions& options, const std::string& fsname);
// The origin as the fsname shows it (resolved where it is a local path).
std::string FsName(const std::string& origin);

// The mount, made by a session of its own before the daemon starts its
// threads. As a user, libfuse mounts through fusermount3: it forks, and the
// child allocates before exec. Forked from a process whose other threads
// may hold a lock at that moment (ASan's allocator has no fork handler), the
// child can wait on it forever, and the mount never comes up. The serving
// session takes a descriptor of this mount (/dev/fd/N), which libfuse then
// does not consider its own to unmount; this one unmounts, at the end or
// when the daemon fails before serving.
class EarlyMount {
 public:
  static Result<std::unique_ptr<EarlyMount>> Make(const MountOptions& options,
                                                  const std::string& mountpoint);

  EarlyMount(const EarlyMount&) = delete;
  EarlyMount& operator=(const EarlyMount&) = delete;
  ~EarlyMount() {
    Unmount();
    fuse_session_destroy(se_);
  }

  // A new descriptor of the mount, which the serving session owns.
  Result<int> TakeDevice() {
    const int fd = fcntl(fuse_session_fd(se_), F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return Status::FromErrno(errno, "duplicating the mount's /dev/fuse descriptor");
    return fd;
  }
  // Thread-safe, and once only.
  void Unmount() {
    MutexLock lock(mu_);
    if (mounted_) fuse_session_unmount(se_);
    mounted_ = false;
  }

 private:
  explicit EarlyMount(fuse_session* se) : se_(se) {}
  fuse_session* const se_;
  Mutex mu_;
  bool mounted_ GUARDED_BY(mu_) = false;
};

// The first daemon under a supervisor: reads the kernel's INIT request
// itself, hands it to the supervisor with the descriptor, then lets libfuse
// process it. Without a supervisor to take it, the mount just goes on.
void StartSupervised(fuse_session* se, SupervisorLink& link, const std::string& mountpoint);

// Makes fd the session's descriptor; with passthrough wanted, through the
// I/O hooks that ask the kernel for it in the INIT reply (fs/fuse_io.h).
Status ServeDevice(fuse_session* se, int fd, PassthroughMode passthrough);

// A restarted daemon: serves the supervisor's descriptor, replays INIT into
// the new session (the kernel refuses the reply: that is expected) and asks
// for the requests its predecessor left unanswered.
Status TakeOverSession(fuse_session* se, const DaemonRestart& restart, PassthroughMode passthrough);

// Why the kernel will not take backing files on fuse_fd ("" if it will).
std::string PassthroughRefusal(const MountOptions& options, int fuse_fd);

// The passthrough asked for, as far as the open mode allows it: a kernel
// that opens files by itself sends no OPEN to answer with a backing file.
PassthroughMode PassthroughOf(const MountOptions& options);

}  // namespace stoker
