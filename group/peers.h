// The members of a cache group (--peers) and which of them are answering.
//
// --peers takes HOST:PORT,... (a fixed list) or dns:NAME:PORT (every A and
// AAAA record of NAME, a Kubernetes headless Service, resolved again every
// few seconds so that members come and go with the Service's pods). A member
// is named by HOST:PORT as the others reach it ("[v6]:PORT" for IPv6); this
// member is among them under its advertised name whether or not the list
// names it.
//
// A member that failed a request (down, slow, refusing, a wrong checksum) is
// skipped for a back-off period: it is left out of Live(), so its extents
// have another owner meanwhile (every member skipping it alike, or each
// reading the origin), and it comes back by itself.
//
// Thread-safety: Membership's methods are thread-safe; ParsePeers and
// ParseHostPort are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

struct HostPort {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 0;
  // "host:port", "[v6]:port".
  std::string Name() const;
};

// "host:port" or "[v6]:port", port 1-65535. EINVAL naming what is wrong.
Result<HostPort> ParseHostPort(std::string_view text);

struct PeerSpec {
  std::vector<std::string> members;  // a fixed list, as Name()s
  HostPort dns;                      // dns:NAME:PORT (host empty: none)
};

// EINVAL with one line naming the bad item.
Result<PeerSpec> ParsePeers(std::string_view text);

class Membership {
 public:
  // The members a name stands for, as Name()s at port. Default: getaddrinfo.
  using Resolver =
      std::function<Result<std::vector<std::string>>(const std::string& name, uint16_t port)>;
  static Result<std::vector<std::string>> ResolveDns(const std::string& name, uint16_t port);

  // self: this member's advertised name.
  Membership(PeerSpec spec, std::string self, Resolver resolve = ResolveDns);

  // Resolves the dns: name again (nothing for a fixed list). A failure keeps
  // the members known before, and is returned.
  Status Refresh();

  // Every member known, this one included, sorted.
  std::vector<std::string> All() const;
  // All() less the members being skipped now.
  std::vector<std::string> Live(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const;
  // Leaves member out of Live() until now + for_how_long.
  void Skip(const std::string& member, std::chrono::steady_clock::duration for_how_long,
            std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // How many members are skipped now.
  size_t skipped(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const;

  const std::string& self() const { return self_; }

 private:
  const PeerSpec spec_;
  const std::string self_;
  const Resolver resolve_;
  mutable Mutex mu_;
  std::vector<std::string> members_ GUARDED_BY(mu_);  // sorted, self included
  std::map<std::string, std::chrono::steady_clock::time_point> skipped_until_ GUARDED_BY(mu_);
};

}  // namespace stoker
