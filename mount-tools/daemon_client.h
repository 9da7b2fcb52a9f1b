// DaemonClient: how a CLI command reaches the daemon of a mount: its root
// (mount_root.h) and its control socket (CACHE_DIR/control.sock, which the
// mount's stats.json names), and one request answered (fs/control_socket.h,
// fs/control_requests.h).
//
// Thread-safety: plain functions; nothing is kept.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "util/status.h"

namespace stoker {

// A mount's daemon: its root and control socket.
struct Daemon {
  std::string root;
  std::string socket;
};

// The daemon of the mount above path; the error names the path.
Result<Daemon> DaemonOf(const std::string& path);

// Sends request; the answer if it says {"ok":true}, else the daemon's error
// (or why it could not be reached, naming the mount).
Result<nlohmann::json> Ask(const Daemon& d, const nlohmann::json& request);

}  // namespace stoker
