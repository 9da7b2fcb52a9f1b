// `stoker warm PATH...`: asks the daemon of each path's mount, over
// CACHE_DIR/control.sock, to pull the path into the cache in the background.
// Returns once the daemon has queued it; progress shows in `stoker stat`.
#include <limits.h>
#include <stdlib.h>

#include <memory>

#include "fs/control_socket.h"
#include "mount-tools/commands.h"
#include "mount-tools/mountpoint.h"

namespace stoker {
namespace {

Status WarmOne(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string root, FindMountRoot(path));
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return Status::FromErrno("'" + path + "'");
  std::string rel = RelativeToRoot(root, resolved);
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
  // A later `--view decoded` adds a "view" member here.
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
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand(
      "warm", "Pull files or directories under a mount into the cache, in the background");
  app->add_option("PATH", args->paths, "Files or directories under a stoker mount")->required();
  return {app, [args] {
            int rc = kExitOk;
            for (const auto& path : args->paths) {
              if (Status st = WarmOne(path); !st.ok()) {
                PrintError(st.message());
                rc = kExitFailure;
              }
            }
            return rc;
          }};
}

}  // namespace stoker
