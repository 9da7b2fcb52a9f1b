#include "fs/supervisor.h"

#include <dirent.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include "util/log.h"

namespace stoker {

namespace {

// Channel messages (SOCK_SEQPACKET, one per send): the hand-over is 'H', the
// INIT request's length (uint32), its bytes and the mountpoint, with the
// descriptor attached; everything else is an InodeTable journal record.
constexpr char kHandOver = 'H';
constexpr size_t kMaxMessage = 64 * 1024;  // an S3 key's name may be 1 KiB

// FUSE_NOTIFY_RESEND (Linux 6.9; an enum value, newer than some headers).
constexpr int kNotifyResend = 7;

std::string Describe(int wstatus) {
  if (WIFSIGNALED(wstatus))
    return std::string("was killed by signal ") + strsignal(WTERMSIG(wstatus));
  return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
}

// The supervisor's side: everything it keeps across daemons.
class Supervisor {
 public:
  explicit Supervisor(const SupervisorOptions& options) : options_(options) {}
  ~Supervisor() {
    if (fuse_fd_ >= 0) close(fuse_fd_);
    if (signal_fd_ >= 0) close(signal_fd_);
  }

  Status Run(const std::function<int(SupervisorLink&)>& daemon);

 private:
  // Run's steps. Blocks the signals the supervisor waits for and opens
  // signal_fd_ on them; old_mask_ is what each daemon gets back.
  Status WatchSignals();
  // Forks the daemon of generation; *channel: the supervisor's end of the
  // channel to it.
  Result<pid_t> StartDaemon(const std::function<int(SupervisorLink&)>& daemon, uint32_t generation,
                            int* channel);
  // Until the daemon exits: reads its channel and passes the supervisor's
  // signals on to it. Closes the channel; false if poll failed.
  bool AwaitExit(pid_t pid, int channel, int* wstatus);
  // What Run returns once a daemon ended with wstatus; nullopt: a crash to
  // survive, with a new daemon.
  std::optional<Status> Outcome(int wstatus);

  // Reads what the channel holds; false once the daemon's end is closed.
  bool Drain(int channel, bool wait);
  void Handle(const char* data, size_t len, int fd);

  const SupervisorOptions& options_;
  int fuse_fd_ = -1;
  std::string init_request_;
  std::string mountpoint_;
  InodeTable::Saved saved_;
  uint64_t bad_records_ = 0;
  int signal_fd_ = -1;
  sigset_t old_mask_;
  std::deque<std::chrono::steady_clock::time_point> crashes_;  // within the window
  unsigned restarts_ = 0;
  bool stopping_ = false;  // a signal was passed on: the daemon is not restarted
};

void Supervisor::Handle(const char* data, size_t len, int fd) {
  if (len > 0 && data[0] == kHandOver) {
    if (fd < 0 || fuse_fd_ >= 0) {
      LOG_ERROR("supervisor: an unexpected hand-over message; ignored");
      if (fd >= 0) close(fd);
      return;
    }
    uint32_t n = 0;
    if (len < 5 || (std::memcpy(&n, data + 1, 4), n > len - 5)) {
      LOG_ERROR("supervisor: a hand-over message that does not decode; ignored");
      close(fd);
      return;
    }
    fuse_fd_ = fd;
    init_request_.assign(data + 5, n);
    mountpoint_.assign(data + 5 + n, len - 5 - n);
    LOG_INFO("supervisor: holding the mount's /dev/fuse; a crashed daemon will be restarted");
    return;
  }
  if (fd >= 0) close(fd);
  if (!saved_.Apply(std::string_view(data, len))) bad_records_++;
}

bool Supervisor::Drain(int channel, bool wait) {
  std::vector<char> buf(kMaxMessage);
  for (;;) {
    iovec iov{buf.data(), buf.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(channel, &msg, MSG_CMSG_CLOEXEC | (wait ? 0 : MSG_DONTWAIT));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;  // closed (0), or broken
    int fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      }
    }
    if ((msg.msg_flags & MSG_TRUNC) != 0) {
      bad_records_++;
      if (fd >= 0) close(fd);
      continue;
    }
    Handle(buf.data(), static_cast<size_t>(n), fd);
    wait = false;
  }
}

Status Supervisor::Run(const std::function<int(SupervisorLink&)>& daemon) {
  // Another thread would take the signals blocked here (and their default
  // action), and might hold a lock across the fork. A thread the caller has
  // just joined may still be listed for a while (see AwaitOneThread).
  if (std::vector<std::string> others = AwaitOneThread(options_.single_thread_wait);
      !others.empty()) {
    std::string names;
    for (const std::string& n : others) names += (names.empty() ? "" : ", ") + n;
    return Status::Error(
        EDEADLK, "the supervisor must run single-threaded, and " + std::to_string(others.size()) +
                     " other threads still ran after " +
                     std::to_string(options_.single_thread_wait.count()) + " ms: " + names);
  }
  STOKER_RETURN_IF_ERROR(WatchSignals());
  for (uint32_t generation = 1;; ++generation) {
    int channel = -1;
    STOKER_ASSIGN_OR_RETURN(const pid_t pid, StartDaemon(daemon, generation, &channel));
    if (generation == 1 && options_.after_first_fork) options_.after_first_fork();
    int wstatus = 0;
    if (!AwaitExit(pid, channel, &wstatus)) return Status::FromErrno("supervisor poll");
    if (std::optional<Status> end = Outcome(wstatus)) return *end;
    restarts_++;
    LOG_WARN(
        "supervisor: the daemon (pid {}) {}; starting a new one on the same mount ({} node "
        "ids kept, restart {})",
        pid, Describe(wstatus), saved_.size(), restarts_);
  }
}

Status Supervisor::WatchSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  if (sigprocmask(SIG_BLOCK, &set, &old_mask_) != 0) return Status::FromErrno("sigprocmask");
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC);
  if (signal_fd_ < 0) return Status::FromErrno("signalfd");
  return Status::OK();
}

Result<pid_t> Supervisor::StartDaemon(const std::function<int(SupervisorLink&)>& daemon,
                                      uint32_t generation, int* channel) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::FromErrno("socketpair");
  }
  DaemonRestart restart{fuse_fd_, init_request_, mountpoint_, &saved_};
  const pid_t pid = fork();
  if (pid < 0) return Status::FromErrno("fork");
  if (pid == 0) {
    close(sv[0]);
    close(signal_fd_);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    SupervisorLink link(sv[1], generation, restarts_, getppid(),
                        fuse_fd_ >= 0 ? &restart : nullptr);
    _exit(daemon(link));
  }
  close(sv[1]);
  *channel = sv[0];
  return pid;
}

bool Supervisor::AwaitExit(pid_t pid, int channel, int* wstatus) {
  bool exited = false;
  bool channel_open = true;
  while (!exited) {
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {channel, POLLIN, 0}};
    if (poll(fds, channel_open ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (channel_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      channel_open = Drain(channel, false);
    }
    if ((fds[0].revents & POLLIN) == 0) continue;
    signalfd_siginfo si;
    if (read(signal_fd_, &si, sizeof(si)) != static_cast<ssize_t>(sizeof(si))) continue;
    if (si.ssi_signo != SIGCHLD) {
      stopping_ = true;
      kill(pid, static_cast<int>(si.ssi_signo));
      continue;
    }
    pid_t r = waitpid(pid, wstatus, WNOHANG);
    exited = r == pid;
  }
  // What the dead daemon sent before it died is all in the socket.
  if (channel_open) Drain(channel, false);
  close(channel);
  return exited;
}

std::optional<Status> Supervisor::Outcome(int wstatus) {
  if (WIFEXITED(wstatus)) {
    if (bad_records_ > 0) LOG_WARN("supervisor: {} journal records did not decode", bad_records_);
    if (WEXITSTATUS(wstatus) == 0) return Status::OK();
    return Status::Error(EIO, "the daemon " + Describe(wstatus));
  }
  if (fuse_fd_ < 0 || stopping_) {
    return Status::Error(EIO, "the daemon " + Describe(wstatus) +
                                  (stopping_ ? " while stopping" : " before the mount was live"));
  }
  const auto now = std::chrono::steady_clock::now();
  while (!crashes_.empty() &&
         now - crashes_.front() > std::chrono::seconds(options_.restart_window_s)) {
    crashes_.pop_front();
  }
  if (crashes_.size() >= static_cast<size_t>(options_.max_restarts)) {
    LOG_ERROR(
        "supervisor: the daemon {}, its {}th crash within {} s; giving up (the mount is "
        "left dead; `stoker mount` clears it)",
        Describe(wstatus), crashes_.size() + 1, options_.restart_window_s);
    return Status::Error(EIO, "the daemon crashed " + std::to_string(crashes_.size() + 1) +
                                  " times within " + std::to_string(options_.restart_window_s) +
                                  " s");
  }
  crashes_.push_back(now);
  return std::nullopt;
}

}  // namespace

Status SupervisorLink::HandOver(int fuse_fd, std::string_view init_request,
                                std::string_view mountpoint) {
  std::string payload(1, kHandOver);
  const uint32_t n = static_cast<uint32_t>(init_request.size());
  payload.append(reinterpret_cast<const char*>(&n), 4);
  payload.append(init_request);
  payload.append(mountpoint);
  iovec iov{payload.data(), payload.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fuse_fd, sizeof(int));
  for (;;) {
    if (sendmsg(fd_, &msg, MSG_NOSIGNAL) >= 0) return Status::OK();
    if (errno != EINTR) return Status::FromErrno("hand-over to the supervisor");
  }
}

void SupervisorLink::Record(std::string_view record) {
  if (broken_.load(std::memory_order_relaxed)) return;
  for (;;) {
    if (send(fd_, record.data(), record.size(), MSG_NOSIGNAL) >= 0) return;
    if (errno == EINTR) continue;
    LOG_ERROR("the supervisor's channel broke ({}); a crash will not be survived",
              std::strerror(errno));
    broken_ = true;
    return;
  }
}

Status Supervise(const SupervisorOptions& options,
                 const std::function<int(SupervisorLink&)>& daemon) {
  Supervisor s(options);
  return s.Run(daemon);
}

std::vector<std::string> OtherThreads() {
  std::vector<std::string> names;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return names;
  // The caller's id as this /proc numbers it: under a PID namespace whose
  // /proc is the host's, gettid() is another number than its entry's name.
  std::string self = std::to_string(gettid());
  char link[64];
  if (const ssize_t n = readlink("/proc/thread-self", link, sizeof(link) - 1); n > 0) {
    const std::string_view l(link, static_cast<size_t>(n));
    self = std::string(l.substr(l.rfind('/') + 1));
  }
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.' || self == e->d_name) continue;
    std::string comm;
    if (FILE* f =
            std::fopen(("/proc/self/task/" + std::string(e->d_name) + "/comm").c_str(), "re")) {
      char buf[64] = {};
      if (std::fgets(buf, sizeof(buf), f) != nullptr) comm = buf;
      std::fclose(f);
    }
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    names.push_back((comm.empty() ? std::string("?") : comm) + " (" + e->d_name + ")");
  }
  closedir(d);
  return names;
}

std::vector<std::string> AwaitOneThread(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::microseconds(100);
  for (;;) {
    std::vector<std::string> others = OtherThreads();
    if (others.empty() || std::chrono::steady_clock::now() >= deadline) return others;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
}

bool RequestResend(int fuse_fd) {
  fuse_out_header h{};
  h.len = sizeof(h);
  h.error = kNotifyResend;
  h.unique = 0;
  for (;;) {
    if (write(fuse_fd, &h, sizeof(h)) == static_cast<ssize_t>(sizeof(h))) return true;
    if (errno != EINTR) return false;
  }
}

}  // namespace stoker
