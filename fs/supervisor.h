// Supervisor: keeps a mount alive across a crash of its daemon (--supervise).
//
// Without it, a daemon killed by a signal takes its /dev/fuse descriptor
// with it: the kernel aborts the connection and every reader of the mount
// gets ENOTCONN or EIO. With it, the daemon process forks. The parent is the
// supervisor: single-threaded, holding nothing but a duplicate of the
// mount's /dev/fuse descriptor and a copy of the daemon's node table. The
// child is the daemon and does all the work. When the daemon dies of a
// signal, the connection lives on in the supervisor's descriptor, and a new
// daemon is forked onto it:
//
// - The kernel sends INIT once per connection. The first daemon reads it
//   itself and hands its bytes to the supervisor with the descriptor
//   (HandOver); a new daemon replays them into its own session
//   (fuse_session_process_buf), so libfuse negotiates what the kernel has.
//   The replayed reply names a request the kernel has already answered:
//   the kernel refuses it with ENOENT, which libfuse ignores.
// - Node ids the kernel holds stay valid: the daemon's InodeTable journals
//   every node to the supervisor (Record), which keeps them in an
//   InodeTable::Saved that the new daemon restores.
// - File handles: see FsContext (fs/fuse_ops.h). Each daemon has its own
//   generation, carried in every fh it gives out; the handles of a dead
//   one are made again from their node on first use.
// - Requests the dead daemon had read but not answered sit in the kernel's
//   processing queue. The new daemon asks for them again with
//   FUSE_NOTIFY_RESEND (Linux 6.9+; on older kernels they stay unanswered).
//   This is why the daemon does not clone /dev/fuse per thread under a
//   supervisor: a clone dies with the daemon, and the kernel ends its
//   requests with an error instead of keeping them.
//
// A daemon that exits (a clean unmount, or an error before the mount was
// live) ends the supervisor with its status. SIGTERM, SIGINT and SIGHUP to
// the supervisor are passed to the daemon. More than max_restarts crashes
// within restart_window_s make the supervisor give up: it closes the
// descriptor and the mount is left dead, as without a supervisor (the next
// `stoker mount` clears it).
//
// Thread-safety: Supervise must be called once no other thread is running
// (it forks, and waits for threads already joined to be gone).
// SupervisorLink is used by the daemon; Record is thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/inode_table.h"
#include "util/status.h"

namespace stoker {

// What a restarted daemon takes over from its supervisor.
struct DaemonRestart {
  int fuse_fd = -1;          // the mount's /dev/fuse, INIT done
  std::string init_request;  // the kernel's INIT request, to replay
  std::string mountpoint;    // resolved, as the first daemon mounted it
  const InodeTable::Saved* nodes = nullptr;
};

// A daemon's end of the channel to its supervisor.
class SupervisorLink {
 public:
  SupervisorLink(int fd, uint32_t generation, unsigned restarts, pid_t supervisor,
                 const DaemonRestart* restart)
      : fd_(fd),
        generation_(generation),
        restarts_(restarts),
        supervisor_(supervisor),
        restart_(restart) {}
  SupervisorLink(const SupervisorLink&) = delete;
  SupervisorLink& operator=(const SupervisorLink&) = delete;

  uint32_t generation() const { return generation_; }  // 1 for the first daemon
  unsigned restarts() const { return restarts_; }
  pid_t supervisor_pid() const { return supervisor_; }
  // Null for the first daemon.
  const DaemonRestart* restart() const { return restart_; }

  // The first daemon, once mounted and before it serves: gives the
  // supervisor a duplicate of fuse_fd, the INIT request it read and where
  // it mounted.
  Status HandOver(int fuse_fd, std::string_view init_request, std::string_view mountpoint);
  // One InodeTable journal record. Best effort: a supervisor that is gone
  // cannot restart anything anyway.
  void Record(std::string_view record);

 private:
  const int fd_;
  const uint32_t generation_;
  const unsigned restarts_;
  const pid_t supervisor_;
  const DaemonRestart* const restart_;
  std::atomic<bool> broken_{false};
};

struct SupervisorOptions {
  // Crashes tolerated within restart_window_s. Default: 5 in 10 s (a
  // daemon that crashes on a request the kernel then sends again would
  // otherwise crash for ever).
  int max_restarts = 5;
  int restart_window_s = 10;
  // How long Supervise waits for the process to have one thread before it
  // refuses (EDEADLK). Default: 5 s (see AwaitOneThread).
  std::chrono::milliseconds single_thread_wait{5000};
  // Called in the supervisor once the first daemon is forked (to close what
  // only the daemon should hold). Default: none.
  std::function<void()> after_first_fork;
};

// Runs daemon(link) in a child process and restarts it as described above.
// The child exits with daemon's return value. OK if the daemon exited 0;
// otherwise an error naming how it ended. EDEADLK, before anything is
// forked, if the process still has more than one thread after
// options.single_thread_wait (a sanitizer's, say), naming them.
Status Supervise(const SupervisorOptions& options,
                 const std::function<int(SupervisorLink&)>& daemon);

// The threads of this process other than the caller, as "NAME (TID)", from
// /proc/self/task.
std::vector<std::string> OtherThreads();

// Waits until the caller is the process's only thread, or until wait has
// passed; returns OtherThreads() as it was last seen (empty: alone). A thread
// just joined is not yet gone: pthread_join returns once the kernel clears
// the thread's id, before the thread leaves the thread group, and load
// widens that window; an io_uring worker leaves its ring's owner on its own
// time too.
std::vector<std::string> AwaitOneThread(std::chrono::milliseconds wait);

// Asks the kernel to send again the requests read from fuse_fd and not
// answered (FUSE_NOTIFY_RESEND). False if the kernel refused (too old).
bool RequestResend(int fuse_fd);

}  // namespace stoker
