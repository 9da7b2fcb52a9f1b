// `stoker fsck`: the offline check of a cache directory (CheckCache).
// Exit 0 clean, 1 problems found (also when repaired), 2 could not check.
#include <sys/stat.h>

#include <cstdio>
#include <memory>

#include "mount-tools/commands.h"
#include "util/size.h"

namespace stoker {
namespace {

// Problem lines beyond this are counted, not listed.
constexpr size_t kMaxProblemLines = 20;

int RunFsck(const std::string& dir, bool repair, bool json) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    PrintError(Status::FromErrno("'" + dir + "'").message());
    return kExitUsage;
  }
  if (!S_ISDIR(st.st_mode)) {
    PrintError("'" + dir + "' is not a directory");
    return kExitUsage;
  }
  auto report = CheckCache(dir, repair);
  if (!report.ok()) {
    std::string msg = report.status().message();
    if (report.status().code() == EBUSY) msg += " (unmount it first)";
    PrintError(msg);
    return kExitUsage;
  }
  if (json) {
    std::printf("%s\n", report->ToJson().dump(2).c_str());
  } else {
    std::fputs(FormatFsckReport(*report, repair, kMaxProblemLines).c_str(), stdout);
  }
  return report->clean() ? kExitOk : kExitFailure;
}

void AddCount(std::string* out, uint64_t n, const char* what) {
  if (n == 0) return;
  if (!out->empty()) *out += ", ";
  *out += std::to_string(n) + " " + what;
}

}  // namespace

std::string FormatFsckReport(const FsckReport& r, bool repair, size_t max_problems) {
  std::string out = "checked " + std::to_string(r.objects) + " objects, " +
                    std::to_string(r.chunks) + " chunks (" + FormatSize(r.bytes_checked) + ")\n";
  if (r.clean()) return out + "clean\n";
  std::string kinds = r.index_damage.empty() ? "" : "index damaged";
  AddCount(&kinds, r.bad_checksums, "bad checksums");
  AddCount(&kinds, r.missing_data, "records without data");
  AddCount(&kinds, r.orphan_files, "orphan data files");
  AddCount(&kinds, r.leaked_slots, "leaked slab slots");
  AddCount(&kinds, r.pending_writes, "pending writes");
  AddCount(&kinds, r.bad_records, "bad index records");
  if (r.usage_mismatch) kinds += std::string(kinds.empty() ? "" : ", ") + "usage record wrong";
  out += "problems: " + kinds + "\n";
  for (size_t i = 0; i < r.problems.size() && i < max_problems; ++i) {
    out += "  " + r.problems[i] + "\n";
  }
  if (r.problems.size() > max_problems) {
    out += "  ... and " + std::to_string(r.problems.size() - max_problems) + " more\n";
  }
  if (repair) {
    out += "repaired " + std::to_string(r.repaired) + "\n";
  } else if (!r.index_damage.empty()) {
    out += "run again with --repair to rebuild the index\n";
  } else {
    out += "run again with --repair to drop what is bad\n";
  }
  return out;
}

Subcommand AddFsckCommand(CLI::App& root) {
  struct Args {
    std::string dir;
    bool repair = false;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app =
      root.add_subcommand("fsck", "Check a cache directory offline (no daemon may hold it)");
  app->add_option("CACHE_DIR", args->dir, "The --cache directory of a mount")->required();
  app->add_flag("--repair", args->repair, "Drop bad chunks, records and files; fix the usage");
  app->add_flag("--json", args->json, "Print the report as JSON");
  return {app, [args] { return RunFsck(args->dir, args->repair, args->json); }};
}

}  // namespace stoker
