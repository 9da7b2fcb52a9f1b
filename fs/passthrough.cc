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
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (!enabled_) return;
  disabled_ = reason;
  enabled_ = false;
}

std::string PassthroughNodes::disabled_reason() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return disabled_;
}

void PassthroughNodes::CountFallback(const std::string& reason) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  fallbacks_[reason.empty() ? disabled_ : reason]++;
}

PassthroughNodes::Grant PassthroughNodes::Open(uint64_t node, const LeaseMaker& make) {
  Shard& s = ShardOf(node);
  std::string why;
  Result<std::unique_ptr<WholeFileLease>> lease = Status::Error(EAGAIN, "not asked");
  {
    std::lock_guard<std::mutex> lock(s.mu);
    NodeState& n = s.nodes[node];
    if (n.passthrough > 0 || n.inherited) return ShareLocked(n);
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
  std::lock_guard<std::mutex> lock(s.mu);
  NodeState& n = s.nodes[node];
  n.opening--;
  // Another open decided the node's mode meanwhile: that mode it is.
  if (n.passthrough > 0) {
    if (lease.ok()) unused = std::move(lease).value();
    return ShareLocked(n);
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
  return ShareLocked(n);
}

PassthroughNodes::Grant PassthroughNodes::ShareLocked(NodeState& n) {
  n.passthrough++;
  if (n.lease) {
    n.lease->CountOpen();
    bytes_ += n.lease->size();
  }
  opens_++;
  return Grant{true, n.backing_id};
}

void PassthroughNodes::OpenNormal(uint64_t node, const std::string& reason) {
  Shard& s = ShardOf(node);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.nodes[node].normal++;
  }
  CountFallback(enabled_ ? reason : "");
}

void PassthroughNodes::Release(uint64_t node, bool passthrough) {
  Shard& s = ShardOf(node);
  std::unique_ptr<WholeFileLease> lease;  // dropped outside the lock
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.nodes.find(node);
    STOKER_CHECK(it != s.nodes.end(), "release of an open the passthrough table never saw");
    NodeState& n = it->second;
    int& count = passthrough ? n.passthrough : n.normal;
    STOKER_CHECK(count > 0, "more releases than opens of a node");
    count--;
    if (n.passthrough > 0 || n.inherited) return;
    if (n.lease) {
      // After the last release only: the kernel looks the id up after our
      // reply to each open, and fails the open if it is gone.
      hooks_.close_backing(n.backing_id);
      if (hooks_.journal) hooks_.journal(node, n.backing_id, nullptr);
      lease = std::move(n.lease);
      n.backing_id = 0;
      live_nodes_--;
    }
    if (n.normal == 0 && n.opening == 0) s.nodes.erase(it);
  }
}

void PassthroughNodes::Inherit(uint64_t node, int32_t id, std::unique_ptr<WholeFileLease> held) {
  Shard& s = ShardOf(node);
  std::lock_guard<std::mutex> lock(s.mu);
  NodeState& n = s.nodes[node];
  n.inherited = true;
  n.backing_id = id;
  n.lease = std::move(held);
  live_nodes_++;
}

void PassthroughNodes::MarkRestored(uint64_t node) {
  Shard& s = ShardOf(node);
  std::lock_guard<std::mutex> lock(s.mu);
  s.restored.insert(node);
}

void PassthroughNodes::Clear() {
  for (Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& [node, n] : s.nodes) {
      if (n.lease && !n.inherited) hooks_.close_backing(n.backing_id);
    }
    s.nodes.clear();
    s.restored.clear();
  }
  live_nodes_ = 0;
}

nlohmann::json PassthroughNodes::Stats() const {
  nlohmann::json fallbacks = nlohmann::json::object();
  std::string disabled;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    for (const auto& [reason, n] : fallbacks_) fallbacks[reason] = n;
    disabled = disabled_;
  }
  return {{"passthrough", disabled.empty() ? std::string("on") : "off: " + disabled},
          {"passthrough_opens", opens_.load()},
          {"passthrough_bytes", bytes_.load()},
          {"passthrough_fallbacks", fallbacks},
          {"passthrough_nodes", live_nodes_.load()}};
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
