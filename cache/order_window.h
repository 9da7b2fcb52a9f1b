// OrderWindow: one epoch's file order (what a data loader's sampler will
// read, in that order) and how far its reader has gone in it: which file to
// fetch next so that the fetches stay a bounded window ahead of the reader.
//
// Positions: the reader's position is one past the furthest file of the
// order it has opened (position()). The window is the files from `ahead`
// before that position (several loader workers open their batches out of
// step: a file a little behind the furthest open is still to come) to
// `ahead` past it, and no further while the files fetched and not yet opened
// hold `ahead_bytes` or more. Each file is handed out at most once, in order;
// a file the reader already opened is never handed out; one that falls more
// than `ahead` behind the position unopened (the reader skipped it) is
// passed over, and its bytes no longer count as ahead.
//
// A path may appear more than once (a sampler with replacement): an open
// takes its first occurrence not opened yet.
//
// Memory: the paths are kept in one buffer; about 40 bytes per file besides
// the paths' own bytes (memory_bytes()).
//
// Thread-safety: none; its owner locks (OrderPrefetcher).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stoker {

class OrderWindow {
 public:
  struct Options {
    size_t ahead = 128;                 // files ahead of (and behind) the reader's position
    uint64_t ahead_bytes = 1ull << 30;  // bytes fetched and not yet opened
  };
  explicit OrderWindow(Options options) : options_(options) {}

  // Adds paths at the end of the order.
  void Append(const std::vector<std::string>& paths);

  size_t size() const { return offsets_.size(); }
  std::string_view path(size_t pos) const;
  // One past the furthest position opened (0 before the first open).
  size_t position() const { return reached_; }
  uint64_t bytes_ahead() const { return bytes_ahead_; }
  // The order's memory, about.
  uint64_t memory_bytes() const;
  // Bytes one more path of n bytes takes in memory_bytes().
  static uint64_t MemoryPerPath(size_t n) { return n + kOverheadPerPath; }

  // What an open of a path meant.
  struct Open {
    bool in_order = false;  // path is a file of the order not opened before
    bool fetched = false;   // ... and its fetch had ended well before the open
  };
  // The reader opened path.
  Open Opened(std::string_view path);

  // The next position to fetch, marked as being fetched; nullopt while the
  // window has nothing more to fetch.
  std::optional<size_t> Next();
  // Whether pos is still wanted: not opened by the reader, not passed over.
  bool Wanted(size_t pos) const;
  // The fetch of pos (handed out by Next) ended: ok, the file (of bytes
  // bytes) is in the cache; else it is passed over.
  void Fetched(size_t pos, uint64_t bytes, bool ok);

 private:
  enum class State : uint8_t { kPending, kFetching, kFetched, kOpened, kFailed };
  static constexpr uint64_t kOverheadPerPath = 40;
  // Positions below this, unopened, were skipped by the reader.
  size_t Behind() const { return reached_ > options_.ahead ? reached_ - options_.ahead : 0; }
  // Fetched bytes of positions now behind the window no longer count.
  void ForgetBehind();

  const Options options_;
  std::string paths_;              // every path, back to back
  std::vector<uint64_t> offsets_;  // where each position's path starts in paths_
  std::vector<State> state_;
  // Positions by the hash of their path: the first and last of each hash
  // (the first ahead of the opened ones at its head), and each position's
  // next of the same hash (kNone ends it).
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  struct Chain {
    uint32_t first;
    uint32_t last;
  };
  std::unordered_map<uint64_t, Chain> chains_;
  std::vector<uint32_t> next_same_;
  size_t reached_ = 0;
  size_t next_ = 0;  // positions below were handed out or passed over
  uint64_t bytes_ahead_ = 0;
  std::map<size_t, uint64_t> fetched_bytes_;  // fetched, not opened: position -> bytes
};

}  // namespace stoker
