#include "mount-tools/mount_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "util/files.h"
#include "util/path.h"

namespace stoker {

Result<std::string> AbsolutePathNoFollow(const std::string& path) {
  if (path.empty()) return Status::Invalid("empty path");
  std::filesystem::path p(path);
  if (p.is_relative()) {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == nullptr) return Status::FromErrno("getcwd");
    p = std::filesystem::path(cwd) / p;
  }
  std::string norm = p.lexically_normal().string();
  while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
  if (norm == "/") return norm;
  std::string parent = ParentOf(norm);
  std::string base = norm.substr(norm.rfind('/') + 1);
  char resolved[PATH_MAX];
  if (realpath(parent.c_str(), resolved) == nullptr) return Status::FromErrno("'" + parent + "'");
  return JoinPath(resolved, base);
}

std::string RelativeToRoot(const std::string& root, const std::string& path) {
  if (path == root) return "";
  if (root == "/") return path.substr(1);
  return path.substr(root.size() + 1);
}

Result<std::string> FindMountRoot(const std::string& path, bool require_fuse) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    if (errno == ENOTCONN) {
      return Status::Error(ENOTCONN, "'" + path +
                                         "': Transport endpoint is not connected (its stoker "
                                         "daemon is gone; 'stoker unmount' the mountpoint)");
    }
    return Status::FromErrno("'" + path + "'");
  }
  std::vector<MountInfoEntry> mounts;
  if (require_fuse) {
    STOKER_ASSIGN_OR_RETURN(mounts, ReadMountInfo());
  }
  std::string dir = resolved;
  for (;;) {
    struct stat st;
    if (stat(JoinPath(dir, kStatsFile).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (!require_fuse) return dir;
      auto m = FindMountAt(mounts, dir);
      if (m && IsFuseFsType(m->fstype)) return dir;
    }
    if (dir == "/") break;
    dir = ParentOf(dir);
  }
  return Status::NotFound("'" + path + "' is not under a stoker mount (no " +
                          std::string(kStatsFile) + " above it)");
}

Result<StatsFile> ReadStatsFile(const std::string& root) {
  std::string path = JoinPath(root, kStatsFile);
  StatsFile out;
  auto text = ReadWholeFile(path);
  if (!text.ok() && text.status().code() == ENOTCONN) {
    return Status::Error(ENOTCONN, text.status().message() +
                                       " (its stoker daemon is gone; 'stoker unmount' the "
                                       "mountpoint)");
  }
  STOKER_ASSIGN_OR_RETURN(out.text, std::move(text));
  out.json = nlohmann::json::parse(out.text, nullptr, /*allow_exceptions=*/false);
  if (out.json.is_discarded() || !out.json.is_object()) {
    return Status::Corruption("'" + path + "' is not a JSON object");
  }
  return out;
}

namespace {

// Whether the thread (or process) whose stat file is path has not exited;
// true where it cannot be told.
bool StatSaysAlive(const std::string& path) {
  auto stat_text = ReadWholeFile(path);
  if (!stat_text.ok()) return stat_text.status().code() != ENOENT;
  size_t paren = stat_text->rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat_text->size()) return true;
  char state = (*stat_text)[paren + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace

bool ProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  // Alive while any of its threads is: a killed daemon's main thread may be
  // a zombie while its other threads still exit, and they hold the
  // process's files (the cache directory's lock) until the last one has.
  const std::string proc = "/proc/" + std::to_string(pid);
  DIR* tasks = opendir((proc + "/task").c_str());
  if (tasks == nullptr) return errno == ENOENT ? false : StatSaysAlive(proc + "/stat");
  bool alive = false;
  while (dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    if (StatSaysAlive(proc + "/task/" + e->d_name + "/stat")) {
      alive = true;
      break;
    }
  }
  closedir(tasks);
  return alive;
}

bool WaitForProcessExit(pid_t pid, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (ProcessAlive(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace stoker
