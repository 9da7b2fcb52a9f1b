#include "fs/inode_table.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "util/log.h"
#include "util/path.h"

namespace stoker {

namespace {
// Deeper than any real tree; a longer parent chain can only be a cycle.
constexpr int kMaxDepth = 1 << 16;
// The lookup count of a restored node: the kernel's is unknown, so it is
// never reached by forgets.
constexpr uint64_t kRestoredLookups = 1ull << 40;
// How far above the highest saved id a restored table starts handing out.
constexpr uint64_t kRestoredIdGap = 1ull << 32;

// Journal records: a kind byte, then fixed-size host-order integers, then
// (for 'N') the name. Sender and reader are one binary on one machine.
constexpr char kRecNode = 'N';         // id parent dev ino type keyed name
constexpr char kRecUnkey = 'U';        // id
constexpr char kRecBind = 'B';         // id tag
constexpr char kRecRemove = 'D';       // id
constexpr char kRecBacking = 'P';      // id backing_id object_id version chunks
constexpr char kRecKernelOpens = 'K';  // (no id)
constexpr size_t kNodeFixed = 1 + 8 * 4 + 4 + 1;

void Put(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
template <typename T>
bool Get(std::string_view& in, T* v) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(v, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return true;
}
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

Result<uint64_t> InodeTable::Lookup(uint64_t parent, std::string_view name, const struct stat& st,
                                    size_t cap) {
  const Key key{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                static_cast<uint32_t>(st.st_mode & S_IFMT)};
  MutexLock lock(mu_);
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
      UnkeyLocked(kit->second, node);
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
      QueueLocked(id, node);
      JournalNodeLocked(id, node);
      MaybeRemoveLocked(old_parent);
      return id;
    }
    node.nlookup++;
    QueueLocked(id, node);
    return id;
  }
  if (nodes_.size() >= cap) return Status::Error(ENFILE, "the node table is full");
  const uint64_t id = next_id_++;
  Node node{parent, std::string(name), key, true};
  node.nlookup = 1;
  QueueLocked(id, node);
  JournalNodeLocked(id, node);
  nodes_.emplace(id, std::move(node));
  pit = nodes_.find(parent);  // emplace may rehash
  pit->second.children++;
  by_origin_[key] = id;
  peak_ = std::max(peak_, nodes_.size());
  return id;
}

Result<bool> InodeTable::BindVersion(uint64_t id, uint64_t tag) {
  MutexLock lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return Status::Error(ESTALE, "unknown node " + std::to_string(id));
  Node& node = it->second;
  if (!node.bound) {
    node.bound = true;
    node.tag = tag;
    JournalIdLocked(kRecBind, id, tag);
    return true;
  }
  if (node.tag == tag) return true;
  UnkeyLocked(id, node);
  return false;
}

void InodeTable::QueueLocked(uint64_t id, Node& node) {
  if (node.named) {  // the kernel looked it up again: it holds it anew
    node.named = false;
    node.named_by_id = false;
    named_--;
  }
  if (node.queued || node.key.type == S_IFDIR) return;
  node.queued = true;
  shed_order_.push_back(id);
}

std::vector<InodeTable::Entry> InodeTable::Overflow(size_t max_held, size_t count, Drop how,
                                                    std::chrono::steady_clock::time_point now) {
  std::vector<Entry> out;
  MutexLock lock(mu_);
  std::vector<uint64_t> later;  // under a directory a lookup waits in
  // First the nodes the kernel kept after it was asked to drop them by id.
  std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>> renamed_later;
  while (nodes_.size() > max_held && out.size() < count && !named_by_id_.empty() &&
         named_by_id_.front().first + kRenameAfter <= now) {
    const auto [at, id] = named_by_id_.front();
    named_by_id_.pop_front();
    auto it = nodes_.find(id);
    if (it == nodes_.end() || !it->second.named_by_id || it->second.named_at != at) continue;
    Node& node = it->second;
    if (waiting_in_.count(node.parent) != 0) {
      renamed_later.emplace_back(at, id);
      continue;
    }
    node.named_by_id = false;
    out.push_back(Entry{node.parent, node.name, id, Drop::kByName});
  }
  named_by_id_.insert(named_by_id_.begin(), renamed_later.begin(), renamed_later.end());
  while (nodes_.size() > max_held + named_ && out.size() < count && !shed_order_.empty()) {
    const uint64_t id = shed_order_.front();
    shed_order_.pop_front();
    auto it = nodes_.find(id);
    if (it == nodes_.end() || !it->second.queued) continue;  // gone (or restored: never queued)
    Node& node = it->second;
    if (how == Drop::kByName && waiting_in_.count(node.parent) != 0) {
      later.push_back(id);
      continue;
    }
    node.queued = false;
    if (node.nlookup == 0) continue;
    node.named = true;
    named_++;
    if (how == Drop::kById) {
      node.named_by_id = true;
      node.named_at = now;
      named_by_id_.emplace_back(now, id);
    }
    out.push_back(Entry{node.parent, node.name, id, how});
  }
  shed_order_.insert(shed_order_.begin(), later.begin(), later.end());
  return out;
}

bool InodeTable::WaitForRoom(size_t cap, uint64_t parent,
                             std::chrono::steady_clock::time_point deadline,
                             const std::function<bool()>& give_up) {
  // Short waits, so that give_up is asked without a wake-up of its own.
  constexpr auto kPoll = std::chrono::milliseconds(5);
  MutexLock lock(mu_);
  waiting_in_[parent]++;
  bool room = false;
  for (;;) {
    if (nodes_.size() < cap) {
      room = true;
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    lock.Unlock();
    const bool stop = give_up();
    lock.Lock();
    if (stop) break;
    if (nodes_.size() >= cap) {
      room_.WaitFor(mu_, std::min<std::chrono::steady_clock::duration>(kPoll, deadline - now));
    }
  }
  auto it = waiting_in_.find(parent);
  if (--it->second == 0) waiting_in_.erase(it);
  return room;
}

Result<bool> InodeTable::Retire(uint64_t id) {
  MutexLock lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return Status::Error(ESTALE, "unknown node " + std::to_string(id));
  const bool was_keyed = it->second.keyed;
  UnkeyLocked(id, it->second);
  return was_keyed;
}

void InodeTable::UnkeyLocked(uint64_t id, Node& node) {
  if (!node.keyed) return;
  auto kit = by_origin_.find(node.key);
  if (kit != by_origin_.end() && kit->second == id) by_origin_.erase(kit);
  node.keyed = false;
  JournalIdLocked(kRecUnkey, id);
}

void InodeTable::Forget(uint64_t id, uint64_t nlookup) {
  if (id == kRootId) return;
  MutexLock lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() && restored_) {
    // Its record may have been lost with the crashed daemon.
    LOG_DEBUG("forget of node {}, unknown since the restart; ignored", id);
    return;
  }
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
    if (node.named) named_--;
    nodes_.erase(it);
    if (!waiting_in_.empty()) room_.notify_all();
    JournalIdLocked(kRecRemove, id);
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
  MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  if (nodes_.find(id) == nodes_.end()) {
    return Status::Error(ESTALE, "unknown node " + std::to_string(id));
  }
  return PathLocked(id);
}

std::vector<InodeTable::Entry> InodeTable::Under(const std::string& prefix) const {
  MutexLock lock(mu_);
  std::vector<Entry> out;
  for (const auto& [id, node] : nodes_) {
    const std::string path = id == kRootId ? std::string() : PathLocked(id);
    if (!IsAtOrUnder(path, prefix)) continue;
    if (id == kRootId) {
      out.push_back(Entry{0, "", id});
    } else {
      out.push_back(Entry{node.parent, node.name, id});
    }
  }
  return out;
}

std::optional<uint64_t> InodeTable::Find(const std::string& path) const {
  if (path.empty()) return kRootId;
  MutexLock lock(mu_);
  for (const auto& [id, node] : nodes_) {
    if (id != kRootId && node.name == BaseName(path) && PathLocked(id) == path) return id;
  }
  return std::nullopt;
}

void InodeTable::SetRootOriginIno(uint64_t ino) {
  MutexLock lock(mu_);
  nodes_.at(kRootId).key.ino = ino;
}

void InodeTable::SetJournal(Journal journal) { journal_ = std::move(journal); }

void InodeTable::JournalNodeLocked(uint64_t id, const Node& node) {
  if (!journal_) return;
  std::string r;
  r.reserve(kNodeFixed + node.name.size());
  r.push_back(kRecNode);
  Put(r, &id, 8);
  Put(r, &node.parent, 8);
  Put(r, &node.key.dev, 8);
  Put(r, &node.key.ino, 8);
  Put(r, &node.key.type, 4);
  r.push_back(node.keyed ? 1 : 0);
  r.append(node.name);
  journal_(r);
}

void InodeTable::JournalIdLocked(char kind, uint64_t id, uint64_t value) {
  if (!journal_) return;
  char r[17];
  r[0] = kind;
  std::memcpy(r + 1, &id, 8);
  std::memcpy(r + 9, &value, 8);
  journal_(std::string_view(r, kind == kRecBind ? 17 : 9));
}

void InodeTable::JournalBacking(uint64_t id, int32_t backing_id, uint64_t object_id,
                                uint64_t version, uint64_t chunks) {
  MutexLock lock(mu_);
  if (!journal_) return;
  std::string r;
  r.push_back(kRecBacking);
  Put(r, &id, 8);
  Put(r, &backing_id, 4);
  Put(r, &object_id, 8);
  Put(r, &version, 8);
  Put(r, &chunks, 8);
  journal_(r);
}

void InodeTable::JournalKernelOpens() {
  MutexLock lock(mu_);
  if (journal_) journal_(std::string_view(&kRecKernelOpens, 1));
}

std::vector<InodeTable::Saved::OpenedNode> InodeTable::Saved::Opened() const {
  std::vector<OpenedNode> out;
  for (const auto& [id, n] : nodes_) {
    if (n.bound || n.backing_id != 0) {
      out.push_back({id, n.backing_id, n.object_id, n.version, n.chunks});
    }
  }
  return out;
}

bool InodeTable::Saved::Apply(std::string_view rec) {
  if (rec.empty()) return false;
  const char kind = rec[0];
  rec.remove_prefix(1);
  if (kind == kRecKernelOpens) {
    kernel_opens_ = true;
    return rec.empty();
  }
  uint64_t id = 0;
  if (!Get(rec, &id) || id <= kRootId) return false;
  switch (kind) {
    case kRecNode: {
      SavedNode n;
      uint8_t keyed = 0;
      if (!Get(rec, &n.parent) || !Get(rec, &n.dev) || !Get(rec, &n.ino) || !Get(rec, &n.type) ||
          !Get(rec, &keyed) || rec.empty()) {
        return false;
      }
      n.keyed = keyed != 0;
      n.name.assign(rec);
      auto it = nodes_.find(id);
      if (it != nodes_.end()) {  // re-pointed: keeps its binding and backing file
        n.bound = it->second.bound;
        n.tag = it->second.tag;
        n.backing_id = it->second.backing_id;
        n.object_id = it->second.object_id;
        n.version = it->second.version;
        n.chunks = it->second.chunks;
      }
      nodes_[id] = std::move(n);
      max_id_ = std::max(max_id_, id);
      return true;
    }
    case kRecUnkey:
      if (auto it = nodes_.find(id); it != nodes_.end()) it->second.keyed = false;
      return rec.empty();
    case kRecBind: {
      uint64_t tag = 0;
      if (!Get(rec, &tag)) return false;
      if (auto it = nodes_.find(id); it != nodes_.end()) {
        it->second.bound = true;
        it->second.tag = tag;
      }
      return true;
    }
    case kRecRemove:
      nodes_.erase(id);
      return rec.empty();
    case kRecBacking: {
      SavedNode b;
      if (!Get(rec, &b.backing_id) || !Get(rec, &b.object_id) || !Get(rec, &b.version) ||
          !Get(rec, &b.chunks) || !rec.empty()) {
        return false;
      }
      if (auto it = nodes_.find(id); it != nodes_.end()) {
        it->second.backing_id = b.backing_id;
        it->second.object_id = b.object_id;
        it->second.version = b.version;
        it->second.chunks = b.chunks;
      }
      return true;
    }
    default:
      return false;
  }
}

void InodeTable::Restore(const Saved& saved) {
  MutexLock lock(mu_);
  STOKER_CHECK(next_id_ == first_dynamic_id_ && nodes_.size() == 1, "restore into a table in use");
  restored_ = true;
  // Only nodes whose parent chain reaches the root: a path must be buildable.
  std::unordered_map<uint64_t, bool> reaches;
  reaches[kRootId] = true;
  auto reaches_root = [&](uint64_t id) {
    std::vector<uint64_t> chain;
    bool ok = false;
    for (int depth = 0; depth < kMaxDepth; ++depth) {
      if (auto r = reaches.find(id); r != reaches.end()) {
        ok = r->second;
        break;
      }
      auto it = saved.nodes_.find(id);
      if (it == saved.nodes_.end()) break;
      chain.push_back(id);
      id = it->second.parent;
    }
    for (uint64_t c : chain) reaches[c] = ok;
    return ok;
  };
  for (const auto& [id, n] : saved.nodes_) {
    if (id < first_dynamic_id_ || !reaches_root(id)) continue;
    Node node{n.parent, n.name, Key{n.dev, n.ino, n.type}, n.keyed};
    node.nlookup = kRestoredLookups;
    node.bound = n.bound;
    node.tag = n.tag;
    nodes_.emplace(id, std::move(node));
  }
  for (auto& [id, node] : nodes_) {
    if (id == kRootId) continue;
    nodes_.at(node.parent).children++;
    if (!node.keyed) continue;
    // Two keyed nodes for one origin object cannot come from one table;
    // should a lost record make them, the newer one wins.
    auto [kit, inserted] = by_origin_.emplace(node.key, id);
    if (!inserted && kit->second < id) {
      nodes_.at(kit->second).keyed = false;
      kit->second = id;
    } else if (!inserted) {
      node.keyed = false;
    }
  }
  next_id_ = std::max(next_id_, saved.max_id_ + 1) + kRestoredIdGap;
  peak_ = std::max(peak_, nodes_.size());
  LOG_INFO("restored {} node ids of the previous daemon", nodes_.size() - 1);
}

size_t InodeTable::size() const {
  MutexLock lock(mu_);
  return nodes_.size();
}

size_t InodeTable::peak() const {
  MutexLock lock(mu_);
  return peak_;
}

uint64_t InodeTable::LookupCount(uint64_t id) const {
  MutexLock lock(mu_);
  auto it = nodes_.find(id);
  return it == nodes_.end() ? 0 : it->second.nlookup;
}

}  // namespace stoker
