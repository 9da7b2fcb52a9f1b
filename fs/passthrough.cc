#include "fs/passthrough.h"

#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fs/fuse_kernel_ext.h"
#include "util/log.h"

namespace stoker {

void PassthroughNodes::Disable(const std::string& reason) {
  MutexLock lock(stats_mu_);
  if (!enabled_) return;
  disabled_ = reason;
  enabled_ = false;
}

std::string PassthroughNodes::disabled_reason() const {
  MutexLock lock(stats_mu_);
  return disabled_;
}

void PassthroughNodes::CountFallback(const std::string& reason) {
  MutexLock lock(stats_mu_);
  fallbacks_[reason.empty() ? disabled_ : reason]++;
}

PassthroughNodes::Grant PassthroughNodes::Open(uint64_t node, const LeaseMaker& make) {
  Shard& s = ShardOf(node);
  std::string why;
  Result<std::unique_ptr<WholeFileLease>> lease = Status::Error(EAGAIN, "not asked");
  {
    MutexLock lock(s.mu);
    NodeState& n = s.nodes[node];
    if (n.passthrough > 0 || n.inherited || n.lease) return ShareLocked(node, n);
    bool attempt = false;
    if (n.normal > 0) {
      why = "node_open_normally";
    } else if (s.restored.count(node) != 0) {
      why = "opened_before_restart";
    } else {
      attempt = enabled_;  // if not: counted under the reason it was disabled for
    }
    if (!attempt) {
      n.normal++;
      CountFallback(why);
      return Grant{};
    }
    n.opening++;  // the lease may take a while (it may verify the file)
  }
  lease = make(&why);
  std::unique_ptr<WholeFileLease> unused;  // dropped outside the lock
  MutexLock lock(s.mu);
  NodeState& n = s.nodes[node];
  n.opening--;
  // Another open decided the node's mode meanwhile: that mode it is.
  if (n.passthrough > 0 || n.lease) {
    if (lease.ok()) unused = std::move(lease).value();
    return ShareLocked(node, n);
  }
  if (n.normal > 0 || !lease.ok()) {
    if (lease.ok()) unused = std::move(lease).value();
    n.normal++;
    CountFallback(n.normal > 1 || why.empty() ? "node_open_normally" : why);
    return Grant{};
  }
  Result<int32_t> id = hooks_.open_backing((*lease)->fd());
  if (!id.ok()) {
    unused = std::move(lease).value();
    n.normal++;
    // EPERM: the connection has no passthrough, or we lack the capability;
    // that will not change for this mount.
    const int e = id.status().code();
    if (e == EPERM || e == ENOTTY || e == EINVAL) {
      LOG_WARN("the kernel refused a backing file ({}); passthrough is off for this mount",
               id.status().message());
      Disable("kernel_refused");
      CountFallback("");
    } else {
      LOG_WARN("could not register a backing file: {}", id.status().message());
      CountFallback("backing_open_failed");
    }
    return Grant{};
  }
  n.backing_id = *id;
  n.lease = std::move(lease).value();
  if (hooks_.journal) hooks_.journal(node, n.backing_id, n.lease.get());
  live_nodes_++;
  return ShareLocked(node, n);
}

PassthroughNodes::Grant PassthroughNodes::ShareLocked(uint64_t node, NodeState& n) {
  if (n.idle) {
    // Off the idle list, unless Release just displaced it: then its
    // CloseIfIdle finds it no longer idle.
    MutexLock lock(idle_mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->first == node) {
        idle_bytes_ -= it->second;
        idle_.erase(it);
        break;
      }
    }
    n.idle = false;
  }
  n.passthrough++;
  if (n.lease) {
    n.lease->CountOpen();
    bytes_ += n.lease->size();
  }
  opens_++;
  return Grant{true, n.backing_id};
}

void PassthroughNodes::Release(uint64_t node, bool passthrough) {
  Shard& s = ShardOf(node);
  std::vector<uint64_t> displaced;
  {
    MutexLock lock(s.mu);
    auto it = s.nodes.find(node);
    STOKER_CHECK(it != s.nodes.end(), "release of an open the passthrough table never saw");
    NodeState& n = it->second;
    int& count = passthrough ? n.passthrough : n.normal;
    STOKER_CHECK(count > 0, "more releases than opens of a node");
    count--;
    if (n.passthrough > 0 || n.inherited) return;
    if (n.lease) {
      // Kept a while for the next open of the file, whose cost it saves
      // (backing file, pins, journal); at most linger_files_ files and
      // linger_bytes_ bytes, the oldest closed first.
      if (n.lease->size() <= linger_bytes_ && linger_files_ > 0) {
        MutexLock idle_lock(idle_mu_);
        n.idle = true;
        idle_.emplace_back(node, n.lease->size());
        idle_bytes_ += n.lease->size();
        while (idle_.size() > linger_files_ || idle_bytes_ > linger_bytes_) {
          displaced.push_back(idle_.front().first);
          idle_bytes_ -= idle_.front().second;
          idle_.pop_front();
        }
      } else {
        CloseLocked(s, it);
        return;
      }
    } else if (n.normal == 0 && n.opening == 0) {
      s.nodes.erase(it);
    }
  }
  // Other shards' locks are taken one at a time, never inside this one's.
  for (uint64_t victim : displaced) CloseIfIdle(victim);
}

void PassthroughNodes::CloseLocked(Shard& s, std::unordered_map<uint64_t, NodeState>::iterator it) {
  NodeState& n = it->second;
  // After the last release only: the kernel looks the id up after our
  // reply to each open, and fails the open if it is gone.
  hooks_.close_backing(n.backing_id);
  if (hooks_.journal) hooks_.journal(it->first, n.backing_id, nullptr);
  n.lease.reset();
  n.backing_id = 0;
  live_nodes_--;
  if (n.normal == 0 && n.opening == 0 && n.passthrough == 0) s.nodes.erase(it);
}

void PassthroughNodes::CloseIfIdle(uint64_t node) {
  Shard& s = ShardOf(node);
  MutexLock lock(s.mu);
  auto it = s.nodes.find(node);
  // Opened again since it was displaced: ShareLocked took it off the list.
  if (it == s.nodes.end() || !it->second.idle) return;
  it->second.idle = false;
  CloseLocked(s, it);
}

void PassthroughNodes::Inherit(uint64_t node, int32_t id, std::unique_ptr<WholeFileLease> held) {
  Shard& s = ShardOf(node);
  MutexLock lock(s.mu);
  NodeState& n = s.nodes[node];
  n.inherited = true;
  n.backing_id = id;
  n.lease = std::move(held);
  live_nodes_++;
}

void PassthroughNodes::MarkRestored(uint64_t node) {
  Shard& s = ShardOf(node);
  MutexLock lock(s.mu);
  s.restored.insert(node);
}

void PassthroughNodes::Clear() {
  for (Shard& s : shards_) {
    MutexLock lock(s.mu);
    for (auto& [node, n] : s.nodes) {
      if (n.lease && !n.inherited) hooks_.close_backing(n.backing_id);
    }
    s.nodes.clear();
    s.restored.clear();
  }
  MutexLock lock(idle_mu_);
  idle_.clear();
  idle_bytes_ = 0;
  live_nodes_ = 0;
}

nlohmann::json PassthroughNodes::Stats() const {
  nlohmann::json fallbacks = nlohmann::json::object();
  std::string disabled;
  size_t idle = 0;
  {
    MutexLock lock(idle_mu_);
    idle = idle_.size();
  }
  {
    MutexLock lock(stats_mu_);
    for (const auto& [reason, n] : fallbacks_) fallbacks[reason] = n;
    disabled = disabled_;
  }
  return {{"passthrough", disabled.empty() ? std::string("on") : "off: " + disabled},
          {"passthrough_opens", opens_.load()},
          {"passthrough_bytes", bytes_.load()},
          {"passthrough_fallbacks", fallbacks},
          {"passthrough_nodes", live_nodes_.load()},
          {"passthrough_idle", idle}};
}

Result<int32_t> OpenBackingFile(int fuse_fd, int fd) {
  fuse_ext::BackingMap map{fd, 0, 0};
  const int id = ioctl(fuse_fd, fuse_ext::kDevIocBackingOpen, &map);
  if (id < 0) return Status::FromErrno(errno, "FUSE_DEV_IOC_BACKING_OPEN");
  return static_cast<int32_t>(id);
}

void CloseBackingFile(int fuse_fd, int32_t id) {
  uint32_t arg = static_cast<uint32_t>(id);
  if (ioctl(fuse_fd, fuse_ext::kDevIocBackingClose, &arg) != 0 && errno != EBADF) {
    LOG_WARN("closing backing file {}: {}", id, std::strerror(errno));
  }
}

namespace {

bool HasCapSysAdmin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[CAP_SYS_ADMIN / 32].effective & (1u << (CAP_SYS_ADMIN % 32))) != 0;
}

}  // namespace

std::string ProbePassthrough(int fuse_fd, int probe_fd) {
  Result<int32_t> id = OpenBackingFile(fuse_fd, probe_fd);
  if (id.ok()) {
    CloseBackingFile(fuse_fd, *id);
    return "";
  }
  switch (id.status().code()) {
    case ENOTTY:
    case EINVAL:
      return "kernel_too_old";
    case EPERM:
      return HasCapSysAdmin() ? "kernel_refused" : "no_cap_sys_admin";
    default:
      return "probe_failed: " + id.status().message();
  }
}

}  // namespace stoker
