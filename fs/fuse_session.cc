#include "fs/fuse_session.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/log.h"

namespace stoker {

// libfuse logs some messages in fragments ("unknown option(s): `", "-o ",
// "x'\n"): join them into lines, and keep the last error line for the
// one-line failure message.
namespace {
Mutex fuse_log_mu;
std::string fuse_log_pending GUARDED_BY(fuse_log_mu);
std::string fuse_last_error GUARDED_BY(fuse_log_mu);
}  // namespace

void LogFromFuse(enum fuse_log_level level, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  MutexLock lock(fuse_log_mu);
  fuse_log_pending += buf;
  if (fuse_log_pending.empty() || fuse_log_pending.back() != '\n') return;
  fuse_log_pending.pop_back();
  const std::string line = std::move(fuse_log_pending);
  fuse_log_pending.clear();
  if (level <= FUSE_LOG_ERR) {
    fuse_last_error = line;
    LOG_ERROR("libfuse: {}", line);
  } else if (level <= FUSE_LOG_NOTICE) {
    LOG_INFO("libfuse: {}", line);
  } else {
    LOG_DEBUG("libfuse: {}", line);
  }
}

// What libfuse last said went wrong, for an error message: ": <line>" or "".
std::string LastFuseError() {
  MutexLock lock(fuse_log_mu);
  std::string e = fuse_last_error.empty() ? fuse_log_pending : fuse_last_error;
  fuse_last_error.clear();
  fuse_log_pending.clear();
  return e.empty() ? "" : ": " + e;
}

namespace {

// A value inside a -o list: ',' and '\' are libfuse's separators and escape.
std::string EscapeOption(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == ',' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

unsigned MaxReadFrom(const std::vector<std::string>& fuse_options) {
  unsigned value = kMaxRead;
  for (const std::string& group : fuse_options) {
    size_t start = 0;
    while (start <= group.size()) {
      size_t comma = group.find(',', start);
      if (comma == std::string::npos) comma = group.size();
      const std::string opt = group.substr(start, comma - start);
      if (opt.rfind("max_read=", 0) == 0) value = std::strtoul(opt.c_str() + 9, nullptr, 10);
      start = comma + 1;
    }
  }
  return value;
}

Args FuseArgs(const MountOptions& options, const std::string& fsname) {
  Args a;
  a.strings = {"stoker", "-o",
               "fsname=stoker:" + EscapeOption(fsname) +
                   ",subtype=stoker,max_read=" + std::to_string(kMaxRead)};
  for (const std::string& o : options.fuse_options) {
    a.strings.push_back("-o");
    a.strings.push_back(o);
  }
  if (options.check_permissions) {
    a.strings.push_back("-o");
    a.strings.push_back("default_permissions");
  }
  a.strings.push_back("-o");
  a.strings.push_back("ro");  // last, so that no user option makes it writable
  return a;
}

std::string FsName(const std::string& origin) {
  char resolved[PATH_MAX];
  return realpath(origin.c_str(), resolved) ? std::string(resolved) : origin;
}

// The first daemon under a supervisor: reads the kernel's INIT request
// itself, hands it to the supervisor with the descriptor, then lets libfuse
// process it. Without a supervisor to take it, the mount just goes on.
void StartSupervised(fuse_session* se, SupervisorLink& link, const std::string& mountpoint) {
  const int fd = fuse_session_fd(se);
  std::vector<char> buf(kRequestBuffer);
  ssize_t n;
  do {
    n = read(fd, buf.data(), buf.size());
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    LOG_ERROR("could not read the kernel's INIT request: {}",
              n < 0 ? std::strerror(errno) : "end of file");
    return;  // the loop will find the same
  }
  if (Status st =
          link.HandOver(fd, std::string_view(buf.data(), static_cast<size_t>(n)), mountpoint);
      !st.ok()) {
    LOG_ERROR("{}; a crash will not be survived", st.message());
  }
  fuse_buf fb{};
  fb.mem = buf.data();
  fb.size = static_cast<size_t>(n);
  fuse_session_process_buf(se, &fb);
}

// Makes fd the session's descriptor; with passthrough wanted, through the
// I/O hooks that ask the kernel for it in the INIT reply (fs/fuse_io.h).
Status ServeDevice(fuse_session* se, int fd, PassthroughMode passthrough) {
  if (passthrough != PassthroughMode::kOff) return UseFuseIoWithPassthrough(se, fd);
  const std::string dev = "/dev/fd/" + std::to_string(fd);
  if (fuse_session_mount(se, dev.c_str()) != 0) {
    return Status::Error(EIO, "could not serve /dev/fuse" + LastFuseError());
  }
  return Status::OK();
}

// A restarted daemon: serves the supervisor's descriptor, replays INIT into
// the new session (the kernel refuses the reply: that is expected) and asks
// for the requests its predecessor left unanswered.
Status TakeOverSession(fuse_session* se, const DaemonRestart& restart,
                       PassthroughMode passthrough) {
  if (Status st = ServeDevice(se, restart.fuse_fd, passthrough); !st.ok()) {
    return Status::Error(EIO, "could not take over the supervisor's /dev/fuse: " + st.message());
  }
  std::vector<char> buf(restart.init_request.begin(), restart.init_request.end());
  fuse_buf fb{};
  fb.mem = buf.data();
  fb.size = buf.size();
  fuse_session_process_buf(se, &fb);
  if (!RequestResend(restart.fuse_fd)) {
    LOG_WARN(
        "the kernel refused FUSE_NOTIFY_RESEND ({}): requests the crashed daemon had "
        "read stay unanswered",
        std::strerror(errno));
  }
  LOG_INFO("took over the mount at {} after a crash", restart.mountpoint);
  return Status::OK();
}

// Why the kernel will not take backing files on fuse_fd ("" if it will).
std::string PassthroughRefusal(const MountOptions& options, int fuse_fd) {
  if (!InitAskedForPassthrough()) return "not_negotiated";
  // Any regular file of the cache's filesystem will do for the probe.
  const std::string probe = options.cache.dir + "/lock";
  const int fd = open(probe.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string("probe_failed: ") + std::strerror(errno);
  std::string why = ProbePassthrough(fuse_fd, fd);
  close(fd);
  return why;
}

// The passthrough asked for, as far as the open mode allows it: a kernel
// that opens files by itself sends no OPEN to answer with a backing file.
PassthroughMode PassthroughOf(const MountOptions& options) {
  return options.kernel_opens ? PassthroughMode::kOff : options.passthrough;
}

Result<std::unique_ptr<EarlyMount>> EarlyMount::Make(const MountOptions& options,
                                                     const std::string& mountpoint) {
  Args args = FuseArgs(options, FsName(options.origin));
  fuse_args fargs = args.Get();
  static const fuse_lowlevel_ops kNoOps{};  // it never serves a request
  fuse_session* se = fuse_session_new(&fargs, &kNoOps, sizeof(kNoOps), nullptr);
  fuse_opt_free_args(&fargs);
  if (se == nullptr) return Status::Invalid("invalid FUSE options" + LastFuseError());
  std::unique_ptr<EarlyMount> m(new EarlyMount(se));
  if (fuse_session_mount(se, mountpoint.c_str()) != 0) {
    return Status::Error(EIO, "could not mount at '" + mountpoint + "'" + LastFuseError());
  }
  {
    MutexLock lock(m->mu_);  // not shared yet: for the analysis
    m->mounted_ = true;
  }
  return m;
}

}  // namespace stoker
