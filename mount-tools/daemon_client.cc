#include "mount-tools/daemon_client.h"

#include "fs/control_socket.h"
#include "mount-tools/commands.h"
#include "mount-tools/mount_root.h"

namespace stoker {

Result<Daemon> DaemonOf(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(std::string root, FindMountRoot(path));
  STOKER_ASSIGN_OR_RETURN(StatsFile stats, ReadStatsFile(root));
  auto it = stats.json.find("cache_dir");
  if (it == stats.json.end() || !it->is_string()) {
    return Status::Corruption("stats.json of '" + root + "' names no cache_dir");
  }
  return Daemon{root, it->get<std::string>() + "/control.sock"};
}

Result<nlohmann::json> Ask(const Daemon& d, const nlohmann::json& request) {
  auto reply = ControlRequest(d.socket, request);
  if (!reply.ok()) {
    return Status::Error(reply.status().code(), "cannot reach the daemon of '" + d.root +
                                                    "': " + reply.status().message());
  }
  STOKER_RETURN_IF_ERROR(ParseControlReply(*reply));
  return reply;
}

}  // namespace stoker
