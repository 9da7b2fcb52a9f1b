#include "fs/metrics.h"

#include <arpa/inet.h>
#include <microhttpd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <vector>

namespace stoker {
namespace {

// stats.json fields that say how things are now; every other number counts
// since the daemon started (a restarted daemon starts again from 0, which
// Prometheus's rate() takes for a counter reset).
const std::set<std::string_view> kGauges = {"cache_capacity_bytes",
                                            "cache_limit_bytes",
                                            "cache_used_bytes",
                                            "chunk_bytes",
                                            "chunk_size",
                                            "chunks",
                                            "index_bytes",
                                            "index_headroom_bytes",
                                            "inodes",
                                            "max_nodes",
                                            "nodes_peak",
                                            "node_files",
                                            "objects",
                                            "objects_in_memory",
                                            "open_dirs",
                                            "open_files",
                                            "passthrough_idle",
                                            "passthrough_nodes",
                                            "pending_drops",
                                            "produced_kept_bytes",
                                            "readahead_bytes",
                                            "recent_bytes",
                                            "recent_limit_bytes",
                                            "unstored_bytes",
                                            "verified_chunks_held",
                                            "hit_ratio",
                                            "uptime_seconds",
                                            "origin_unreachable",
                                            "decode_threads",
                                            "decode_queue_depth",
                                            "decode_running",
                                            "order_files",
                                            "order_position",
                                            "order_bytes_ahead",
                                            "group_members",
                                            "group_members_skipped"};

// Names whose unit is not at their end yet, or that say too little alone.
const std::map<std::string_view, std::string_view> kRenames = {
    {"bytes_read", "read_bytes"},
    {"origin_bytes_read", "origin_read_bytes"},
    {"derived_bytes_produced", "derived_produced_bytes"},
    {"passthrough_bytes", "passthrough_opened_bytes"},
    {"chunk_size", "chunk_size_bytes"},
    {"chunks", "cached_chunks"},
    {"objects", "cached_objects"},
};

// Counters of errors, one metric with the kind as a label.
const std::map<std::string_view, std::string_view> kErrorKinds = {
    {"errors", "read"}, {"origin_errors", "origin"}, {"checksum_failures", "checksum"}};

// Shown as labels of stoker_info.
const std::set<std::string_view> kInfo = {
    "origin",     "opens",   "passthrough", "io_backend", "origin_io_backend",
    "mountpoint", "decoder", "group",       "group_self"};

// What each number of stats.json means: a metric's HELP line is its field's
// name (the mapping docs/operations.md lists) and this.
const std::map<std::string_view, std::string_view> kHelp = {
    {"bytes_read",
     "bytes returned to readers by the daemon (not the reads the kernel answers "
     "itself: page cache, passthrough)"},
    {"read_requests", "reads the daemon answered"},
    {"cache_hit_bytes", "of bytes_read, bytes served from the SSD tier"},
    {"origin_bytes_read", "bytes read from the origin"},
    {"origin_reads", "read operations on the origin"},
    {"derived_bytes_produced",
     "bytes of decoded-view files made into the cache (from raw files, "
     "not read from the origin)"},
    {"chunks_fetched", "chunks fetched from the origin"},
    {"chunks_written", "chunks written into the SSD tier"},
    {"slab_chunks_written", "of chunks_written, into slab slots (small files)"},
    {"chunks_not_cached", "chunks served from the origin without being cached: no room"},
    {"evicted_bytes", "bytes evicted from the SSD tier"},
    {"evicted_chunks", "chunks evicted from the SSD tier"},
    {"revalidations", "origin identity checks at open"},
    {"origin_changes", "of revalidations, files found changed at the origin"},
    {"chunks_verified", "cached chunks read back and found good, first served in this process"},
    {"chunks_verified_by_readers", "of chunks_verified, checked by a read that waited for it"},
    {"chunks_verified_at_open", "chunks checked by an open about to hand its file to the kernel"},
    {"chunks_verified_ahead", "chunks checked ahead of a scanning reader's open"},
    {"revalidations_skipped",
     "revalidations and lookups answered from the cache while the origin was unreachable"},
    {"attrs_from_cache",
     "lookups and getattrs answered from the cache within --revalidate of the last check"},
    {"collapsed_misses", "reads that waited on another's fetch of the same chunk"},
    {"collapsed_checks", "reads that waited on another's check of the same cached chunk"},
    {"prefetched_chunks", "chunks fetched from the origin ahead of a reader"},
    {"dir_prefetched_files", "files fetched ahead of a reader going through a directory"},
    {"warm_files_queued", "files queued by stoker warm"},
    {"warm_files_done", "of warm_files_queued, files done (kept, or not)"},
    {"warm_bytes", "bytes stoker warm fetched"},
    {"orders_set", "sampler orders set (stoker order)"},
    {"order_prefetched_files", "files fetched (or found cached) ahead of the order's reader"},
    {"order_hits", "opens of files of the order whose fetch had ended before"},
    {"order_cancelled", "fetches a new order dropped"},
    {"order_not_fetched", "files of an order not fetched: no room, or gone from the origin"},
    {"order_files", "files in the current order (0: none)"},
    {"order_position", "the reader's position in the current order"},
    {"order_bytes_ahead", "bytes fetched for the order and not yet opened"},
    {"cache_used_bytes", "the SSD tier's use: chunk data and the index"},
    {"chunk_bytes", "of cache_used_bytes, chunk data"},
    {"index_bytes", "of cache_used_bytes, the index's files"},
    {"index_headroom_bytes", "room kept for the index to grow"},
    {"cache_capacity_bytes", "the bound given (--cache-size)"},
    {"cache_limit_bytes",
     "what the cache may hold now: the capacity, or less where the disk is "
     "filled by others"},
    {"objects", "file versions held in the cache"},
    {"chunks", "chunks held in the cache"},
    {"chunk_size", "the cache's chunk size"},
    {"objects_in_memory", "file versions the daemon keeps in memory"},
    {"pending_drops", "superseded versions waiting to be dropped"},
    {"verified_chunks_held", "chunks known good in this process"},
    {"recent_bytes", "memory held for reads to come"},
    {"recent_limit_bytes", "the bound of recent_bytes"},
    {"readahead_bytes", "of recent_bytes, read ahead of readers"},
    {"unstored_bytes", "of recent_bytes, chunks served and not yet stored"},
    {"produced_kept_bytes", "of recent_bytes, decoded-view bytes kept for their readers"},
    {"run_buffers_reused", "origin read buffers reused"},
    {"run_buffers_allocated", "origin read buffers allocated"},
    {"origin_unreachable", "1 while the origin cannot be reached"},
    {"origin_unreachable_episodes", "times the origin became unreachable"},
    {"hit_ratio", "cache_hit_bytes / bytes_read since the daemon started"},
    {"uptime_seconds", "the daemon's age"},
    {"fuse_opens", "opens the kernel sent the daemon"},
    {"node_files", "node handles held for the kernel's own opens (--opens kernel)"},
    {"nodes_retired", "nodes retired because their origin file changed"},
    {"listings_kept", "directory listings kept for the kernel"},
    {"kept_listings", "directory listings kept in the index (--revalidate never)"},
    {"group_members", "members of the cache group known (--peers), this one included"},
    {"group_members_skipped", "members left out for a while after failing a request"},
    {"group_peer_reads", "extent reads answered by another member"},
    {"group_peer_bytes", "bytes read from other members instead of the origin"},
    {"group_fallback_unreachable", "reads sent to the origin: a member did not answer in time"},
    {"group_fallback_refused", "reads sent to the origin: a member refused or answered wrongly"},
    {"group_fallback_busy", "reads sent to the origin: the owner stayed at its bound on reads"},
    {"group_fallback_version", "reads sent to the origin: the owner holds another version"},
    {"group_fallback_checksum",
     "reads sent to the origin: a member's bytes failed their checksums"},
    {"group_served_requests", "extent requests this member answered for others"},
    {"group_served_bytes", "bytes this member sent to others"},
    {"group_served_unauthorized", "requests refused for a missing or wrong token"},
    {"group_served_other_version", "requests for a version this member does not hold"},
    {"group_served_busy", "requests refused past the bound on reads in flight"},
    {"group_served_failed",
     "requests refused as malformed, or for bytes this member could not read"},
    {"kept_listing_bytes", "bytes of the directory listings kept in the index"},
    {"nodes_shed", "nodes the daemon asked the kernel to forget (--max-nodes)"},
    {"max_nodes", "the bound on nodes the kernel may hold (--max-nodes)"},
    {"open_files", "files open through the daemon"},
    {"open_dirs", "directories open through the daemon"},
    {"inodes", "nodes the kernel holds"},
    {"nodes_peak", "the most nodes the kernel held since the mount"},
    {"nodes_over_bound", "lookups that went past --max-nodes and its slack"},
    {"passthrough_opens", "opens the kernel reads directly from the SSD tier (passthrough)"},
    {"passthrough_bytes",
     "bytes of the files handed to the kernel by passthrough (at most what "
     "it read of them)"},
    {"passthrough_nodes", "nodes with a passthrough file now"},
    {"passthrough_idle", "passthrough files kept with no open"},
    {"view_layouts_computed", "decoded-view layouts computed from raw files"},
    {"view_layouts_loaded", "decoded-view layouts loaded from the cache"},
    {"view_images_checked", "images checked for a view's layout"},
    {"view_records_decoded", "TFRecord records decoded for views"},
    {"view_images_decoded", "images decoded for views (.npy)"},
    {"view_decoded_bytes", "bytes decoded for views"},
    {"view_errors", "view files that could not be made (.stoker/errors)"},
    {"view_failed_reads", "reads of view files that failed"},
    {"view_raw_bytes_read", "raw bytes read to make view files (in bytes_read)"},
    {"decode_queue_depth", "decode jobs queued"},
    {"decode_running", "decode jobs running"},
    {"decode_threads", "decode threads"},
    {"decode_images_per_second", "images decoded per second over the last 10 s"},
    {"decode_jobs_raised", "decode jobs raised to a waiting reader's priority"},
    {"decode_fallbacks", "images the GPU decoder handed to the CPU"},
    {"decode_fallbacks_unsupported", "of decode_fallbacks, in a form the GPU does not decode"},
    {"decode_fallbacks_rejected", "of decode_fallbacks, refused by the GPU decoder"},
    {"decode_fallbacks_no_memory", "of decode_fallbacks, for want of GPU memory"},
    {"decode_fallbacks_device_error", "of decode_fallbacks, after a device error"},
    {"gpu_batches", "batches decoded on the GPU"},
    {"gpu_images", "images decoded on the GPU"},
    {"gpu_failed", "images the GPU failed to decode"},
    {"gpu_largest_batch", "the largest GPU batch"},
};

// Not metrics (a process id, paths the info labels do not need).
const std::set<std::string_view> kSkipped = {"pid", "cache_dir", "control_socket", "fresh_start",
                                             "order_id"};

// The shortest text that reads back as v (0.6, not 0.59999999999999998).
std::string Number(double v) {
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string Number(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return Number(v.get<double>());
}

std::string LabelValue(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// Metric names take [a-zA-Z0-9_:].
std::string MetricName(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

// A HELP line's text: backslashes and newlines escaped.
std::string HelpText(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// "field: what it means" (the field alone where kHelp lacks it).
std::string FieldHelp(std::string_view field) {
  auto it = kHelp.find(field);
  return std::string(field) + (it == kHelp.end() ? "" : ": " + std::string(it->second));
}

// Samples grouped by metric family (the format wants each family's lines
// together, after its TYPE line), families in the order first seen.
class Writer {
 public:
  void Sample(const std::string& name, const char* type, std::string_view help,
              const std::string& suffix, const std::string& value) {
    auto [it, added] = index_.emplace(name, families_.size());
    if (added) {
      families_.push_back("# HELP " + name + " " + HelpText(help) + "\n# TYPE " + name + " " +
                          type + "\n");
    }
    families_[it->second] += name + suffix + " " + value + "\n";
  }
  std::string Take() const {
    std::string out;
    for (const std::string& f : families_) out += f;
    return out;
  }

 private:
  std::map<std::string, size_t> index_;
  std::vector<std::string> families_;
};

constexpr std::string_view kReadHelp =
    "read_latency_seconds: the daemon's reads, from the request to the reply";

void Histogram(Writer& w, const std::string& name, const nlohmann::json& h) {
  const nlohmann::json& le = h["le"];
  const nlohmann::json& counts = h["counts"];
  if (!le.is_array() || !counts.is_array() || counts.size() != le.size() + 1) return;
  uint64_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    total += counts[i].get<uint64_t>();
    const std::string bound = i < le.size() ? Number(le[i].get<double>()) : "+Inf";
    w.Sample(name, "histogram", kReadHelp, "_bucket{le=\"" + bound + "\"}", std::to_string(total));
  }
  w.Sample(name, "histogram", kReadHelp, "_sum", Number(h.value("sum_seconds", 0.0)));
  w.Sample(name, "histogram", kReadHelp, "_count", std::to_string(total));
}

}  // namespace

void LatencyHistogram::Add(std::chrono::nanoseconds took) {
  const double s = std::chrono::duration<double>(took).count();
  size_t i = 0;
  while (i < kBounds.size() && s > kBounds[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(took.count()), std::memory_order_relaxed);
}

nlohmann::json LatencyHistogram::Json() const {
  nlohmann::json counts = nlohmann::json::array();
  uint64_t n = 0;
  for (const auto& c : counts_) {
    counts.push_back(c.load(std::memory_order_relaxed));
    n += counts.back().get<uint64_t>();
  }
  return {{"le", kBounds},
          {"counts", counts},
          {"sum_seconds", static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9},
          {"count", n}};
}

std::string MetricsText(const nlohmann::json& stats) {
  Writer w;
  std::string info;
  for (const auto& [key, v] : stats.items()) {
    if (kSkipped.contains(key)) continue;
    if (kInfo.contains(key) && v.is_string()) {
      info += (info.empty() ? "" : ",") + key + "=\"" + LabelValue(v.get<std::string>()) + "\"";
      continue;
    }
    if (key == "read_latency_seconds" && v.is_object()) {
      Histogram(w, "stoker_read_duration_seconds", v);
      continue;
    }
    if (key == "passthrough_fallbacks" && v.is_object()) {
      for (const auto& [reason, n] : v.items()) {
        if (!n.is_number()) continue;
        w.Sample("stoker_passthrough_fallbacks_total", "counter",
                 "passthrough_fallbacks: opens read through the daemon instead of passthrough, "
                 "by reason",
                 "{reason=\"" + LabelValue(reason) + "\"}", Number(n));
      }
      continue;
    }
    if (key == "supervisor" && v.is_object()) {
      if (v.contains("restarts")) {
        w.Sample("stoker_daemon_restarts_total", "counter",
                 "supervisor.restarts: daemons the supervisor started after a crash", "",
                 Number(v["restarts"]));
      }
      continue;
    }
    if (!v.is_number() && !v.is_boolean()) continue;  // nested documents, other strings
    if (auto kind = kErrorKinds.find(key); kind != kErrorKinds.end()) {
      w.Sample("stoker_errors_total", "counter",
               "errors (kind read), origin_errors (origin), checksum_failures (checksum): errors "
               "answered to readers, failed origin calls, cached chunks found corrupt",
               "{kind=\"" + std::string(kind->second) + "\"}", Number(v));
      continue;
    }
    auto renamed = kRenames.find(key);
    const std::string base =
        "stoker_" + MetricName(renamed != kRenames.end() ? renamed->second : key);
    const bool gauge =
        kGauges.contains(key) || key.ends_with("_per_second") || key.ends_with("_seconds");
    if (gauge) {
      w.Sample(base, "gauge", FieldHelp(key), "", Number(v));
    } else {
      w.Sample(base + "_total", "counter", FieldHelp(key), "", Number(v));
    }
  }
  if (!info.empty()) {
    w.Sample("stoker_info", "gauge", "how the mount runs, as labels (always 1)", "{" + info + "}",
             "1");
  }
  return w.Take();
}

Result<sockaddr_in> ParseMetricsAddress(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status::Invalid("--metrics " + text + ": " + why);
  };
  const size_t colon = text.rfind(':');
  const std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  const std::string port = colon == std::string::npos ? text : text.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) == 0 ||
      std::stoul(port) > 65535) {
    return bad("expected HOST:PORT, :PORT or PORT, with a port from 1 to 65535");
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoul(port)));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!host.empty() && inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return bad("'" + host + "' is not an IPv4 address");
  }
  return a;
}

namespace {

MHD_Result Answer(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* /*upload_size*/,
                  void** /*req_cls*/) {
  const auto* server = static_cast<const MetricsServer*>(cls);
  unsigned code = MHD_HTTP_OK;
  std::string body;
  if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0) {
    code = MHD_HTTP_METHOD_NOT_ALLOWED;
    body = "GET /metrics\n";
  } else if (std::strcmp(url, "/metrics") != 0) {
    code = MHD_HTTP_NOT_FOUND;
    body = "stoker serves its metrics at /metrics\n";
  } else {
    body = server->Render();
  }
  MHD_Response* r =
      MHD_create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
  if (r == nullptr) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                          code == MHD_HTTP_OK ? "text/plain; version=0.0.4; charset=utf-8"
                                              : "text/plain; charset=utf-8");
  const MHD_Result ret = MHD_queue_response(connection, code, r);
  MHD_destroy_response(r);
  return ret;
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const sockaddr_in& addr,
                                                            std::function<nlohmann::json()> stats) {
  std::unique_ptr<MetricsServer> s(new MetricsServer(std::move(stats)));
  s->daemon_ = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, ntohs(addr.sin_port), nullptr,
                                nullptr, &Answer, s.get(), MHD_OPTION_SOCK_ADDR, &addr,
                                MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  if (s->daemon_ == nullptr) {
    return Status::Error(EADDRINUSE, "--metrics: cannot listen on " + AddressText(addr) +
                                         " (in use, or not an address of this host)");
  }
  return s;
}

std::string AddressText(const sockaddr_in& addr) {
  char host[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &addr.sin_addr, host, sizeof(host));
  return std::string(host) + ":" + std::to_string(ntohs(addr.sin_port));
}

MetricsServer::~MetricsServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace stoker
