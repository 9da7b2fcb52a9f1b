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
                                            "order_bytes_ahead"};

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
    "origin", "opens", "passthrough", "io_backend", "origin_io_backend", "mountpoint", "decoder"};

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

// Samples grouped by metric family (the format wants each family's lines
// together, after its TYPE line), families in the order first seen.
class Writer {
 public:
  void Sample(const std::string& name, const char* type, const std::string& suffix,
              const std::string& value) {
    auto [it, added] = index_.emplace(name, families_.size());
    if (added) families_.push_back({"# TYPE " + name + " " + type + "\n"});
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

void Histogram(Writer& w, const std::string& name, const nlohmann::json& h) {
  const nlohmann::json& le = h["le"];
  const nlohmann::json& counts = h["counts"];
  if (!le.is_array() || !counts.is_array() || counts.size() != le.size() + 1) return;
  uint64_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    total += counts[i].get<uint64_t>();
    const std::string bound = i < le.size() ? Number(le[i].get<double>()) : "+Inf";
    w.Sample(name, "histogram", "_bucket{le=\"" + bound + "\"}", std::to_string(total));
  }
  w.Sample(name, "histogram", "_sum", Number(h.value("sum_seconds", 0.0)));
  w.Sample(name, "histogram", "_count", std::to_string(total));
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
                 "{reason=\"" + LabelValue(reason) + "\"}", Number(n));
      }
      continue;
    }
    if (key == "supervisor" && v.is_object()) {
      if (v.contains("restarts")) {
        w.Sample("stoker_daemon_restarts_total", "counter", "", Number(v["restarts"]));
      }
      continue;
    }
    if (!v.is_number() && !v.is_boolean()) continue;  // nested documents, other strings
    if (auto kind = kErrorKinds.find(key); kind != kErrorKinds.end()) {
      w.Sample("stoker_errors_total", "counter", "{kind=\"" + std::string(kind->second) + "\"}",
               Number(v));
      continue;
    }
    auto renamed = kRenames.find(key);
    const std::string base =
        "stoker_" + MetricName(renamed != kRenames.end() ? renamed->second : key);
    const bool gauge =
        kGauges.contains(key) || key.ends_with("_per_second") || key.ends_with("_seconds");
    if (gauge) {
      w.Sample(base, "gauge", "", Number(v));
    } else {
      w.Sample(base + "_total", "counter", "", Number(v));
    }
  }
  if (!info.empty()) w.Sample("stoker_info", "gauge", "{" + info + "}", "1");
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
