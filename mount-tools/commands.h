// The stoker CLI's subcommands. Each Add*Command registers one CLI11
// subcommand on the root app and returns what main runs once parsing chose it.
// The pure pieces (argument checks, formatting) are declared here too so that
// unit tests reach them without running a command.
//
// Exit codes, for every subcommand: 0 success; 1 a failure of the world
// (could not mount, not a stoker mount, fsck found problems); 2 a usage error
// (bad argument) or, for fsck, "could not check". Errors are one line on
// stderr: "stoker: error: <what>".
//
// Thread-safety: single-threaded; the CLI runs one command per process.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/fsck.h"
#include "fs/mount.h"
#include "util/status.h"

namespace stoker {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Subcommand AddMountCommand(CLI::App& root);
Subcommand AddUnmountCommand(CLI::App& root);
Subcommand AddStatCommand(CLI::App& root);
Subcommand AddFsckCommand(CLI::App& root);
Subcommand AddWarmCommand(CLI::App& root);
Subcommand AddOrderCommand(CLI::App& root);
Subcommand AddRefreshCommand(CLI::App& root);
Subcommand AddFluidCommand(CLI::App& root);

// Prints "stoker: error: <message>" on stderr.
inline void PrintError(const std::string& message) {
  std::fprintf(stderr, "stoker: error: %s\n", message.c_str());
}

// --- mount -----------------------------------------------------------------

// What `stoker mount` was given, as text, before checking.
struct MountArgs {
  std::string origin;
  std::string mountpoint;
  std::string cache_dir;
  std::string cache_size = "10G";
  std::string chunk_size = "1M";
  std::string slab_max = "1M";
  std::string revalidate = "60";  // seconds
  std::string prefetch = "8M";
  std::string prefetch_files = "16";
  std::string order_ahead = "128";  // files (cache/order_prefetcher.h)
  std::string order_ahead_bytes = "1G";
  std::string max_nodes = "100000";
  std::vector<std::string> fuse_options;  // as given; comma lists not yet split
  std::string io_backend = "auto";
  std::string passthrough = "auto";
  std::string opens = "auto";
  std::string log_level = "info";
  std::string log_file;
  bool foreground = false;
  bool reset = false;               // --reset: empty the cache dir at mount
  bool supervise = true;            // --supervise / --no-supervise (fs/supervisor.h)
  bool default_permissions = true;  // --default-permissions / --no-default-permissions
  std::string metrics;              // --metrics ADDR:PORT (fs/metrics.h)
  // A cache group (group/cache_group.h).
  std::string peers;
  std::string peer_listen = "0.0.0.0:7070";
  std::string peer_advertise;
  std::string peer_token_file;
  std::string peer_group;
  bool no_direct_io = false;
  std::vector<std::string> views;             // --view NAME[:OPTIONS], repeatable
  std::string decoder = "auto";               // --decoder auto|cpu|gpu
  std::vector<std::string> gpu_library_path;  // --gpu-library-path DIR, repeatable
  // Remote origins (s3://, http(s)://).
  std::string s3_endpoint;
  bool s3_path_style = false;
  std::string s3_page_size = "1000";  // hidden: a test seam
  std::string manifest;
  std::string origin_connect_timeout = "10";  // seconds
  std::string origin_stall_timeout = "30";    // seconds
  std::string origin_retries = "5";
  std::string origin_backoff = "5";  // seconds
};

// Chunk sizes the cache accepts: a multiple of 4096 in [64 KiB, 64 MiB].
inline constexpr uint64_t kMinChunkSize = 64ull << 10;
inline constexpr uint64_t kMaxChunkSize = 64ull << 20;
inline constexpr uint64_t kMinChunksInCache = 4;
inline constexpr uint64_t kMaxPrefetchFiles = 1024;
inline constexpr uint64_t kMaxOrderAhead = 100000;
// The origin's timeouts and --origin-backoff: at most an hour.
inline constexpr uint64_t kMaxOriginSeconds = 3600;
inline constexpr uint64_t kMaxOriginRetries = 100;

// path made absolute against the working directory and lexically normal,
// without resolving anything (the mountpoint may be stale); an origin URL
// (s3://, http(s)://) as it is.
std::string MakeAbsolute(const std::string& path);

// Splits "-o a,b -o c" into {"a", "b", "c"}, dropping empty items.
std::vector<std::string> SplitFuseOptions(const std::vector<std::string>& raw);

// Checks and converts; EINVAL with a one-line message naming the bad
// argument. Paths are made absolute (the daemon changes to /) but not
// resolved: the mountpoint may be stale.
Result<MountOptions> ToMountOptions(const MountArgs& args);

// --- stat ------------------------------------------------------------------

// The human table for a stats.json object. Missing fields print as "-".
std::string FormatStats(const nlohmann::json& stats);
// One "rates" row: what grew between two stats.json objects taken seconds
// apart, per second (a counter that went back counts from 0).
std::string FormatRates(const nlohmann::json& before, const nlohmann::json& now, double seconds);

// --- fsck ------------------------------------------------------------------

// The summary for people; at most max_problems problem lines are listed.
std::string FormatFsckReport(const FsckReport& report, bool repair, size_t max_problems);

// --- warm ------------------------------------------------------------------

// The request sent to CACHE_DIR/control.sock; rel_path is relative to the
// mount root ("" = all of it).
nlohmann::json WarmRequest(const std::string& rel_path);

// OK for {"ok":true,...}; otherwise the daemon's error, or EPROTO for an
// answer that is not of that shape.
Status ParseControlReply(const nlohmann::json& answer);

// --- order -----------------------------------------------------------------

// OK unless FILE is a directory, which `stoker order MOUNTPOINT FILE` (the
// arguments swapped) gives: EINVAL saying so, with the usage.
Status CheckOrderFile(const std::string& file);

// The paths of an order file's text: one per line, blank lines and lines
// starting with '#' left out.
std::vector<std::string> ParseOrderLines(const std::string& text);

// paths split into the parts of an order sent over the control socket, each
// a JSON array of at most max_bytes when dumped.
std::vector<std::vector<std::string>> SplitOrder(const std::vector<std::string>& paths,
                                                 size_t max_bytes);

}  // namespace stoker
