// CacheGroup: a mount's part in a cache group (--peers; group/peer_origin.h
// and peer_server.h say how members share what they fetch). It holds the
// members (a dns: name resolved again every kResolveEvery on a thread of its
// own), the token, the origin wrapper the cache reads through and, once the
// cache is open, the server that gives this member's extents to the others.
//
// Options are checked before anything starts: a bad one fails the mount with
// one line (EINVAL), as a token file that cannot be read does.
//
// Thread-safety: Stats() from any thread; the rest from the mount's thread.
// Stop() (or the destructor) before the cache is closed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cache/object_cache.h"
#include "cache/origin/origin.h"
#include "group/peer_origin.h"
#include "group/peer_server.h"
#include "group/peer_token.h"
#include "group/peers.h"

namespace stoker {

struct GroupOptions {
  // --peers: HOST:PORT,... or dns:NAME:PORT. Default: "" (no group).
  std::string peers;
  // --peer-listen: where this member serves the others. Default: 0.0.0.0:7070.
  std::string listen = "0.0.0.0:7070";
  // --peer-advertise: how the others reach this member (as --peers names
  // it). Default: --peer-listen, which then must not be a wildcard address.
  std::string advertise;
  // --peer-token-file: the group's shared token (group/peer_token.h).
  // Required with --peers.
  std::string token_file;
  // --peer-group: members serve only requests naming their group. Default:
  // "" = derived from the origin's location and the chunk size (set it where
  // nodes mount one NFS export at different paths).
  std::string name;
  // How long a failing member is left out. Default: 30 s.
  std::chrono::seconds backoff{30};
};

class CacheGroup {
 public:
  static constexpr std::chrono::seconds kResolveEvery{5};

  // Checks options, reads the token, resolves the members once, and wraps
  // origin (reads of its versions go to the extents' owners). location:
  // what names the origin (Origin::Location), for the default group name.
  static Result<std::unique_ptr<CacheGroup>> Make(const GroupOptions& options,
                                                  std::shared_ptr<Origin> origin,
                                                  const std::string& location, uint64_t chunk_size,
                                                  long stall_timeout_s);
  ~CacheGroup();

  // The origin the cache reads through.
  std::shared_ptr<Origin> origin() const { return origin_; }
  // Starts serving cache to the other members. EADDRINUSE, one line.
  Status Serve(ObjectCache* cache);
  // Stops serving and resolving; the origin wrapper keeps working (reads
  // then go to members or the origin as before).
  void Stop();

  // The group_* fields of stats.json.
  nlohmann::json Stats() const;

  const std::string& name() const { return name_; }

 private:
  CacheGroup() = default;
  void ResolveLoop();

  GroupOptions options_;
  std::string name_;
  HostPort listen_;
  std::unique_ptr<Membership> members_;
  std::unique_ptr<PeerToken> token_;
  std::shared_ptr<PeerOrigin> origin_;
  mutable std::mutex server_mu_;
  std::unique_ptr<PeerServer> server_;  // under server_mu_
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // under stop_mu_
  std::thread resolver_;
};

// The default --peer-group: a digest of the origin's location and the chunk
// size, so that members over another origin, or caching it in other chunks,
// never share.
std::string DefaultGroupName(const std::string& location, uint64_t chunk_size);

}  // namespace stoker
