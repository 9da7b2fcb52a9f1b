#include "fs/inode_table.h"

#include <vector>

namespace stoker {

namespace {
// Deeper than any real tree; a longer parent chain can only be a cycle.
constexpr int kMaxDepth = 1 << 16;
}  // namespace

size_t InodeTable::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.ino * 0x9E3779B97F4A7C15ull;
  h ^= (k.dev + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2));
  h ^= k.type;
  return static_cast<size_t>(h);
}

InodeTable::InodeTable(uint64_t first_dynamic_id)
    : first_dynamic_id_(first_dynamic_id), next_id_(first_dynamic_id) {
  STOKER_CHECK(first_dynamic_id > kRootId, "dynamic ids must follow the root");
  Node root{kRootId, "", Key{0, 0, S_IFDIR}, false};
  root.nlookup = 1;  // the kernel holds the root implicitly
  nodes_.emplace(kRootId, std::move(root));
}

Result<uint64_t> InodeTable::Lookup(uint64_t parent, std::string_view name, const struct stat& st) {
  const Key key{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                static_cast<uint32_t>(st.st_mode & S_IFMT)};
  std::lock_guard<std::mutex> lock(mu_);
  auto pit = nodes_.find(parent);
  if (pit == nodes_.end()) {
    return Status::Error(ESTALE, "lookup in unknown node " + std::to_string(parent));
  }
  auto kit = by_origin_.find(key);
  if (kit != by_origin_.end() && !S_ISDIR(st.st_mode) && st.st_nlink <= 1) {
    Node& node = nodes_.at(kit->second);
    if (node.parent != parent || node.name != name) {
      // One link, so not a hard link: the origin gave a freed inode number
      // to another file (a file replaced by write-temp + rename). Sharing the
      // node would serve this file's bytes under the old one's name.
      node.keyed = false;
      by_origin_.erase(kit);
      kit = by_origin_.end();
    }
  }
  if (kit != by_origin_.end()) {
    const uint64_t id = kit->second;
    Node& node = nodes_.at(id);
    if ((node.parent != parent || node.name != name) && id != parent &&
        !IsAncestorLocked(id, parent)) {
      // Re-point at the name just used. The old parent may become
      // unreferenced, so adjust counts before removing anything.
      const uint64_t old_parent = node.parent;
      pit->second.children++;
      node.parent = parent;
      node.name.assign(name);
      Node& old = nodes_.at(old_parent);
      STOKER_CHECK(old.children > 0, "child count underflow");
      old.children--;
      node.nlookup++;
      MaybeRemoveLocked(old_parent);
      return id;
    }
    node.nlookup++;
    return id;
  }
  const uint64_t id = next_id_++;
  Node node{parent, std::string(name), key, true};
  node.nlookup = 1;
  nodes_.emplace(id, std::move(node));
  pit = nodes_.find(parent);  // emplace may rehash
  pit->second.children++;
  by_origin_[key] = id;
  return id;
}

Result<bool> InodeTable::BindVersion(uint64_t id, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return Status::Error(ESTALE, "unknown node " + std::to_string(id));
  Node& node = it->second;
  if (!node.bound) {
    node.bound = true;
    node.tag = tag;
    return true;
  }
  if (node.tag == tag) return true;
  if (node.keyed) {
    auto kit = by_origin_.find(node.key);
    if (kit != by_origin_.end() && kit->second == id) by_origin_.erase(kit);
    node.keyed = false;
  }
  return false;
}

void InodeTable::Forget(uint64_t id, uint64_t nlookup) {
  if (id == kRootId) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  STOKER_CHECK(it != nodes_.end(), "forget of a node id that is not live");
  STOKER_CHECK(it->second.nlookup >= nlookup, "forget below a zero lookup count");
  it->second.nlookup -= nlookup;
  MaybeRemoveLocked(id);
}

void InodeTable::MaybeRemoveLocked(uint64_t id) {
  while (id != kRootId) {
    auto it = nodes_.find(id);
    STOKER_CHECK(it != nodes_.end(), "parent chain names a removed node");
    Node& node = it->second;
    if (node.nlookup != 0 || node.children != 0) return;
    if (node.keyed) {
      auto kit = by_origin_.find(node.key);
      if (kit != by_origin_.end() && kit->second == id) by_origin_.erase(kit);
    }
    const uint64_t parent = node.parent;
    nodes_.erase(it);
    Node& p = nodes_.at(parent);
    STOKER_CHECK(p.children > 0, "child count underflow");
    p.children--;
    id = parent;
  }
}

bool InodeTable::IsAncestorLocked(uint64_t ancestor, uint64_t id) const {
  for (int depth = 0; depth < kMaxDepth; ++depth) {
    if (id == ancestor) return true;
    if (id == kRootId) return false;
    id = nodes_.at(id).parent;
  }
  STOKER_CHECK(false, "cycle in the node tree");
  return true;
}

std::string InodeTable::PathLocked(uint64_t id) const {
  std::vector<const std::string*> names;
  size_t len = 0;
  while (id != kRootId) {
    const Node& node = nodes_.at(id);
    names.push_back(&node.name);
    len += node.name.size() + 1;
    id = node.parent;
    STOKER_CHECK(names.size() < static_cast<size_t>(kMaxDepth), "cycle in the node tree");
  }
  std::string path;
  path.reserve(len);
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (!path.empty()) path.push_back('/');
    path.append(**it);
  }
  return path;
}

Result<InodeTable::NodeInfo> InodeTable::Info(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return Status::Error(ESTALE, "unknown node " + std::to_string(id));
  NodeInfo info;
  info.path = PathLocked(id);
  info.origin_ino = it->second.key.ino;
  info.parent = it->second.parent;
  info.parent_origin_ino = nodes_.at(it->second.parent).key.ino;
  return info;
}

Result<std::string> InodeTable::Path(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_.find(id) == nodes_.end()) {
    return Status::Error(ESTALE, "unknown node " + std::to_string(id));
  }
  return PathLocked(id);
}

void InodeTable::SetRootOriginIno(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_.at(kRootId).key.ino = ino;
}

size_t InodeTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.size();
}

uint64_t InodeTable::LookupCount(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  return it == nodes_.end() ? 0 : it->second.nlookup;
}

}  // namespace stoker
