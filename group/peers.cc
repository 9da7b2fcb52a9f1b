#include "group/peers.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>

namespace stoker {
namespace {

std::vector<std::string> SortedWith(std::vector<std::string> members, const std::string& self) {
  members.push_back(self);
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  return members;
}

}  // namespace

std::string HostPort::Name() const {
  const std::string p = std::to_string(port);
  return host.find(':') != std::string::npos ? "[" + host + "]:" + p : host + ":" + p;
}

Result<HostPort> ParseHostPort(std::string_view text) {
  const std::string shown(text);
  HostPort hp;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Status::Invalid("'" + shown + "' is not [IPV6]:PORT");
    }
    hp.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) {
      return Status::Invalid("'" + shown + "' is not HOST:PORT");
    }
    hp.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  if (hp.host.empty()) return Status::Invalid("'" + shown + "' names no host");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
      value > 65535) {
    return Status::Invalid("'" + shown + "': the port must be 1 to 65535");
  }
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

Result<PeerSpec> ParsePeers(std::string_view text) {
  PeerSpec spec;
  if (text.substr(0, 4) == "dns:") {
    Result<HostPort> hp = ParseHostPort(text.substr(4));
    if (!hp.ok()) return Status::Invalid("--peers dns:NAME:PORT: " + hp.status().message());
    spec.dns = *hp;
    return spec;
  }
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    if (!item.empty()) {
      Result<HostPort> hp = ParseHostPort(item);
      if (!hp.ok()) return Status::Invalid("--peers: " + hp.status().message());
      spec.members.push_back(hp->Name());
    }
    start = comma + 1;
  }
  if (spec.members.empty()) return Status::Invalid("--peers names no member");
  return spec;
}

Result<std::vector<std::string>> Membership::ResolveDns(const std::string& name, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    return Status::Error(EHOSTUNREACH, "resolving '" + name + "': " + gai_strerror(rc));
  }
  std::vector<std::string> out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* addr =
        a->ai_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    if (inet_ntop(a->ai_family, addr, buf, sizeof buf) != nullptr) {
      out.push_back(HostPort{buf, port}.Name());
    }
  }
  freeaddrinfo(res);
  return out;
}

Membership::Membership(PeerSpec spec, std::string self, Resolver resolve)
    : spec_(std::move(spec)), self_(std::move(self)), resolve_(std::move(resolve)) {
  members_ = SortedWith(spec_.members, self_);
}

Status Membership::Refresh() {
  if (spec_.dns.host.empty()) return Status::OK();
  Result<std::vector<std::string>> found = resolve_(spec_.dns.host, spec_.dns.port);
  if (!found.ok()) return found.status();
  std::vector<std::string> members = SortedWith(std::move(found).value(), self_);
  MutexLock l(mu_);
  members_ = std::move(members);
  return Status::OK();
}

std::vector<std::string> Membership::All() const {
  MutexLock l(mu_);
  return members_;
}

std::vector<std::string> Membership::Live(std::chrono::steady_clock::time_point now) const {
  MutexLock l(mu_);
  std::vector<std::string> live;
  live.reserve(members_.size());
  for (const std::string& m : members_) {
    auto it = skipped_until_.find(m);
    if (it == skipped_until_.end() || it->second <= now) live.push_back(m);
  }
  return live;
}

void Membership::Skip(const std::string& member, std::chrono::steady_clock::duration for_how_long,
                      std::chrono::steady_clock::time_point now) {
  if (member == self_) return;  // this member always serves itself
  MutexLock l(mu_);
  // Past entries go as new ones come, so the map stays as small as the group.
  std::erase_if(skipped_until_, [&](const auto& kv) { return kv.second <= now; });
  skipped_until_[member] = now + for_how_long;
}

size_t Membership::skipped(std::chrono::steady_clock::time_point now) const {
  MutexLock l(mu_);
  return static_cast<size_t>(std::count_if(skipped_until_.begin(), skipped_until_.end(),
                                           [&](const auto& kv) { return kv.second > now; }));
}

}  // namespace stoker
