// `stoker warm PATH...`: asks the daemon of each path's mount, over
// CACHE_DIR/control.sock, to pull the path into the cache in the background.
// Returns once the daemon has queued it; progress shows in `stoker stat`.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <memory>

#include "fs/control_socket.h"
#include "mount-tools/commands.h"
#include "mount-tools/mountpoint.h"

namespace stoker {
namespace {

// The view's counterpart of rel (a path of the raw tree): ".NAME/rel", or
// ".NAME/rel.npy" where the view shows a JPEG under that name.
Result<std::string> ViewPath(const std::string& root, const std::string& rel,
                             const std::string& view) {
  const std::string dir = "." + view;
  struct stat st;
  if (::stat((root + "/" + dir).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::NotFound("the mount at '" + root + "' has no view '" + view + "'");
  }
  if (rel.empty()) return dir;
  const std::string in_view = dir + "/" + rel;
  if (::stat((root + "/" + in_view).c_str(), &st) == 0) return in_view;
  if (::stat((root + "/" + in_view + ".npy").c_str(), &st) == 0) return in_view + ".npy";
  return Status::NotFound("'" + rel + "' is not in view '" + view + "'");
}

Status WarmOne(const std::string& path, const std::string& view) {
  STOKER_ASSIGN_OR_RETURN(std::string root, FindMountRoot(path));
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return Status::FromErrno("'" + path + "'");
  std::string rel = RelativeToRoot(root, resolved);
  if (!view.empty()) {
    auto in_view = ViewPath(root, rel, view);
    if (!in_view.ok())
      return Status::Error(in_view.status().code(),
                           "warm '" + path + "': " + in_view.status().message());
    rel = *in_view;
  }
  STOKER_ASSIGN_OR_RETURN(StatsFile stats, ReadStatsFile(root));
  auto it = stats.json.find("cache_dir");
  if (it == stats.json.end() || !it->is_string()) {
    return Status::Corruption("stats.json of '" + root + "' names no cache_dir");
  }
  auto reply = ControlRequest(it->get<std::string>() + "/control.sock", WarmRequest(rel));
  if (!reply.ok()) {
    return Status::Error(reply.status().code(), "warm '" + path +
                                                    "': cannot reach the daemon of '" + root +
                                                    "': " + reply.status().message());
  }
  Status st = ParseControlReply(*reply);
  if (!st.ok()) return Status::Error(st.code(), "warm '" + path + "': " + st.message());
  return Status::OK();
}

}  // namespace

nlohmann::json WarmRequest(const std::string& rel_path) {
  return {{"op", "warm"}, {"path", rel_path}};
}

Status ParseControlReply(const nlohmann::json& j) {
  auto ok = j.is_object() ? j.find("ok") : j.end();
  if (!j.is_object() || ok == j.end() || !ok->is_boolean()) {
    return Status::Error(EPROTO, "unexpected answer from the daemon: " + j.dump());
  }
  if (ok->get<bool>()) return Status::OK();
  auto err = j.find("error");
  return Status::IOError(err != j.end() && err->is_string() ? err->get<std::string>()
                                                            : "the daemon refused");
}

Subcommand AddWarmCommand(CLI::App& root) {
  struct Args {
    std::vector<std::string> paths;
    std::string view;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand(
      "warm", "Pull files or directories under a mount into the cache, in the background");
  app->add_option("PATH", args->paths, "Files or directories under a stoker mount")->required();
  app->add_option("--view", args->view,
                  "Warm the decoded view NAME of the PATHs (decode them in the background)");
  return {app, [args] {
            int rc = kExitOk;
            for (const auto& path : args->paths) {
              if (Status st = WarmOne(path, args->view); !st.ok()) {
                PrintError(st.message());
                rc = kExitFailure;
              }
            }
            return rc;
          }};
}

}  // namespace stoker
