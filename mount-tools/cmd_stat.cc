// `stoker stat`: what the daemon of a mount thinks, from its stats.json,
// either as the JSON itself or as a table for people; `--watch` redraws the
// table with the rates since the last refresh until Ctrl-C, --count
// refreshes, or the mount goes away.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "fs/metrics.h"
#include "mount-tools/commands.h"
#include "mount-tools/mount_root.h"
#include "util/size.h"

namespace stoker {
namespace {

std::optional<uint64_t> Count(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer()) {
    int64_t v = it->get<int64_t>();
    return v < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(v));
  }
  if (it->is_number_float()) {
    double v = it->get<double>();
    return v < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(std::llround(v)));
  }
  return std::nullopt;
}

std::string Text(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

std::string Number(const nlohmann::json& j, const char* key) {
  auto v = Count(j, key);
  return v ? std::to_string(*v) : "-";
}

std::string Size(const nlohmann::json& j, const char* key) {
  auto v = Count(j, key);
  return v ? FormatSize(*v) : "-";
}

std::string Percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * part / whole);
  return buf;
}

std::string Percent(uint64_t part, uint64_t whole) {
  return Percent(static_cast<double>(part), static_cast<double>(whole));
}

std::atomic<bool> g_stop_watching{false};

// Redraws the table every interval seconds, with the rates since the last
// refresh, until Ctrl-C (exit 0), count refreshes (0: no end) or the mount
// goes away (exit 1).
int Watch(const std::string& root, double interval, uint64_t count) {
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop_watching = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = isatty(STDOUT_FILENO) != 0;
  nlohmann::json before;
  auto before_at = std::chrono::steady_clock::now();
  for (uint64_t n = 0; count == 0 || n < count; ++n) {
    auto stats = ReadStatsFile(root);
    if (!stats.ok()) {
      PrintError("the mount at '" + root + "' went away: " + stats.status().message());
      return kExitFailure;
    }
    const auto now = std::chrono::steady_clock::now();
    std::string text = FormatStats(stats->json);
    text += n == 0 ? std::string("rates  after the next refresh\n")
                   : FormatRates(before, stats->json,
                                 std::chrono::duration<double>(now - before_at).count());
    // On a terminal the table is redrawn in place (cursor home, clear).
    std::printf("%s%s%s", tty ? "\033[H\033[2J" : "", text.c_str(), tty ? "" : "\n");
    std::fflush(stdout);
    before = std::move(stats->json);
    before_at = now;
    if (count != 0 && n + 1 == count) break;
    const auto until = now + std::chrono::duration<double>(interval);
    while (!g_stop_watching && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (g_stop_watching) break;
  }
  return kExitOk;
}

int RunStat(const std::string& path, bool json, bool prometheus, std::optional<double> watch,
            uint64_t count) {
  auto root = FindMountRoot(path);
  if (!root.ok()) {
    PrintError(root.status().message());
    return kExitFailure;
  }
  if (watch) return Watch(*root, *watch, count);
  auto stats = ReadStatsFile(*root);
  if (!stats.ok()) {
    PrintError(stats.status().message());
    return kExitFailure;
  }
  if (json) {
    std::fputs(stats->text.c_str(), stdout);
    if (stats->text.empty() || stats->text.back() != '\n') std::fputc('\n', stdout);
  } else if (prometheus) {
    std::fputs(MetricsText(stats->json).c_str(), stdout);
  } else {
    std::fputs(FormatStats(stats->json).c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace

std::string FormatRates(const nlohmann::json& before, const nlohmann::json& now, double seconds) {
  if (seconds <= 0) return "rates  -\n";
  // A counter that went back (a restarted daemon) starts again from 0.
  auto rate = [&](const char* key) {
    const uint64_t b = Count(before, key).value_or(0), n = Count(now, key).value_or(0);
    return static_cast<double>(n >= b ? n - b : n) / seconds;
  };
  auto bytes = [&](const char* key) {
    return FormatSize(static_cast<uint64_t>(std::llround(rate(key)))) + "/s";
  };
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f", seconds);
  const double read = rate("bytes_read"), hit = rate("cache_hit_bytes");
  std::string out = "rates  over the last " + std::string(secs) + " s: read " +
                    bytes("bytes_read") + " (" + (read > 0 ? Percent(hit, read) : "-") +
                    " hits), origin " + bytes("origin_bytes_read") + ", evicted " +
                    bytes("evicted_bytes");
  if (now.contains("passthrough_bytes")) out += ", passthrough files " + bytes("passthrough_bytes");
  if (now.contains("warm_bytes")) out += ", warm " + bytes("warm_bytes");
  if (now.contains("view_images_decoded")) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", rate("view_images_decoded"));
    out += ", " + std::string(buf) + " images/s decoded";
  }
  return out + "\n";
}

std::string FormatStats(const nlohmann::json& s) {
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("mountpoint", Text(s, "mountpoint"));
  rows.emplace_back("origin", Text(s, "origin"));
  rows.emplace_back("cache dir", Text(s, "cache_dir"));
  if (s.contains("fresh_start") && s["fresh_start"].is_string() &&
      !s["fresh_start"].get<std::string>().empty()) {
    rows.emplace_back("started empty", s["fresh_start"].get<std::string>());
  }

  auto used = Count(s, "cache_used_bytes");
  auto cap = Count(s, "cache_capacity_bytes");
  std::string usage = Size(s, "cache_used_bytes") + " of " + Size(s, "cache_capacity_bytes");
  if (used && cap && *cap > 0) usage += " (" + Percent(*used, *cap) + ")";
  rows.emplace_back("cache used", usage);
  // A disk smaller than the capacity, or filled by others, holds less.
  if (auto limit = Count(s, "cache_limit_bytes"); limit && cap && *limit < *cap) {
    rows.emplace_back("disk allows", Size(s, "cache_limit_bytes") + " (less than the capacity)");
  }
  rows.emplace_back("objects", Number(s, "objects"));
  rows.emplace_back("chunks", Number(s, "chunks"));

  rows.emplace_back("bytes read", Size(s, "bytes_read"));
  rows.emplace_back("hit bytes", Size(s, "cache_hit_bytes"));
  auto read = Count(s, "bytes_read");
  auto hit = Count(s, "cache_hit_bytes");
  // Reads the kernel answers from its page cache, or from a file passthrough
  // handed it, never reach the daemon: the ratio is of the others only.
  std::string ratio = (read && hit && *read > 0 ? Percent(*hit, *read) : "-") +
                      " of the reads that reached the daemon";
  if (auto pt = Count(s, "passthrough_bytes"); pt && *pt > 0) {
    ratio += "; files of " + FormatSize(*pt) +
             " handed to the kernel by passthrough (at most what it read of them)";
  }
  rows.emplace_back("hit ratio", ratio);
  rows.emplace_back("origin bytes", Size(s, "origin_bytes_read"));
  rows.emplace_back("evicted", Size(s, "evicted_bytes"));
  if (s.contains("chunks_not_cached")) {
    rows.emplace_back("chunks not cached",
                      Number(s, "chunks_not_cached") + " (served from the origin: no room)");
  }
  rows.emplace_back("revalidations", Number(s, "revalidations"));
  rows.emplace_back("origin changes", Number(s, "origin_changes"));
  rows.emplace_back("checksum fails", Number(s, "checksum_failures"));
  std::string errors = Number(s, "errors");
  if (auto oe = Count(s, "origin_errors"); oe && *oe > 0) {
    errors += " (" + std::to_string(*oe) + " origin errors)";
  }
  rows.emplace_back("errors", errors);

  auto queued = Count(s, "warm_files_queued");
  auto done = Count(s, "warm_files_done");
  std::string warm = "-";
  if (queued && *queued == 0) {
    warm = "nothing queued";
  } else if (queued) {
    warm = (done ? std::to_string(*done) : "?") + " of " + std::to_string(*queued) +
           " files done, " + Size(s, "warm_bytes") + " fetched";
  }
  rows.emplace_back("warm", warm);
  // docs/prefetch-order.md: the fields by their names, once an order was set.
  if (auto orders = Count(s, "orders_set"); orders && *orders > 0) {
    for (const char* f :
         {"orders_set", "order_files", "order_position", "order_bytes_ahead",
          "order_prefetched_files", "order_hits", "order_cancelled", "order_not_fetched"}) {
      std::string label = f;
      std::replace(label.begin(), label.end(), '_', ' ');
      rows.emplace_back(label,
                        std::string_view(f).ends_with("_bytes_ahead") ? Size(s, f) : Number(s, f));
    }
  } else if (orders) {
    rows.emplace_back("orders set", "0 (stoker order)");
  }
  rows.emplace_back("io backend", Text(s, "io_backend"));
  if (s.contains("passthrough")) {
    // Opens the kernel reads straight from the cache's SSD, and why others
    // go through the daemon.
    std::string pt = Text(s, "passthrough") + ", " + Number(s, "passthrough_opens") + " opens";
    if (s.contains("passthrough_bytes")) pt += " of " + Size(s, "passthrough_bytes");
    if (auto f = s.find("passthrough_fallbacks"); f != s.end() && f->is_object() && !f->empty()) {
      std::vector<std::pair<uint64_t, std::string>> by_count;
      for (const auto& [reason, n] : f->items()) {
        by_count.emplace_back(n.is_number_integer() ? n.get<uint64_t>() : 0, reason);
      }
      std::sort(by_count.rbegin(), by_count.rend());
      std::string list;
      for (const auto& [n, reason] : by_count) {
        list += (list.empty() ? "" : ", ") + reason + " " + std::to_string(n);
      }
      pt += "; through the daemon: " + list;
    }
    rows.emplace_back("passthrough", pt);
  }
  if (s.value("opens", "") == "kernel") {
    // docs/opens.md: the kernel opens files by itself.
    std::string row = "by the kernel; " + Number(s, "node_files") + " node handles, " +
                      Number(s, "nodes_retired") + " nodes retired by a change";
    if (auto d = s.find("opens_decision"); d != s.end() && d->is_object()) {
      row += "; --opens auto moved there after " + Number(*d, "after_opens") +
             " opens: " + d->value("why", "");
    }
    rows.emplace_back("opens", row);
  } else if (s.value("opens_asked", "") == "auto") {
    rows.emplace_back("opens",
                      "by the daemon (--opens auto: the kernel's once most opens are of "
                      "small files)");
  }
  if (s.contains("group")) {
    // docs/kubernetes.md: a cache group.
    const uint64_t fallbacks = Count(s, "group_fallback_unreachable").value_or(0) +
                               Count(s, "group_fallback_refused").value_or(0) +
                               Count(s, "group_fallback_busy").value_or(0) +
                               Count(s, "group_fallback_version").value_or(0) +
                               Count(s, "group_fallback_checksum").value_or(0);
    rows.emplace_back("cache group", Text(s, "group") + ": " + Number(s, "group_members") +
                                         " members (" + Number(s, "group_members_skipped") +
                                         " skipped), this one " + Text(s, "group_self"));
    rows.emplace_back("from members", Size(s, "group_peer_bytes") + " in " +
                                          Number(s, "group_peer_reads") + " reads; " +
                                          std::to_string(fallbacks) +
                                          " reads went to the origin instead");
    rows.emplace_back("to members", Size(s, "group_served_bytes") + " in " +
                                        Number(s, "group_served_requests") + " requests");
  }
  if (auto sup = s.find("supervisor"); sup != s.end() && sup->is_object()) {
    rows.emplace_back("supervisor", "pid " + Number(*sup, "pid") + ", daemon pid " +
                                        Number(s, "pid") + ", " + Number(*sup, "restarts") +
                                        " restarts after a crash");
  } else {
    rows.emplace_back("supervisor", "none (a daemon crash ends the mount)");
  }
  if (s.contains("views")) {
    std::string names;
    for (const auto& v : s["views"]) {
      if (!names.empty()) names += ", ";
      names += v.is_string() ? v.get<std::string>() : "?";
      if (auto d = s.find("view_decoders");
          v.is_string() && d != s.end() && d->contains(v.get<std::string>())) {
        names += " [" + (*d)[v.get<std::string>()].get<std::string>() + "]";
      }
    }
    rows.emplace_back("views", names.empty() ? "-" : names);
    if (s.contains("decoder")) {
      std::string d = Text(s, "decoder") + " (" + Text(s, "decoder_reason") + ")";
      // --decoder=auto found no GPU: why, and that the cpu decodes.
      constexpr std::string_view kNoGpu = "--decoder=auto: no GPU decoder: ";
      if (const std::string why = Text(s, "decoder_reason");
          Text(s, "decoder") == "cpu" && why.starts_with(kNoGpu)) {
        d = why.substr(kNoGpu.size()) + "; decoding on the CPU (--decoder=auto)";
      }
      if (s.contains("gpu_batches")) {
        d += "; " + Number(s, "gpu_images") + " images in " + Number(s, "gpu_batches") +
             " batches, " + Number(s, "decode_fallbacks") + " fell back to the cpu";
        const auto& b = s.contains("gpu_backend") ? s["gpu_backend"] : nlohmann::json::object();
        if (b.value("context_broken", false)) {
          d += "; the GPU's CUDA context is broken: every image goes to the cpu until a remount";
        }
      }
      rows.emplace_back("decoder", d);
    }
    rows.emplace_back("view records", Number(s, "view_records_decoded") + " decoded, " +
                                          Number(s, "view_images_decoded") + " images (.npy), " +
                                          Size(s, "view_decoded_bytes"));
    rows.emplace_back("view layouts", Number(s, "view_layouts_computed") + " computed, " +
                                          Number(s, "view_layouts_loaded") + " loaded");
    rows.emplace_back("view raw reads", Size(s, "view_raw_bytes_read") + " (in bytes read)");
    rows.emplace_back("view bytes made",
                      Size(s, "derived_bytes_produced") + " (cached, not origin)");
    rows.emplace_back("view errors", Number(s, "view_errors") + " (" +
                                         Number(s, "view_failed_reads") +
                                         " failed reads; see .stoker/errors)");
    std::string rate = "-";
    if (auto it = s.find("decode_images_per_second"); it != s.end() && it->is_number()) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f", it->get<double>());
      rate = buf;
    }
    rows.emplace_back("decode queue", Number(s, "decode_queue_depth") + " queued, " +
                                          Number(s, "decode_running") + " running on " +
                                          Number(s, "decode_threads") + " threads, " + rate +
                                          " images/s (last 10 s)");
  }

  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  std::string out;
  for (const auto& r : rows) {
    out += r.first + std::string(width + 2 - r.first.size(), ' ') + r.second + "\n";
  }
  return out;
}

Subcommand AddStatCommand(CLI::App& root) {
  struct Args {
    std::string path;
    bool json = false;
    bool prometheus = false;
    double watch = 0;
    uint64_t count = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand("stat", "Show a mount's cache statistics");
  app->add_option("MOUNTPOINT", args->path, "The mount, or any path under it")->required();
  app->add_flag("--json", args->json, "Print MOUNTPOINT/.stoker/stats.json as it is");
  app->add_flag("--prometheus", args->prometheus,
                "Print the metrics the daemon serves with --metrics, in Prometheus's text format "
                "(for node_exporter's textfile collector)")
      ->excludes("--json");
  CLI::Option* watch =
      app->add_option("--watch", args->watch,
                      "Redraw the table every SECONDS (default 2), with the rates since the last "
                      "refresh, until Ctrl-C or the mount goes away")
          ->expected(0, 1)
          ->default_str("2")
          ->check(CLI::Range(0.1, 3600.0))
          ->excludes("--json")
          ->excludes("--prometheus");
  app->add_option("--count", args->count, "With --watch: stop after N refreshes")
      ->needs(watch)
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  return {app, [args, watch] {
            std::optional<double> every;
            if (watch->count() > 0) every = args->watch;
            return RunStat(args->path, args->json, args->prometheus, every, args->count);
          }};
}

}  // namespace stoker
