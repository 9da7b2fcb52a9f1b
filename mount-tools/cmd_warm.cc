// `stoker warm PATH...`: asks the daemon of each path's mount, over
// CACHE_DIR/control.sock, to pull the paths into the cache in the
// background, as one job per mount (cache/warm_job.h). Returns once the
// daemon has queued them, or with --wait once they are done, drawing their
// progress; `--status MOUNTPOINT` shows the jobs a daemon keeps.
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "mount-tools/commands.h"
#include "mount-tools/daemon_client.h"
#include "mount-tools/mount_root.h"
#include "util/path.h"
#include "util/size.h"

namespace stoker {
namespace {

// The view's counterpart of rel (a path of the raw tree): ".NAME/rel", or
// ".NAME/rel.npy" where the view shows a JPEG under that name.
Result<std::string> ViewPath(const std::string& root, const std::string& rel,
                             const std::string& view) {
  const std::string dir = "." + view;
  struct stat st;
  if (::stat((root + "/" + dir).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::NotFound("the mount at '" + root + "' has no view '" + view + "'");
  }
  if (rel.empty()) return dir;
  const std::string in_view = dir + "/" + rel;
  if (::stat((root + "/" + in_view).c_str(), &st) == 0) return in_view;
  if (::stat((root + "/" + in_view + ".npy").c_str(), &st) == 0) return in_view + ".npy";
  return Status::NotFound("'" + rel + "' is not in view '" + view + "'");
}

// The path relative to its mount's root (in the view, with one).
Result<std::string> MountRelative(const std::string& root, const std::string& path,
                                  const std::string& view) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return Status::FromErrno("'" + path + "'");
  std::string rel = RelativeToRoot(root, resolved);
  if (view.empty()) return rel;
  auto in_view = ViewPath(root, rel, view);
  if (!in_view.ok()) {
    return Status::Error(in_view.status().code(),
                         "warm '" + path + "': " + in_view.status().message());
  }
  return in_view;
}

// One job per mount.
struct Job {
  Daemon daemon;
  std::vector<std::string> rels;
  uint64_t id = 0;
  nlohmann::json last;  // its last progress (WarmJob::Json)
};

std::atomic<bool> g_interrupted{false};

std::string Duration(double s) {
  const auto t = static_cast<uint64_t>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%u:%02u:%02u", static_cast<unsigned>(t / 3600),
                static_cast<unsigned>(t / 60 % 60), static_cast<unsigned>(t % 60));
  return buf;
}

// One line of progress over all jobs; bar: drawn for a terminal.
std::string ProgressLine(const std::vector<Job>& jobs, bool bar) {
  uint64_t files = 0, done = 0, bytes = 0, bytes_done = 0, failures = 0, unsized = 0;
  bool walked = true, finished = true;
  double secs = 0;
  for (const Job& j : jobs) {
    files += j.last.value("files_found", uint64_t{0});
    done += j.last.value("files_done", uint64_t{0});
    bytes += j.last.value("bytes_found", uint64_t{0});
    bytes_done += j.last.value("bytes_done", uint64_t{0});
    failures += j.last.value("failures", uint64_t{0});
    unsized += j.last.value("unsized", uint64_t{0});
    walked = walked && j.last.value("walked", false);
    finished = finished && j.last.value("finished", false);
    secs = std::max(secs, j.last.value("seconds", 0.0));
  }
  const double frac = bytes > 0 ? static_cast<double>(bytes_done) / static_cast<double>(bytes) : 0;
  const double rate = secs > 0 ? static_cast<double>(bytes_done) / secs : 0;
  std::string line;
  if (bar) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    line = "[" + std::string(static_cast<size_t>(filled), '#') +
           std::string(static_cast<size_t>(kWidth - filled), '.') + "] ";
  }
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%3.0f%%", 100 * frac);
  // A view's files are sized as they are made: until then the bytes to do
  // are a lower bound, as the files are while the walk goes on.
  const bool sized = walked && unsized == 0;
  line += std::string(pct) + "  " + std::to_string(done) + "/" + std::to_string(files) +
          (walked ? "" : "+") + " files  " + FormatSize(bytes_done) + " of " + FormatSize(bytes) +
          (sized ? "" : "+") + "  " + FormatSize(static_cast<uint64_t>(rate)) + "/s";
  if (sized && !finished && rate > 0 && bytes > bytes_done) {
    line += "  ETA " + Duration(static_cast<double>(bytes - bytes_done) / rate);
  }
  if (failures > 0) line += "  " + std::to_string(failures) + " not warmed";
  return line;
}

// Says so when what the job found so far is beyond the cache's bound; true
// if it did.
bool WarnIfBeyondBound(const Job& j, bool tty, bool wait) {
  auto stats = ReadStatsFile(j.daemon.root);
  const uint64_t limit = stats.ok() ? stats->json.value("cache_limit_bytes", uint64_t{0}) : 0;
  const uint64_t found = j.last.value("bytes_found", uint64_t{0});
  if (limit == 0 || found <= limit) return false;
  std::fprintf(stderr,
               "%sstoker: warning: the paths hold %s (or more), beyond the cache's bound of %s: "
               "a warm evicts nothing, so it keeps what fits and %s\n",
               tty ? "\n" : "", FormatSize(found).c_str(), FormatSize(limit).c_str(),
               wait ? "lists the rest as not kept"
                    : "counts the rest as not warmed (`stoker warm --status` shows them)");
  return true;
}

// Without --wait: watches each job's walk for a moment, long enough to say
// up front that a dataset of ordinary size does not fit.
void CheckBound(std::vector<Job>& jobs) {
  constexpr auto kLook = std::chrono::seconds(2);
  const auto until = std::chrono::steady_clock::now() + kLook;
  for (Job& j : jobs) {
    for (;;) {
      auto reply = Ask(j.daemon, {{"op", "warm_status"}, {"job", j.id}});
      if (!reply.ok()) break;
      j.last = (*reply)["job"];
      if (WarnIfBeyondBound(j, false, false) || j.last.value("walked", false) ||
          std::chrono::steady_clock::now() >= until) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// Polls the jobs until all are done; draws their progress. Returns the
// exit status: 0, 1 when a file could not be warmed or kept (each listed),
// 130 on Ctrl-C (the daemons go on).
int WaitFor(std::vector<Job>& jobs) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_interrupted = true; };
  sigaction(SIGINT, &sa, nullptr);
  auto last_line = std::chrono::steady_clock::now();
  bool warned_size = false;
  for (;;) {
    bool all = true;
    for (Job& j : jobs) {
      auto reply = Ask(j.daemon, {{"op", "warm_status"}, {"job", j.id}});
      if (!reply.ok()) {
        if (tty) std::fputc('\n', stdout);
        PrintError(reply.status().message());
        return kExitFailure;
      }
      j.last = (*reply)["job"];
      all = all && j.last.value("finished", false);
      if (!warned_size) warned_size = WarnIfBeyondBound(j, tty, true);
    }
    const auto now = std::chrono::steady_clock::now();
    if (tty) {
      std::printf("\r%s\033[K", ProgressLine(jobs, true).c_str());
      std::fflush(stdout);
    } else if (all || now - last_line >= std::chrono::seconds(5)) {
      std::printf("warm: %s\n", ProgressLine(jobs, false).c_str());
      std::fflush(stdout);
      last_line = now;
    }
    if (all) break;
    if (g_interrupted) {
      if (tty) std::fputc('\n', stdout);
      for (const Job& j : jobs) {
        std::fprintf(stderr,
                     "stoker: the warm goes on in the daemon of '%s'; `stoker warm --status %s` "
                     "shows it\n",
                     j.daemon.root.c_str(), j.daemon.root.c_str());
      }
      return 130;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 200 : 500));
  }
  if (tty) std::fputc('\n', stdout);
  int rc = kExitOk;
  for (const Job& j : jobs) {
    const uint64_t failures = j.last.value("failures", uint64_t{0});
    if (failures == 0) continue;
    rc = kExitFailure;
    for (const auto& f : j.last["failed"]) {
      // The daemon's ENOSPC says "not kept: why"; other errors say only why.
      const std::string why = f.value("error", std::string());
      PrintError(JoinPath(j.daemon.root, f.value("path", std::string())) + ": " +
                 (why.starts_with("not kept") ? "" : "not warmed: ") + why);
    }
    if (failures > j.last["failed"].size()) {
      PrintError(std::to_string(failures - j.last["failed"].size()) + " more not warmed in '" +
                 j.daemon.root + "'");
    }
  }
  return rc;
}

int ShowStatus(const std::string& path) {
  auto d = DaemonOf(path);
  if (!d.ok()) {
    PrintError(d.status().message());
    return kExitFailure;
  }
  auto reply = Ask(*d, {{"op", "warm_status"}});
  if (!reply.ok()) {
    PrintError(reply.status().message());
    return kExitFailure;
  }
  const nlohmann::json& jobs = (*reply)["jobs"];
  if (jobs.empty()) std::printf("no warm jobs in the daemon of '%s'\n", d->root.c_str());
  for (const auto& j : jobs) {
    std::vector<Job> one(1);
    one[0].last = j;
    std::string paths;
    for (const auto& p : j["paths"]) {
      const std::string rel = p.get<std::string>();
      paths += (paths.empty() ? "" : " ") + (rel.empty() ? std::string("/") : rel);
    }
    std::printf("job %s  %s  %s  %s\n", j["job"].dump().c_str(),
                j.value("finished", false) ? "done   " : "running",
                ProgressLine(one, false).c_str(), paths.c_str());
  }
  return kExitOk;
}

int RunWarm(std::vector<std::string> paths, const std::string& view, bool wait,
            const std::string& from) {
  if (!from.empty()) {
    std::ifstream in(from);
    if (!in) {
      PrintError("--from " + from + ": cannot read it");
      return kExitUsage;
    }
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] != '#') paths.push_back(line);
    }
  }
  if (paths.empty()) {
    PrintError("nothing to warm: give PATHs or --from FILE");
    return kExitUsage;
  }
  std::vector<Job> jobs;
  std::map<std::string, size_t> by_root;
  int rc = kExitOk;
  for (const std::string& path : paths) {
    auto d = DaemonOf(path);
    Result<std::string> rel = d.ok() ? MountRelative(d->root, path, view) : d.status();
    if (!rel.ok()) {
      PrintError(rel.status().message());
      rc = kExitFailure;
      continue;
    }
    auto [it, added] = by_root.emplace(d->root, jobs.size());
    if (added) jobs.push_back(Job{*d, {}, 0, {}});
    jobs[it->second].rels.push_back(*rel);
  }
  std::vector<Job> started;
  for (Job& j : jobs) {
    auto reply = Ask(j.daemon, {{"op", "warm"}, {"paths", j.rels}});
    if (!reply.ok()) {
      PrintError("warm: " + reply.status().message());
      rc = kExitFailure;
      continue;
    }
    j.id = reply->value("job", uint64_t{0});
    started.push_back(j);
  }
  if (started.empty()) return rc;
  if (!wait) {
    CheckBound(started);
    return rc;
  }
  const int waited = WaitFor(started);
  return rc != kExitOk ? rc : waited;
}

}  // namespace

nlohmann::json WarmRequest(const std::string& rel_path) {
  return {{"op", "warm"}, {"path", rel_path}};
}

Status ParseControlReply(const nlohmann::json& j) {
  auto ok = j.is_object() ? j.find("ok") : j.end();
  if (!j.is_object() || ok == j.end() || !ok->is_boolean()) {
    return Status::Error(EPROTO, "unexpected answer from the daemon: " + j.dump());
  }
  if (ok->get<bool>()) return Status::OK();
  auto err = j.find("error");
  return Status::IOError(err != j.end() && err->is_string() ? err->get<std::string>()
                                                            : "the daemon refused");
}

Subcommand AddWarmCommand(CLI::App& root) {
  struct Args {
    std::vector<std::string> paths;
    std::string view;
    bool wait = false;
    std::string from;
    std::string status;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand(
      "warm", "Pull files or directories under a mount into the cache, in the background");
  app->add_option("PATH", args->paths, "Files or directories under a stoker mount");
  app->add_option("--view", args->view,
                  "Warm the decoded view NAME of the PATHs (decode them in the background)")
      ->type_name("NAME");
  app->add_flag("--wait", args->wait,
                "Wait until they are in the cache, drawing the progress; Ctrl-C stops waiting, not "
                "the warm");
  app->add_option("--from", args->from,
                  "Warm the paths listed in FILE (one per line), in that order, after the PATHs")
      ->type_name("FILE");
  app->add_option("--status", args->status,
                  "Show the warm jobs of the mount at MOUNTPOINT (queued, running, done)")
      ->type_name("MOUNTPOINT");
  return {app, [args] {
            if (!args->status.empty()) {
              if (!args->paths.empty() || !args->from.empty()) {
                PrintError("--status takes no PATHs");
                return kExitUsage;
              }
              return ShowStatus(args->status);
            }
            return RunWarm(args->paths, args->view, args->wait, args->from);
          }};
}

}  // namespace stoker
