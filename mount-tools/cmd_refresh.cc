// `stoker refresh PATH...`: asks the daemon of each path's mount, over
// CACHE_DIR/control.sock, to ask the origin again about everything it holds
// at or below the path (fs/control_requests.h): the listings a mount keeps
// (--revalidate never keeps them across remounts), each file's attributes
// at its next open, and the kernel's entries. A PATH need not exist in the
// mount: a file the origin has and the mount's kept listing does not is
// named by the path it will have.
#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <memory>

#include "mount-tools/commands.h"
#include "mount-tools/daemon_client.h"
#include "mount-tools/mount_root.h"
#include "util/path.h"

namespace stoker {
namespace {

struct Target {
  Daemon daemon;
  std::string rel;  // origin path ("" is the whole mount)
};

// path's mount and origin path. The nearest part of path that exists is
// resolved (symlinks followed); what follows it is taken as written.
Result<Target> TargetOf(const std::string& path) {
  if (path.empty()) return Status::Invalid("refresh: an empty path");
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::current_path() / p;
  std::string existing = p.lexically_normal().string();
  while (existing.size() > 1 && existing.back() == '/') existing.pop_back();
  std::deque<std::string> rest;
  char resolved[PATH_MAX];
  while (realpath(existing.c_str(), resolved) == nullptr) {
    if ((errno != ENOENT && errno != ENOTDIR) || existing == "/") break;
    rest.push_front(BaseName(existing));
    existing = ParentOf(existing);
  }
  for (const std::string& part : rest) {
    if (part == "..") return Status::Invalid("refresh '" + path + "': '..' past what exists");
  }
  STOKER_ASSIGN_OR_RETURN(Daemon d, DaemonOf(existing));
  if (realpath(existing.c_str(), resolved) == nullptr) {
    return Status::FromErrno("refresh '" + path + "'");
  }
  std::string rel = RelativeToRoot(d.root, resolved);
  for (const std::string& part : rest) rel = JoinPath(rel, part);
  return Target{d, rel};
}

int RunRefresh(const std::vector<std::string>& paths) {
  int rc = kExitOk;
  for (const std::string& path : paths) {
    Result<Target> t = TargetOf(path);
    if (!t.ok()) {
      PrintError(t.status().message());
      rc = kExitFailure;
      continue;
    }
    auto reply = Ask(t->daemon, {{"op", "refresh"}, {"path", t->rel}});
    if (!reply.ok()) {
      PrintError("refresh '" + path + "': " + reply.status().message());
      rc = kExitFailure;
      continue;
    }
    std::printf("%s: %llu cached files and %llu kernel entries will be asked of the origin again\n",
                path.c_str(), static_cast<unsigned long long>(reply->value("files", uint64_t{0})),
                static_cast<unsigned long long>(reply->value("nodes", uint64_t{0})));
  }
  return rc;
}

}  // namespace

Subcommand AddRefreshCommand(CLI::App& root) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* app = root.add_subcommand(
      "refresh",
      "Ask the origin again about a mount's files and listings at or below PATH (with "
      "--revalidate never, the only way a change at the origin is seen)");
  app->add_option("PATH", *paths,
                  "A stoker mountpoint, or a file or directory under one (it need not exist "
                  "in the mount yet)")
      ->required();
  return {app, [paths] { return RunRefresh(*paths); }};
}

}  // namespace stoker
