#include "group/cache_group.h"

#include <cstdio>

#include "util/checksum.h"
#include "util/log.h"

namespace stoker {
namespace {

bool IsWildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }

}  // namespace

std::string DefaultGroupName(const std::string& location, uint64_t chunk_size) {
  const std::string key = location + "\n" + std::to_string(chunk_size);
  char buf[24];
  std::snprintf(buf, sizeof buf, "g%016llx",
                static_cast<unsigned long long>(ChunkChecksum(key.data(), key.size())));
  return buf;
}

Result<std::unique_ptr<CacheGroup>> CacheGroup::Make(const GroupOptions& options,
                                                     std::shared_ptr<Origin> origin,
                                                     const std::string& location,
                                                     uint64_t chunk_size, long stall_timeout_s) {
  std::unique_ptr<CacheGroup> g(new CacheGroup());
  g->options_ = options;
  STOKER_ASSIGN_OR_RETURN(PeerSpec spec, ParsePeers(options.peers));
  Result<HostPort> listen = ParseHostPort(options.listen);
  if (!listen.ok()) return Status::Invalid("--peer-listen: " + listen.status().message());
  g->listen_ = *listen;
  std::string self;
  if (!options.advertise.empty()) {
    Result<HostPort> adv = ParseHostPort(options.advertise);
    if (!adv.ok()) return Status::Invalid("--peer-advertise: " + adv.status().message());
    self = adv->Name();
  } else if (IsWildcard(listen->host)) {
    return Status::Invalid("--peer-listen " + options.listen +
                           " listens on every address: say with --peer-advertise HOST:PORT how "
                           "the other members reach this one");
  } else {
    self = listen->Name();
  }
  if (options.token_file.empty()) {
    return Status::Invalid("--peers needs --peer-token-file FILE (the group's shared token)");
  }
  Result<std::unique_ptr<PeerToken>> token = PeerToken::Open(options.token_file);
  if (!token.ok()) return Status::Invalid(token.status().message());
  g->token_ = std::move(token).value();
  g->name_ = options.name.empty() ? DefaultGroupName(location, chunk_size) : options.name;
  g->members_ = std::make_unique<Membership>(spec, self);
  if (Status st = g->members_->Refresh(); !st.ok()) {
    LOG_WARN("--peers {}: {}; trying again every {} s", options.peers, st.message(),
             kResolveEvery.count());
  }
  PeerOrigin::Options po;
  po.group = g->name_;
  po.backoff = options.backoff;
  po.stall_timeout_s = stall_timeout_s;
  g->origin_ =
      std::make_shared<PeerOrigin>(std::move(origin), g->members_.get(), g->token_.get(), po);
  if (!spec.dns.host.empty()) g->resolver_ = std::thread([p = g.get()] { p->ResolveLoop(); });
  LOG_INFO("cache group '{}': this member is {}, {} members known", g->name_, self,
           g->members_->All().size());
  return g;
}

void CacheGroup::ResolveLoop() {
  std::unique_lock<std::mutex> l(stop_mu_);
  while (!stop_cv_.wait_for(l, kResolveEvery, [this] { return stopping_; })) {
    l.unlock();
    const size_t before = members_->All().size();
    Status st = members_->Refresh();
    const size_t after = members_->All().size();
    if (!st.ok()) LOG_DEBUG("--peers {}: {}", options_.peers, st.message());
    if (after != before) LOG_INFO("cache group '{}': {} members (were {})", name_, after, before);
    l.lock();
  }
}

Status CacheGroup::Serve(ObjectCache* cache) {
  PeerServer::Options so;
  so.listen = listen_;
  so.group = name_;
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<PeerServer> server,
                          PeerServer::Start(so, cache, token_.get()));
  std::lock_guard<std::mutex> l(server_mu_);
  server_ = std::move(server);
  return Status::OK();
}

void CacheGroup::Stop() {
  std::unique_ptr<PeerServer> server;
  {
    std::lock_guard<std::mutex> l(server_mu_);
    server = std::move(server_);
  }
  server.reset();  // waits for its connections, which read the cache
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (resolver_.joinable()) resolver_.join();
}

CacheGroup::~CacheGroup() { Stop(); }

nlohmann::json CacheGroup::Stats() const {
  const PeerOrigin::Counters& c = origin_->counters();
  nlohmann::json j = {
      {"group", name_},
      {"group_self", members_->self()},
      {"group_members", members_->All().size()},
      {"group_members_skipped", members_->skipped()},
      {"group_peer_reads", c.reads.load()},
      {"group_peer_bytes", c.bytes.load()},
      {"group_fallback_unreachable", c.fallback_unreachable.load()},
      {"group_fallback_refused", c.fallback_refused.load()},
      {"group_fallback_busy", c.fallback_busy.load()},
      {"group_fallback_version", c.fallback_version.load()},
      {"group_fallback_checksum", c.fallback_checksum.load()},
  };
  std::lock_guard<std::mutex> l(server_mu_);
  if (server_) {
    const PeerServer::Counters& s = server_->counters();
    j["group_served_requests"] = s.requests.load();
    j["group_served_bytes"] = s.bytes.load();
    j["group_served_unauthorized"] = s.unauthorized.load();
    j["group_served_other_version"] = s.other_version.load();
    j["group_served_busy"] = s.busy.load();
    j["group_served_failed"] = s.failed.load();
  }
  return j;
}

}  // namespace stoker
