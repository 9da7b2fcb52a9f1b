// CheckCache: the offline consistency check behind `stoker fsck`.
// Refuses (EBUSY) while a daemon holds the cache directory's lock.
// Checks every index record against the data files, recomputes every chunk
// checksum, finds data files no record refers to, records whose data is
// missing, pending-write records, and whether the recorded usage matches.
// With repair, drops what is bad and fixes the usage record.
// A damaged index (ChunkIndex::Open says EBADMSG) is a finding: with repair
// it is salvaged (ChunkIndex::Salvage) and then checked like any other, so
// whatever it still says is verified against the data files and their
// checksums; if it cannot be salvaged, the index and every data file go and
// the next mount starts empty.
// Thread-safety: single-threaded; takes the directory lock for its duration.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace stoker {

struct FsckReport {
  uint64_t objects = 0;
  uint64_t chunks = 0;
  uint64_t bytes_checked = 0;
  uint64_t bad_checksums = 0;
  uint64_t missing_data = 0;    // records whose data file or range is gone
  uint64_t orphan_files = 0;    // data files no record refers to
  uint64_t leaked_slots = 0;    // slab slots taken with no record or intent
  uint64_t pending_writes = 0;  // intents left by a crash
  uint64_t bad_records = 0;     // undecodable index records
  bool usage_mismatch = false;
  // Why the index could not be opened ("" if it could).
  std::string index_damage;
  // With repair, what became of a damaged index: "salvaged" (RocksDB repair,
  // then checked) or "reset" (removed with every data file).
  std::string index_repair;
  uint64_t repaired = 0;
  std::vector<std::string> problems;  // one line each, for people
  bool clean() const {
    return bad_checksums == 0 && missing_data == 0 && orphan_files == 0 && leaked_slots == 0 &&
           pending_writes == 0 && bad_records == 0 && !usage_mismatch && index_damage.empty();
  }
  nlohmann::json ToJson() const;
};

// Returns the report, or a Status when the cache could not be checked at all
// (not a cache dir, in use, index unreadable).
Result<FsckReport> CheckCache(const std::string& dir, bool repair);

}  // namespace stoker
