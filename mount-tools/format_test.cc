// What stat, fsck and warm print and send.
#include <gtest/gtest.h>

#include "mount-tools/commands.h"

namespace stoker {
namespace {

// The value printed on the row labelled label ("" if there is none).
std::string Row(const std::string& table, const std::string& label) {
  size_t pos = 0;
  while (pos < table.size()) {
    size_t end = table.find('\n', pos);
    std::string line = table.substr(pos, end - pos);
    if (line.rfind(label + "  ", 0) == 0) {
      size_t v = line.find_first_not_of(' ', label.size());
      return line.substr(v);
    }
    pos = end + 1;
  }
  return "";
}

TEST(FormatStats, PrintsEveryRowForPeople) {
  nlohmann::json s = {{"origin", "local:/nas/data"},
                      {"cache_dir", "/ssd/c"},
                      {"cache_used_bytes", 512ull << 20},
                      {"cache_capacity_bytes", 2ull << 30},
                      {"objects", 12},
                      {"chunks", 80},
                      {"bytes_read", 200ull << 20},
                      {"cache_hit_bytes", 150ull << 20},
                      {"origin_bytes_read", 50ull << 20},
                      {"evicted_bytes", 0},
                      {"revalidations", 7},
                      {"origin_changes", 1},
                      {"checksum_failures", 2},
                      {"errors", 3},
                      {"origin_errors", 3},
                      {"warm_files_queued", 5},
                      {"warm_files_done", 3},
                      {"warm_bytes", 12ull << 20},
                      {"io_backend", "io_uring"}};
  std::string t = FormatStats(s);
  EXPECT_EQ(Row(t, "origin"), "local:/nas/data");
  EXPECT_EQ(Row(t, "cache dir"), "/ssd/c");
  EXPECT_EQ(Row(t, "cache used"), "512 MiB of 2.00 GiB (25.0%)");
  EXPECT_EQ(Row(t, "disk allows"), "");
  s["cache_limit_bytes"] = 2ull << 30;
  EXPECT_EQ(Row(FormatStats(s), "disk allows"), "") << "shown only below capacity";
  s["cache_limit_bytes"] = 600ull << 20;
  EXPECT_EQ(Row(FormatStats(s), "disk allows"), "600 MiB (less than the capacity)");
  EXPECT_EQ(Row(t, "objects"), "12");
  EXPECT_EQ(Row(t, "chunks"), "80");
  EXPECT_EQ(Row(t, "bytes read"), "200 MiB");
  EXPECT_EQ(Row(t, "hit bytes"), "150 MiB");
  EXPECT_EQ(Row(t, "hit ratio"), "75.0% of the reads that reached the daemon");
  EXPECT_EQ(Row(t, "chunks not cached"), "") << "only where stats.json has it";
  EXPECT_EQ(Row(t, "origin bytes"), "50.0 MiB");
  EXPECT_EQ(Row(t, "evicted"), "0 B");
  EXPECT_EQ(Row(t, "revalidations"), "7");
  EXPECT_EQ(Row(t, "origin changes"), "1");
  EXPECT_EQ(Row(t, "checksum fails"), "2");
  EXPECT_EQ(Row(t, "errors"), "3 (3 origin errors)");
  EXPECT_EQ(Row(t, "warm"), "3 of 5 files done, 12.0 MiB fetched");
  EXPECT_EQ(Row(t, "io backend"), "io_uring");
}

TEST(FormatStats, SupervisorRow) {
  nlohmann::json s = {{"pid", 42},
                      {"supervisor", {{"pid", 41}, {"generation", 3}, {"restarts", 2}}}};
  EXPECT_EQ(Row(FormatStats(s), "supervisor"), "pid 41, daemon pid 42, 2 restarts after a crash");
  EXPECT_EQ(Row(FormatStats(nlohmann::json::object()), "supervisor"),
            "none (a daemon crash ends the mount)");
}

TEST(FormatStats, PassthroughRowListsFallbacksMostFirst) {
  EXPECT_EQ(Row(FormatStats(nlohmann::json::object()), "passthrough"), "");
  nlohmann::json s = {{"passthrough", "on"},
                      {"passthrough_opens", 900},
                      {"passthrough_bytes", 3ull << 30},
                      {"passthrough_fallbacks", {{"slab", 40}, {"not_cached", 120}}}};
  EXPECT_EQ(Row(FormatStats(s), "passthrough"),
            "on, 900 opens of 3.00 GiB; through the daemon: not_cached 120, slab 40");
  s = {{"passthrough", "off: no_cap_sys_admin"}, {"passthrough_opens", 0}};
  EXPECT_EQ(Row(FormatStats(s), "passthrough"), "off: no_cap_sys_admin, 0 opens");
  EXPECT_EQ(Row(FormatStats(s), "opens"), "");
  s = {{"opens", "kernel"}, {"node_files", 120}, {"nodes_retired", 2}};
  EXPECT_EQ(Row(FormatStats(s), "opens"),
            "by the kernel; 120 node handles, 2 nodes retired by a change");
  s = {{"opens", "daemon"}, {"opens_asked", "auto"}};
  EXPECT_EQ(Row(FormatStats(s), "opens"),
            "by the daemon (--opens auto: the kernel's once most opens are of small files)");
  s = {{"opens", "kernel"},
       {"opens_asked", "auto"},
       {"node_files", 3},
       {"nodes_retired", 0},
       {"opens_decision", {{"after_opens", 1000}, {"why", "950 of the last 1000 opens ..."}}}};
  EXPECT_EQ(Row(FormatStats(s), "opens"),
            "by the kernel; 3 node handles, 0 nodes retired by a change; --opens auto moved "
            "there after 1000 opens: 950 of the last 1000 opens ...");
}

TEST(FormatStats, ViewRowsOnlyWithViews) {
  EXPECT_EQ(Row(FormatStats(nlohmann::json::object()), "views"), "");
  nlohmann::json s = {{"views", {"decoded", "small"}},
                      {"view_records_decoded", 1200},
                      {"view_images_decoded", 30},
                      {"view_decoded_bytes", 3ull << 30},
                      {"view_layouts_computed", 4},
                      {"view_layouts_loaded", 2},
                      {"view_errors", 3},
                      {"view_failed_reads", 1},
                      {"decode_queue_depth", 17},
                      {"decode_running", 2},
                      {"decode_threads", 2},
                      {"decode_images_per_second", 812.25},
                      {"view_raw_bytes_read", 5ull << 20},
                      {"derived_bytes_produced", 7ull << 20}};
  std::string t = FormatStats(s);
  EXPECT_EQ(Row(t, "views"), "decoded, small");
  EXPECT_EQ(Row(t, "view records"), "1200 decoded, 30 images (.npy), 3.00 GiB");
  EXPECT_EQ(Row(t, "view layouts"), "4 computed, 2 loaded");
  EXPECT_EQ(Row(t, "view raw reads"), "5.00 MiB (in bytes read)");
  EXPECT_EQ(Row(t, "view bytes made"), "7.00 MiB (cached, not origin)");
  EXPECT_EQ(Row(t, "view errors"), "3 (1 failed reads; see .stoker/errors)");
  EXPECT_EQ(Row(t, "decode queue"),
            "17 queued, 2 running on 2 threads, 812.2 images/s (last 10 s)");
}

TEST(FormatStats, GroupRowsOnlyInAGroup) {
  EXPECT_EQ(Row(FormatStats(nlohmann::json::object()), "cache group"), "");
  nlohmann::json s = {{"group", "g1"},
                      {"group_self", "10.0.0.1:7070"},
                      {"group_members", 4},
                      {"group_members_skipped", 1},
                      {"group_peer_reads", 12},
                      {"group_peer_bytes", 3ull << 30},
                      {"group_fallback_unreachable", 2},
                      {"group_fallback_version", 1},
                      {"group_served_requests", 7},
                      {"group_served_bytes", 5ull << 20}};
  std::string t = FormatStats(s);
  EXPECT_EQ(Row(t, "cache group"), "g1: 4 members (1 skipped), this one 10.0.0.1:7070");
  EXPECT_EQ(Row(t, "from members"), "3.00 GiB in 12 reads; 3 reads went to the origin instead");
  EXPECT_EQ(Row(t, "to members"), "5.00 MiB in 7 requests");
}

TEST(FormatStats, DecoderRowAndEachViewsDecoder) {
  nlohmann::json s = {{"views", {"g", "c"}},
                      {"view_decoders",
                       {{"g", "nvjpeg 13.3.2 hardware, fallback libjpeg-turbo 2.1.5"},
                        {"c", "libjpeg-turbo 2.1.5"}}},
                      {"decoder", "gpu"},
                      {"decoder_reason", "--decoder=auto: nvjpeg 13.3.2 hardware"},
                      {"gpu_batches", 10},
                      {"gpu_images", 600},
                      {"decode_fallbacks", 3}};
  std::string t = FormatStats(s);
  EXPECT_EQ(Row(t, "views"),
            "g [nvjpeg 13.3.2 hardware, fallback libjpeg-turbo 2.1.5], c [libjpeg-turbo 2.1.5]");
  EXPECT_EQ(Row(t, "decoder"),
            "gpu (--decoder=auto: nvjpeg 13.3.2 hardware); 600 images in 10 batches, 3 fell back "
            "to the cpu");
  s["gpu_backend"] = {{"context_broken", true}};
  EXPECT_EQ(Row(FormatStats(s), "decoder"),
            "gpu (--decoder=auto: nvjpeg 13.3.2 hardware); 600 images in 10 batches, 3 fell back "
            "to the cpu; the GPU's CUDA context is broken: every image goes to the cpu until a "
            "remount");
  s["decoder"] = "cpu";
  s["decoder_reason"] = "--decoder=cpu";
  s.erase("gpu_batches");
  EXPECT_EQ(Row(FormatStats(s), "decoder"), "cpu (--decoder=cpu)");
}

// Issue 30: a hit ratio of 0% after reading a file twice looked broken: the
// second read never reached the daemon.
TEST(FormatStats, SaysWhatTheHitRatioCountsAndWhatPassthroughHandedOver) {
  nlohmann::json s = {{"mountpoint", "/mnt/data"}, {"bytes_read", 0},
                      {"cache_hit_bytes", 0},      {"passthrough", "on"},
                      {"passthrough_opens", 2},    {"passthrough_bytes", 6ull << 20},
                      {"chunks_not_cached", 6}};
  const std::string t = FormatStats(s);
  EXPECT_EQ(Row(t, "mountpoint"), "/mnt/data");
  EXPECT_EQ(Row(t, "hit ratio"),
            "- of the reads that reached the daemon; files of 6.00 MiB handed to the kernel by "
            "passthrough (at most what it read of them)");
  EXPECT_EQ(Row(t, "chunks not cached"), "6 (served from the origin: no room)");
}

TEST(FormatStats, OrderRowsNameTheirFieldsOnceAnOrderWasSet) {
  nlohmann::json s = {{"orders_set", 0}, {"order_files", 0}};
  EXPECT_EQ(Row(FormatStats(s), "orders set"), "0 (stoker order)");
  EXPECT_EQ(Row(FormatStats(s), "order files"), "");
  s = {{"orders_set", 1},
       {"order_files", 10},
       {"order_position", 3},
       {"order_bytes_ahead", 4ull << 20},
       {"order_prefetched_files", 5},
       {"order_hits", 2},
       {"order_cancelled", 0},
       {"order_not_fetched", 1}};
  const std::string t = FormatStats(s);
  EXPECT_EQ(Row(t, "orders set"), "1");
  EXPECT_EQ(Row(t, "order files"), "10");
  EXPECT_EQ(Row(t, "order position"), "3");
  EXPECT_EQ(Row(t, "order bytes ahead"), "4.00 MiB");
  EXPECT_EQ(Row(t, "order prefetched files"), "5");
  EXPECT_EQ(Row(t, "order hits"), "2");
  EXPECT_EQ(Row(t, "order cancelled"), "0");
  EXPECT_EQ(Row(t, "order not fetched"), "1");
}

TEST(FormatStats, NoGpuUnderAutoSaysTheCpuDecodes) {
  nlohmann::json s = {{"views", {"d"}},
                      {"decoder", "cpu"},
                      {"decoder_reason", "--decoder=auto: no GPU decoder: no NVIDIA driver"}};
  EXPECT_EQ(Row(FormatStats(s), "decoder"),
            "no NVIDIA driver; decoding on the CPU (--decoder=auto)");
}

TEST(FormatRates, WhatGrewPerSecond) {
  nlohmann::json before = {{"bytes_read", 0},
                           {"cache_hit_bytes", 0},
                           {"origin_bytes_read", 0},
                           {"evicted_bytes", 0},
                           {"passthrough_bytes", 0}};
  nlohmann::json now = {{"bytes_read", 4ull << 20},
                        {"cache_hit_bytes", 1ull << 20},
                        {"origin_bytes_read", 3ull << 20},
                        {"evicted_bytes", 0},
                        {"passthrough_bytes", 8ull << 20}};
  EXPECT_EQ(Row(FormatRates(before, now, 2.0), "rates"),
            "over the last 2.0 s: read 2.00 MiB/s (25.0% hits), origin 1.50 MiB/s, evicted 0 B/s, "
            "passthrough files 4.00 MiB/s");
  // A restarted daemon's counters start again from 0.
  EXPECT_EQ(Row(FormatRates(now, before, 1.0), "rates"),
            "over the last 1.0 s: read 0 B/s (- hits), origin 0 B/s, evicted 0 B/s, passthrough "
            "files 0 B/s");
}

TEST(FormatStats, AFreshStartIsShownOnlyWhenThereWasOne) {
  EXPECT_EQ(Row(FormatStats(nlohmann::json{{"fresh_start", ""}}), "started empty"), "");
  EXPECT_EQ(
      Row(FormatStats(nlohmann::json{{"fresh_start", "its index was missing"}}), "started empty"),
      "its index was missing");
}

TEST(FormatStats, MissingFieldsAndNothingReadPrintDashes) {
  std::string t = FormatStats(nlohmann::json{{"bytes_read", 0}, {"cache_hit_bytes", 0}});
  EXPECT_EQ(Row(t, "origin"), "-");
  EXPECT_EQ(Row(t, "cache used"), "- of -");
  EXPECT_EQ(Row(t, "hit ratio"), "- of the reads that reached the daemon");  // no division by 0
  EXPECT_EQ(Row(t, "bytes read"), "0 B");
  EXPECT_EQ(Row(t, "warm"), "-");
  EXPECT_EQ(Row(t, "errors"), "-");
}

TEST(FormatStats, IdleWarmAndZeroCapacity) {
  std::string t = FormatStats(nlohmann::json{
      {"warm_files_queued", 0}, {"cache_used_bytes", 0}, {"cache_capacity_bytes", 0}});
  EXPECT_EQ(Row(t, "warm"), "nothing queued");
  EXPECT_EQ(Row(t, "cache used"), "0 B of 0 B");
}

TEST(FormatFsckReport, Clean) {
  FsckReport r;
  r.objects = 3;
  r.chunks = 10;
  r.bytes_checked = 10ull << 20;
  EXPECT_EQ(FormatFsckReport(r, false, 20), "checked 3 objects, 10 chunks (10.0 MiB)\nclean\n");
}

TEST(FormatFsckReport, ADamagedIndexSaysHowToRebuildIt) {
  FsckReport r;
  r.index_damage = "index '/c/index' is damaged: its CURRENT file is missing";
  r.problems.push_back(r.index_damage);
  EXPECT_EQ(FormatFsckReport(r, false, 20),
            "checked 0 objects, 0 chunks (0 B)\nproblems: index damaged\n  " + r.index_damage +
                "\nrun again with --repair to rebuild the index\n");
}

TEST(FormatFsckReport, ListsProblemsCapped) {
  FsckReport r;
  r.bad_checksums = 2;
  r.orphan_files = 1;
  r.leaked_slots = 3;
  r.usage_mismatch = true;
  for (int i = 0; i < 5; ++i) r.problems.push_back("problem " + std::to_string(i));
  std::string out = FormatFsckReport(r, false, 3);
  EXPECT_NE(
      out.find("problems: 2 bad checksums, 1 orphan data files, 3 leaked slab slots, usage record "
               "wrong\n"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("  problem 2\n"), std::string::npos);
  EXPECT_EQ(out.find("problem 3"), std::string::npos);
  EXPECT_NE(out.find("... and 2 more"), std::string::npos);
  EXPECT_NE(out.find("--repair"), std::string::npos);

  r.repaired = 4;
  std::string repaired = FormatFsckReport(r, true, 20);
  EXPECT_NE(repaired.find("repaired 4\n"), std::string::npos) << repaired;
  EXPECT_NE(repaired.find("problem 4"), std::string::npos);
}

TEST(WarmRequest, NamesOpAndPath) {
  nlohmann::json j = WarmRequest("dir with \"quotes\"/f");
  EXPECT_EQ(j, (nlohmann::json{{"op", "warm"}, {"path", "dir with \"quotes\"/f"}}));
  EXPECT_EQ(WarmRequest("")["path"], "");
}

TEST(ParseControlReply, OkErrorAndGarbage) {
  using nlohmann::json;
  EXPECT_TRUE(ParseControlReply(json::parse(R"({"ok":true,"queued":3})")).ok());
  Status no = ParseControlReply(json::parse(R"({"ok":false,"error":"no such file: x"})"));
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.message(), "no such file: x");
  EXPECT_FALSE(ParseControlReply(json::parse(R"({"ok":false})")).ok());
  EXPECT_EQ(ParseControlReply(json()).code(), EPROTO);
  EXPECT_EQ(ParseControlReply(json::parse("[1]")).code(), EPROTO);
  EXPECT_EQ(ParseControlReply(json::parse(R"({"ok":"yes"})")).code(), EPROTO);
}

}  // namespace
}  // namespace stoker
