// Metrics for Prometheus: a mount's stats.json as the Prometheus text
// exposition format (version 0.0.4), served by the daemon at
// http://ADDR:PORT/metrics (--metrics) and printed by `stoker stat
// --prometheus` for node_exporter's textfile collector. Names carry their
// units and counters end in _total (prometheus.io/docs/practices/naming).
//
// Thread-safety: LatencyHistogram is safe from any thread; MetricsServer
// calls its stats source from its own thread.
#pragma once

#include <netinet/in.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "util/status.h"

struct MHD_Daemon;

namespace stoker {

// How long requests took: counts per bucket, lock-free.
class LatencyHistogram {
 public:
  // Upper bounds of the buckets, seconds; a last one takes the rest.
  static constexpr std::array<double, 14> kBounds = {50e-6,  100e-6, 250e-6, 500e-6, 1e-3,
                                                     2.5e-3, 5e-3,   10e-3,  25e-3,  50e-3,
                                                     100e-3, 250e-3, 1,      2.5};

  void Add(std::chrono::nanoseconds took);
  // {"le": [bounds], "counts": [per bucket, the last above every bound],
  //  "sum_seconds": total, "count": n}
  nlohmann::json Json() const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

// The text exposition of stats (a stats.json document).
std::string MetricsText(const nlohmann::json& stats);

// Where --metrics listens: "HOST:PORT" with an IPv4 address, or ":PORT" or
// "PORT" for the loopback address.
Result<sockaddr_in> ParseMetricsAddress(const std::string& text);

// "HOST:PORT" of addr.
std::string AddressText(const sockaddr_in& addr);

// GET /metrics over HTTP (libmicrohttpd, one thread of its own).
class MetricsServer {
 public:
  static Result<std::unique_ptr<MetricsServer>> Start(const sockaddr_in& addr,
                                                      std::function<nlohmann::json()> stats);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Called by libmicrohttpd's thread: the exposition of the stats now.
  std::string Render() const { return MetricsText(stats_()); }

 private:
  explicit MetricsServer(std::function<nlohmann::json()> stats) : stats_(std::move(stats)) {}
  const std::function<nlohmann::json()> stats_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace stoker
