#include "fs/kernel_mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string_view>

#include "fs/fuse_access.h"
#include "util/files.h"

namespace stoker {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string DecodeMountInfoField(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 2])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 3]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Runs argv with stderr captured; returns the exit status and what it said.
Result<std::pair<int, std::string>> RunCapturingStderr(const std::vector<std::string>& argv) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno("pipe");
  pid_t pid = fork();
  if (pid < 0) {
    Status st = Status::FromErrno("fork");
    close(pipefd[0]);
    close(pipefd[1]);
    return st;
  }
  if (pid == 0) {
    dup2(pipefd[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    dprintf(STDERR_FILENO, "%s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(pipefd[1]);
  std::string err;
  char buf[4096];
  for (;;) {
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    err.append(buf, static_cast<size_t>(n));
  }
  close(pipefd[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  while (!err.empty() && std::isspace(static_cast<unsigned char>(err.back()))) err.pop_back();
  size_t nl = err.rfind('\n');
  if (nl != std::string::npos) err = err.substr(nl + 1);
  return std::make_pair(code, err);
}

}  // namespace

std::vector<MountInfoEntry> ParseMountInfo(const std::string& text) {
  std::vector<MountInfoEntry> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    std::string w;
    while (fields >> w) f.push_back(w);
    // id parent major:minor root mount_point options [optional...] - fstype source super
    if (f.size() < 7) continue;
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 1 >= f.size()) continue;
    MountInfoEntry e;
    unsigned maj = 0, min = 0;
    if (std::sscanf(f[2].c_str(), "%u:%u", &maj, &min) == 2) e.dev = makedev(maj, min);
    e.root = DecodeMountInfoField(f[3]);
    e.mount_point = DecodeMountInfoField(f[4]);
    e.fstype = DecodeMountInfoField(f[dash + 1]);
    if (dash + 2 < f.size()) e.source = DecodeMountInfoField(f[dash + 2]);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<MountInfoEntry>> ReadMountInfo() {
  STOKER_ASSIGN_OR_RETURN(std::string text, ReadWholeFile("/proc/self/mountinfo"));
  return ParseMountInfo(text);
}

bool IsFuseFsType(const std::string& fstype) {
  return fstype == "fuse" || fstype == "fuseblk" || fstype.rfind("fuse.", 0) == 0;
}

std::optional<MountInfoEntry> FindMountAt(const std::vector<MountInfoEntry>& mounts,
                                          const std::string& abs_path) {
  std::optional<MountInfoEntry> found;
  for (const auto& m : mounts) {
    if (m.mount_point == abs_path) found = m;
  }
  return found;
}

std::optional<MountInfoEntry> MountContaining(const std::vector<MountInfoEntry>& mounts,
                                              const std::string& abs_path) {
  std::optional<MountInfoEntry> found;
  for (const auto& m : mounts) {
    const std::string& mp = m.mount_point;
    const bool above = mp == "/" || abs_path == mp ||
                       (abs_path.size() > mp.size() && abs_path.compare(0, mp.size(), mp) == 0 &&
                        abs_path[mp.size()] == '/');
    if (above && (!found || mp.size() >= found->mount_point.size())) found = m;
  }
  return found;
}

std::optional<std::string> StokerMountOrigin(const MountInfoEntry& mount) {
  constexpr std::string_view kPrefix = "stoker:";
  if (mount.fstype != "fuse.stoker" || mount.source.rfind(kPrefix, 0) != 0) return std::nullopt;
  return mount.source.substr(kPrefix.size());
}

bool IsDeadFuseMount(const std::string& abs_path) {
  struct statfs sfs;
  return statfs(abs_path.c_str(), &sfs) != 0 && (errno == ENOTCONN || errno == ECONNABORTED);
}

Status UnmountFuse(const std::string& abs_path, bool lazy) {
  if (geteuid() == 0) {
    if (umount2(abs_path.c_str(), lazy ? MNT_DETACH : 0) == 0) return Status::OK();
    int e = errno;
    if (e == EBUSY) {
      return Status::Busy("'" + abs_path +
                          "' is busy (a file or directory in it is still open); close it "
                          "or use --lazy");
    }
    // Without CAP_SYS_ADMIN (user namespaces), fusermount3 may still work.
    if (e != EPERM || !HaveFusermount3()) return Status::FromErrno(e, "unmount '" + abs_path + "'");
  }
  if (!HaveFusermount3()) {
    return Status::NotFound("fusermount3 not found on PATH (install the fuse3 package)");
  }
  std::vector<std::string> argv = {"fusermount3", "-u"};
  if (lazy) argv.push_back("-z");
  argv.push_back(abs_path);
  STOKER_ASSIGN_OR_RETURN(auto res, RunCapturingStderr(argv));
  if (res.first == 0) return Status::OK();
  if (res.second.find("busy") != std::string::npos) {
    return Status::Busy("'" + abs_path +
                        "' is busy (a file or directory in it is still open); close it or "
                        "use --lazy");
  }
  return Status::IOError("unmount '" + abs_path +
                         "': " + (res.second.empty() ? "fusermount3 failed" : res.second));
}

bool HaveFusermount3() { return !FindFusermount3().empty(); }

}  // namespace stoker
