// InodeTable: the node ids this mount has handed to the kernel. A node names
// one origin object by (parent node, name), so its path is rebuilt by walking
// parents; no file descriptor is held, so a million looked-up files cost
// memory, never descriptors (passthrough_ll runs out of fds at 20k files).
//
// Nodes are keyed by the origin's (st_dev, st_ino, file type): hard links share
// one node, as the kernel expects of one inode. A hard-linked file reached by
// another name is re-pointed at that name (the newest name is the likeliest
// to still exist). Directories are re-pointed too, unless that would make a
// node its own ancestor (a bind mount looping back inside the origin).
// An inode number reused by the origin for a different type of object gets a
// fresh node; the old one lives on, unkeyed, until the kernel forgets it. So
// does a non-directory with one link reached by another name: not a hard link
// but a freed inode number given to another file (write-temp + rename).
//
// Lookup counts follow the FUSE protocol: each reply that gives a node id to
// the kernel (lookup, create-less readdirplus entry) adds one; forget subtracts
// what the kernel says. A node lives while the kernel holds lookups on it or a
// child names it as parent (so the child's path stays buildable). Forgetting
// more than was looked up is a broken invariant and aborts. Node ids are never
// reused (a 64-bit counter), so generation is always 0.
//
// One version per node: the kernel keeps one page cache per node, shared by
// every open of it, so a node must never serve two versions of a file's
// content (a read could copy pages of both). The first open binds the node to
// the version it opened (BindVersion); an open that finds another version
// retires the node (unkeyed: the next lookup of the name gets a new node, and
// thus a new kernel inode with an empty page cache) and fails with ESTALE,
// which makes the kernel look the path up again (LOOKUP_REVAL) and open that.
// Handles opened before keep the retired node and the old version.
//
// The root (kRootId) is never keyed and never removed. Ids in
// [kRootId + 1, first_dynamic_id) are left to virtual nodes (control files);
// the table never hands them out and refuses them in every call.
//
// Surviving a daemon crash (--supervise, fs/supervisor.h): the kernel keeps
// the node ids it was given, so a restarted daemon must resolve them. With a
// journal set, every change that affects that (a node made or re-pointed,
// unkeyed, bound to a version, removed) is sent to it as one record, under
// the table's lock, before the id can reach the kernel. The supervisor
// replays them into a Saved table, from which the next daemon's table is
// restored. Lookup counts are not journaled (one record per lookup would
// cost too much): restored nodes are kept until the daemon ends, and a
// restored table ignores forgets of ids it does not know instead of
// aborting. So a crash leaks at most the nodes live at the time.
//
// Thread-safety: every method is thread-safe. One mutex guards all state
// (counts included, so a forget is always re-checked against concurrent
// lookups); nothing is called out while it is held but the journal, which
// must not call back into the table.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class InodeTable {
 public:
  static constexpr uint64_t kRootId = 1;  // FUSE_ROOT_ID

  explicit InodeTable(uint64_t first_dynamic_id);
  InodeTable(const InodeTable&) = delete;
  InodeTable& operator=(const InodeTable&) = delete;

  // The node for the entry `name` of directory `parent`, whose origin
  // attributes are st, with one more lookup. ESTALE if parent is unknown;
  // ENFILE if it would make a new node while `cap` or more nodes live (a
  // node that lives already is always found).
  // REQUIRES: IsValidComponent(name).
  static constexpr size_t kNoCap = SIZE_MAX;
  Result<uint64_t> Lookup(uint64_t parent, std::string_view name, const struct stat& st,
                          size_t cap = kNoCap);

  // Takes back nlookup lookups of id. Unknown ids (never handed out, or
  // virtual) abort, as does going below zero. Forgetting the root is a no-op.
  void Forget(uint64_t id, uint64_t nlookup);

  // Binds id to the content version tag (ObjectCache::Opened::content_tag)
  // if it has none. True if that is id's version; false if id serves another
  // one: id is then retired as described above. ESTALE if id is not live.
  Result<bool> BindVersion(uint64_t id, uint64_t tag);

  // Bounding what the kernel holds: the kernel keeps a node (and we keep its
  // record) until it forgets it, which with plenty of memory is never. When
  // more than max_held nodes live (not counting those named already and not
  // yet forgotten), Overflow names up to `count` of the
  // oldest-looked-up non-directory nodes the kernel still holds, as entries
  // for it to drop (fuse_lowlevel_notify_inval_entry), after which it
  // forgets them unless they are open. Each node is named once per lookup
  // that gave it to the kernel; one looked up again meanwhile costs the
  // kernel a lookup more, never a wrong answer.
  //
  // How the kernel is asked decides what may be named (`how`):
  // - kByName (FUSE_NOTIFY_INVAL_ENTRY) takes the kernel's lock of the
  //   entry's directory: entries under a directory some WaitForRoom waits
  //   in are left for later (see there). The kernel drops an open file's
  //   entry when it is closed.
  // - kById (FUSE_NOTIFY_PRUNE, fs/fuse_kernel_ext.h) takes no directory
  //   lock, so any entry may be named; but the kernel skips a node in use
  //   (an open file) and keeps it after. So a node named by id that lives
  //   on, not looked up again, kRenameAfter after is named once more, by
  //   name, while more than max_held nodes live.
  enum class Drop { kByName, kById };
  struct Entry {
    uint64_t parent;
    std::string name;
    uint64_t id = 0;
    Drop how = Drop::kByName;
  };
  static constexpr std::chrono::milliseconds kRenameAfter{1000};
  std::vector<Entry> Overflow(
      size_t max_held, size_t count, Drop how = Drop::kByName,
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  // Back-pressure for a lookup that Lookup refused for want of room (the
  // kernel forgets asynchronously, later than the lookups that follow):
  // waits until fewer than cap nodes live (true), or until deadline or
  // give_up() (false). The kernel holds `parent`'s directory lock while
  // that lookup waits, and dropping an entry of parent would wait for the
  // same lock, so meanwhile Overflow names none of parent's entries, and
  // give_up (polled every few milliseconds, without the table's lock)
  // should say whether one named before is being dropped now.
  bool WaitForRoom(size_t cap, uint64_t parent, std::chrono::steady_clock::time_point deadline,
                   const std::function<bool()>& give_up);

  // Unkeys id as BindVersion does when it finds another version: the next
  // lookup of its name gets a new node. False if it was retired already;
  // ESTALE if id is not live.
  Result<bool> Retire(uint64_t id);

  struct NodeInfo {
    std::string path;  // origin path, "" for the root
    uint64_t origin_ino = 0;
    uint64_t parent = 0;  // parent node id; the root is its own parent
    uint64_t parent_origin_ino = 0;
  };
  // ESTALE if id is not a live node.
  Result<NodeInfo> Info(uint64_t id) const;
  Result<std::string> Path(uint64_t id) const;

  // The live nodes at or below origin path prefix ("" is the root: all of
  // them), each as the entry that names it (the root's: parent and name
  // empty), for `stoker refresh` to tell the kernel to forget them.
  std::vector<Entry> Under(const std::string& prefix) const;
  // The live node whose path is path, if any (a walk over every node).
  std::optional<uint64_t> Find(const std::string& path) const;

  // Sets the root's origin inode number (reported for "." and ".." entries).
  void SetRootOriginIno(uint64_t ino);

  // Journal records (see the class comment). The journal gets each record's
  // bytes; it may drop them (a supervisor gone), never reorder them.
  using Journal = std::function<void(std::string_view record)>;
  // REQUIRES: called before the table is shared between threads.
  void SetJournal(Journal journal);

  // Journals that the kernel reads node id's version (object_id, version,
  // chunks) through backing file backing_id (fs/passthrough.h), or, with
  // backing_id 0, no longer does. Not kept in the table itself.
  void JournalBacking(uint64_t id, int32_t backing_id, uint64_t object_id = 0, uint64_t version = 0,
                      uint64_t chunks = 0);

  // Journals that the kernel opens files by itself from now on (the
  // connection's no_open, fs/opens_policy.h): before the daemon answers an
  // OPEN with ENOSYS, so a restarted daemon knows it. Not kept in the table.
  void JournalKernelOpens();

  // The nodes a journal describes, rebuilt record by record.
  class Saved {
   public:
    // False for a record that does not decode (it is skipped).
    bool Apply(std::string_view record);
    size_t size() const { return nodes_.size(); }
    // JournalKernelOpens was recorded.
    bool kernel_opens() const { return kernel_opens_; }

    // A node the dead daemon had opened: with the backing file the kernel
    // may still read it through (backing_id != 0), or opened normally.
    struct OpenedNode {
      uint64_t id = 0;
      int32_t backing_id = 0;
      uint64_t object_id = 0, version = 0, chunks = 0;
    };
    std::vector<OpenedNode> Opened() const;

   private:
    friend class InodeTable;
    struct SavedNode {
      uint64_t parent = 0;
      std::string name;
      uint64_t dev = 0, ino = 0;
      uint32_t type = 0;
      bool keyed = true;
      bool bound = false;
      uint64_t tag = 0;
      int32_t backing_id = 0;
      uint64_t object_id = 0, version = 0, chunks = 0;
    };
    std::map<uint64_t, SavedNode> nodes_;
    uint64_t max_id_ = 0;
    bool kernel_opens_ = false;
  };
  // Adds the saved nodes to a table that has handed out no id yet. Nodes
  // whose parent chain does not reach the root are left out. New ids start
  // well above every saved one.
  void Restore(const Saved& saved);

  // Live nodes, the root included.
  size_t size() const;
  // The most nodes that ever lived at once.
  size_t peak() const;
  // Current lookup count of id; 0 if id is not live. For tests and stats.
  uint64_t LookupCount(uint64_t id) const;

 private:
  struct Key {
    uint64_t dev;
    uint64_t ino;
    uint32_t type;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Node {
    uint64_t parent;
    std::string name;
    Key key;
    bool keyed;             // by_origin_[key] == this node
    uint64_t nlookup = 0;   // held by the kernel
    uint64_t children = 0;  // live nodes whose parent this is
    // The content version served, once an open bound it (BindVersion).
    bool bound = false;
    bool queued = false;  // in shed_order_
    bool named = false;   // by Overflow, since its last lookup
    bool named_by_id = false;
    std::chrono::steady_clock::time_point named_at{};  // if named_by_id
    uint64_t tag = 0;
  };

  // Queues a non-directory node for Overflow.
  void QueueLocked(uint64_t id, Node& node) REQUIRES(mu_);
  // True if `ancestor` is on the parent chain of id.
  bool IsAncestorLocked(uint64_t ancestor, uint64_t id) const REQUIRES(mu_);
  // Removes id and then each parent that has become
  // unreferenced.
  void MaybeRemoveLocked(uint64_t id) REQUIRES(mu_);
  std::string PathLocked(uint64_t id) const REQUIRES(mu_);
  // Journal records, if a journal is set.
  void JournalNodeLocked(uint64_t id, const Node& node) REQUIRES(mu_);
  void JournalIdLocked(char kind, uint64_t id, uint64_t value = 0) REQUIRES(mu_);
  // Drops id's key from by_origin_ (if it is its node).
  void UnkeyLocked(uint64_t id, Node& node) REQUIRES(mu_);

  const uint64_t first_dynamic_id_;
  mutable Mutex mu_;
  uint64_t next_id_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Node> nodes_ GUARDED_BY(mu_);
  std::unordered_map<Key, uint64_t, KeyHash> by_origin_ GUARDED_BY(mu_);
  std::deque<uint64_t> shed_order_ GUARDED_BY(mu_);  // non-directories, oldest lookup first
  size_t named_ GUARDED_BY(mu_) = 0;                 // live nodes with `named`
  // Nodes named by id, in the order named, with when (Overflow).
  std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>> named_by_id_
      GUARDED_BY(mu_);
  size_t peak_ GUARDED_BY(mu_) = 1;  // the root
  // WaitForRoom: the directories lookups wait in (a count per directory),
  // and the wake-up when a node goes.
  std::unordered_map<uint64_t, size_t> waiting_in_ GUARDED_BY(mu_);
  CondVar room_;
  Journal journal_;  // set before use
  bool restored_ GUARDED_BY(mu_) = false;
};

}  // namespace stoker
