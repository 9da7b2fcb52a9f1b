// PeerServer: serves this member's cache to the other members of its cache
// group (group/peer_protocol.h). A request is answered from the ObjectCache
// as a reader's would be: what the cache lacks is fetched from the origin
// once (a peer's request and local readers' collapse into one origin read),
// kept, verified and sent. It never asks a third member
// (ObjectCache::OpenForPeer), so members whose views of the group differ
// never send a request round in circles.
//
// Bounds, so that a token holder cannot make this member fetch or buffer
// without limit: at most max_connections connections at once and
// max_per_peer from one address (more are refused by libmicrohttpd), and at
// most max_requests reads in flight (more are answered 503 at once), each
// holding at most kMaxRequestBytes. A request without the group's token is
// answered 401 before anything is read; only GET of an extent is served,
// only files of this member's origin tree, nothing of the cache directory.
//
// Thread-safety: libmicrohttpd runs a thread per connection; the cache and
// the token are thread-safe. The destructor stops the server and waits for
// its threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "cache/object_cache.h"
#include "group/peer_token.h"
#include "group/peers.h"
#include "util/status.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace stoker {

class PeerServer {
 public:
  struct Options {
    HostPort listen;    // port 0: any free port (tests)
    std::string group;  // requests naming another group are 404
    // Default: 64 connections, 16 from one address, 8 reads in flight.
    unsigned max_connections = 64;
    unsigned max_per_peer = 16;
    unsigned max_requests = 8;
    // A connection that sends nothing this long is closed. Default: 30 s.
    unsigned idle_timeout_s = 30;
    // Tests: flips a byte of every body after its checksums are made, as a
    // bad disk or wire would. Default: off.
    bool flip_a_byte_for_tests = false;
  };
  struct Counters {
    std::atomic<uint64_t> requests{0};       // extents served
    std::atomic<uint64_t> bytes{0};          // their bytes
    std::atomic<uint64_t> unauthorized{0};   // 401
    std::atomic<uint64_t> other_version{0};  // 409
    std::atomic<uint64_t> busy{0};           // 503: past max_requests
    std::atomic<uint64_t> failed{0};         // 404, 416, 400, 503 for an unreadable extent
  };

  // Listens and serves. EADDRINUSE naming the address if it cannot listen.
  // cache and token outlive the server.
  static Result<std::unique_ptr<PeerServer>> Start(Options options, ObjectCache* cache,
                                                   PeerToken* token);
  ~PeerServer();
  PeerServer(const PeerServer&) = delete;
  PeerServer& operator=(const PeerServer&) = delete;

  // The port it listens on.
  uint16_t port() const { return port_; }
  const Counters& counters() const { return counters_; }

 private:
  PeerServer(Options options, ObjectCache* cache, PeerToken* token)
      : options_(std::move(options)), cache_(cache), token_(token) {}
  friend struct PeerServerAccess;  // libmicrohttpd's callbacks (peer_server.cc)
  struct Answer;
  // The answer to one GET of url.
  Answer Serve(MHD_Connection* connection, const char* url);

  const Options options_;
  ObjectCache* const cache_;
  PeerToken* const token_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
  std::atomic<unsigned> in_flight_{0};
  Counters counters_;
};

}  // namespace stoker
