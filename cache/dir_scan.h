// DirScan: notices a reader that opens the files of a directory one after
// another and says which files to fetch ahead of it. Data loaders that list
// a directory and read it in order (TFRecord shards, an ImageNet class
// folder) open thousands of small files, each a separate origin or SSD round
// trip; fetching a window of the next files in the background hides that.
//
// A directory is followed in two orders at once: the origin's listing order
// (what readdir returned, what `for f in os.listdir(d)` reads) and name order
// (what sorted(glob(...)) reads). Two consecutive opens, each the successor
// of the one before in either order, make a scan; from then on every open
// returns the files up to `ahead` past it that were not returned before.
// Any other open breaks that order's scan. Shuffled readers never list
// directories: a listing is asked for only when two opens in a row fall in
// the same directory.
//
// Bounded: at most max_dirs directories are followed (least recently opened
// goes first), and a directory with more than max_entries files is not
// followed at all (its listing is not kept).
//
// Thread-safety: all methods are thread-safe. The lister is called with the
// internal lock released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

class DirScan {
 public:
  struct Options {
    size_t ahead = 16;            // files fetched ahead of a scanning reader; 0 = off
    size_t max_dirs = 16;         // directories followed at once
    size_t max_entries = 200000;  // bigger directories are not followed
  };
  // The regular files of dir (origin-relative, "" = root), in origin order.
  using Lister = std::function<Result<std::vector<std::string>>(const std::string& dir)>;

  DirScan(Options options, Lister lister);

  // Notes an open of path; returns the paths to fetch ahead now (each at
  // most once per scan in one order). next (if given): the file a scanning
  // reader opens after path ("" if it is not scanning, or path is the last).
  std::vector<std::string> OnOpen(const std::string& path, std::string* next = nullptr);

  // Directories followed now (for tests).
  size_t followed() const;

 private:
  struct Order {
    std::vector<uint32_t> names;  // indexes into Dir::names, in this order
    size_t last = SIZE_MAX;       // position of the last open
    size_t streak = 0;            // consecutive successor opens
    size_t returned_until = 0;    // positions below were returned
  };
  struct Dir {
    std::string path;
    bool listed = false;
    bool too_big = false;
    std::string unlisted_last;  // the last open before the directory was listed
    std::vector<std::string> names;
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> pos;  // name -> origin, sorted
    Order order[2];
  };
  // The directory's entry, moved to the front.
  std::shared_ptr<Dir> Touch(const std::string& dir) REQUIRES(mu_);
  void Fill(Dir& d, std::vector<std::string> names);
  // Moves d's scans to name; appends what to fetch ahead to out (if given),
  // and names the file after name in a scanning order in next (if given).
  // False if name is not in the listing.
  bool Step(Dir& d, const std::string& name, std::vector<std::string>* out,
            std::string* next = nullptr);

  const Options options_;
  const Lister lister_;
  mutable Mutex mu_;
  std::list<std::shared_ptr<Dir>> lru_ GUARDED_BY(mu_);  // most recent first
  std::string last_dir_ GUARDED_BY(mu_);                 // directory of the last open
  bool have_last_ GUARDED_BY(mu_) = false;
};

}  // namespace stoker
