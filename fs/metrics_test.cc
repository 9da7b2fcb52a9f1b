#include "fs/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <vector>

namespace stoker {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool Has(const std::string& text, const std::string& line) {
  for (const std::string& l : Lines(text)) {
    if (l == line) return true;
  }
  return false;
}

TEST(MetricsTest, CountersGaugesAndUnitsInNames) {
  nlohmann::json s = {{"bytes_read", 100},
                      {"cache_hit_bytes", 60},
                      {"origin_bytes_read", 40},
                      {"cache_used_bytes", 4096},
                      {"chunks", 3},
                      {"hit_ratio", 0.6},
                      {"uptime_seconds", 12},
                      {"decode_images_per_second", 410.5},
                      {"origin_unreachable", false},
                      {"pid", 42},
                      {"cache_dir", "/ssd/c"}};
  const std::string t = MetricsText(s);
  EXPECT_TRUE(Has(t, "# TYPE stoker_read_bytes_total counter")) << t;
  EXPECT_TRUE(Has(t, "stoker_read_bytes_total 100"));
  EXPECT_TRUE(Has(t, "stoker_cache_hit_bytes_total 60"));
  EXPECT_TRUE(Has(t, "stoker_origin_read_bytes_total 40"));
  EXPECT_TRUE(Has(t, "# TYPE stoker_cache_used_bytes gauge"));
  EXPECT_TRUE(Has(t, "stoker_cache_used_bytes 4096"));
  EXPECT_TRUE(Has(t, "stoker_cached_chunks 3"));
  EXPECT_TRUE(Has(t, "stoker_hit_ratio 0.6"));
  EXPECT_TRUE(Has(t, "stoker_uptime_seconds 12"));
  EXPECT_TRUE(Has(t, "stoker_decode_images_per_second 410.5"));
  EXPECT_TRUE(Has(t, "stoker_origin_unreachable 0"));
  EXPECT_EQ(t.find("pid"), std::string::npos);
  EXPECT_EQ(t.find("/ssd/c"), std::string::npos);
}

TEST(MetricsTest, LabelledFamiliesStayTogether) {
  nlohmann::json s = {{"errors", 1},
                      {"evicted_bytes", 5},
                      {"origin_errors", 2},
                      {"checksum_failures", 3},
                      {"passthrough_fallbacks", {{"slab", 4}, {"not_cached", 1}}},
                      {"supervisor", {{"pid", 9}, {"generation", 2}, {"restarts", 1}}},
                      {"origin", "local:/data/a \"b\""},
                      {"opens", "daemon"}};
  const std::string t = MetricsText(s);
  EXPECT_TRUE(Has(t, "stoker_errors_total{kind=\"read\"} 1")) << t;
  EXPECT_TRUE(Has(t, "stoker_errors_total{kind=\"origin\"} 2"));
  EXPECT_TRUE(Has(t, "stoker_errors_total{kind=\"checksum\"} 3"));
  EXPECT_TRUE(Has(t, "stoker_passthrough_fallbacks_total{reason=\"slab\"} 4"));
  EXPECT_TRUE(Has(t, "stoker_daemon_restarts_total 1"));
  EXPECT_TRUE(Has(t, "stoker_info{opens=\"daemon\",origin=\"local:/data/a \\\"b\\\"\"} 1"));
  // Each family once: its HELP line, its TYPE line, then its samples.
  std::set<std::string> closed;
  std::string current;
  std::string helped;
  for (const std::string& l : Lines(t)) {
    if (l.rfind("# HELP ", 0) == 0) {
      helped = l.substr(7, l.find(' ', 7) - 7);
      continue;
    }
    if (l.rfind("# TYPE ", 0) == 0) {
      std::string name = l.substr(7, l.find(' ', 7) - 7);
      EXPECT_TRUE(closed.insert(name).second) << "family " << name << " twice:\n" << t;
      EXPECT_EQ(helped, name) << "no HELP line right before the TYPE line of " << name;
      current = name;
      continue;
    }
    EXPECT_EQ(l.rfind(current, 0), 0u) << l << " outside its family:\n" << t;
  }
}

// Prometheus users read HELP; its text names the stats.json field the metric
// comes from (docs/operations.md lists the names that differ).
TEST(MetricsTest, EveryFamilyHasHelpNamingItsField) {
  nlohmann::json s = {{"bytes_read", 100},
                      {"chunks_not_cached", 6},
                      {"order_hits", 2},
                      {"errors", 1},
                      {"passthrough_fallbacks", {{"slab", 4}}},
                      {"supervisor", {{"restarts", 1}}},
                      {"read_latency_seconds", LatencyHistogram().Json()},
                      {"opens", "daemon"}};
  const std::string t = MetricsText(s);
  EXPECT_TRUE(Has(t,
                  "# HELP stoker_read_bytes_total bytes_read: bytes returned to readers by the "
                  "daemon (not the reads the kernel answers itself: page cache, passthrough)"))
      << t;
  EXPECT_TRUE(Has(t,
                  "# HELP stoker_chunks_not_cached_total chunks_not_cached: chunks served from "
                  "the origin without being cached: no room"));
  EXPECT_NE(t.find("# HELP stoker_order_hits_total order_hits: "), std::string::npos);
  EXPECT_NE(t.find("# HELP stoker_errors_total errors (kind read)"), std::string::npos);
  EXPECT_NE(t.find("# HELP stoker_passthrough_fallbacks_total passthrough_fallbacks: "),
            std::string::npos);
  EXPECT_NE(t.find("# HELP stoker_daemon_restarts_total supervisor.restarts: "), std::string::npos);
  EXPECT_NE(t.find("# HELP stoker_read_duration_seconds read_latency_seconds: "),
            std::string::npos);
  EXPECT_NE(t.find("# HELP stoker_info "), std::string::npos);
  size_t helps = 0, types = 0;
  for (const std::string& l : Lines(t)) {
    helps += l.rfind("# HELP ", 0) == 0;
    types += l.rfind("# TYPE ", 0) == 0;
  }
  EXPECT_EQ(helps, types) << t;
}

TEST(MetricsTest, ReadLatencyIsAHistogram) {
  LatencyHistogram h;
  h.Add(std::chrono::microseconds(30));
  h.Add(std::chrono::microseconds(70));
  h.Add(std::chrono::milliseconds(3));
  h.Add(std::chrono::seconds(5));
  nlohmann::json j = h.Json();
  EXPECT_EQ(j["count"], 4);
  const std::string t = MetricsText({{"read_latency_seconds", j}});
  EXPECT_TRUE(Has(t, "# TYPE stoker_read_duration_seconds histogram")) << t;
  EXPECT_TRUE(Has(t, "stoker_read_duration_seconds_bucket{le=\"5e-05\"} 1"));
  EXPECT_TRUE(Has(t, "stoker_read_duration_seconds_bucket{le=\"0.0001\"} 2"));
  EXPECT_TRUE(Has(t, "stoker_read_duration_seconds_bucket{le=\"0.005\"} 3"));
  EXPECT_TRUE(Has(t, "stoker_read_duration_seconds_bucket{le=\"2.5\"} 3"));
  EXPECT_TRUE(Has(t, "stoker_read_duration_seconds_bucket{le=\"+Inf\"} 4"));
  EXPECT_TRUE(Has(t, "stoker_read_duration_seconds_count 4"));
  EXPECT_TRUE(Has(t, "stoker_read_duration_seconds_sum 5.0031")) << t;
}

TEST(MetricsTest, AddressesDefaultToLoopback) {
  auto port_of = [](const sockaddr_in& a) { return ntohs(a.sin_port); };
  Result<sockaddr_in> a = ParseMetricsAddress("9100");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(port_of(*a), 9100);
  EXPECT_EQ(ntohl(a->sin_addr.s_addr), INADDR_LOOPBACK);
  a = ParseMetricsAddress(":9101");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(port_of(*a), 9101);
  EXPECT_EQ(ntohl(a->sin_addr.s_addr), INADDR_LOOPBACK);
  a = ParseMetricsAddress("0.0.0.0:9102");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->sin_addr.s_addr, htonl(INADDR_ANY));
  for (const char* bad : {"", "x", ":", ":0", ":65536", "1.2.3:80", "localhost:9100", "9100:"}) {
    Result<sockaddr_in> r = ParseMetricsAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_NE(r.status().message().find("--metrics"), std::string::npos);
  }
}

// A free loopback port (bound and released).
uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

std::string Get(uint16_t port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  EXPECT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(MetricsTest, ServerAnswersMetricsOnly) {
  const uint16_t port = FreePort();
  Result<sockaddr_in> addr = ParseMetricsAddress(std::to_string(port));
  ASSERT_TRUE(addr.ok());
  int calls = 0;
  auto server = MetricsServer::Start(*addr, [&calls] {
    ++calls;
    return nlohmann::json{{"bytes_read", calls}};
  });
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::string r = Get(port, "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("text/plain; version=0.0.4"), std::string::npos) << r;
  EXPECT_NE(r.find("stoker_read_bytes_total 1\n"), std::string::npos) << r;
  EXPECT_NE(Get(port, "/metrics").find("stoker_read_bytes_total 2\n"), std::string::npos);
  EXPECT_EQ(Get(port, "/").rfind("HTTP/1.1 404", 0), 0u);
  // A second server on the same address: one line, not a crash.
  auto again = MetricsServer::Start(*addr, [] { return nlohmann::json::object(); });
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("cannot listen"), std::string::npos);
  server->reset();
  EXPECT_EQ(Get(port, "/metrics"), "");  // stopped
}

}  // namespace
}  // namespace stoker
