// `stoker unmount`: takes a stoker mount down and waits for its daemon to
// exit, so that the index is flushed and closed when the command returns.
// A stale mount (daemon gone, ENOTCONN) is detached lazily and counts as done.
#include <sys/stat.h>

#include <memory>

#include "mount-tools/commands.h"
#include "mount-tools/mount_root.h"

namespace stoker {
namespace {

// A daemon flushes its index on unmount; this is how long we wait for that.
constexpr int kDaemonExitWaitMs = 10000;

int RunUnmount(const std::string& arg, bool lazy) {
  auto abs = AbsolutePathNoFollow(arg);
  if (!abs.ok()) {
    PrintError(abs.status().message());
    return kExitFailure;
  }
  const std::string& mp = *abs;
  auto mounts = ReadMountInfo();
  if (!mounts.ok()) {
    PrintError(mounts.status().message());
    return kExitFailure;
  }
  auto entry = FindMountAt(*mounts, mp);
  if (!entry) {
    struct stat st;
    if (stat(mp.c_str(), &st) != 0) {
      PrintError(Status::FromErrno("'" + arg + "'").message());
    } else if (auto root = FindMountRoot(mp); root.ok()) {
      PrintError("'" + arg + "' is not a mountpoint (the stoker mount is at '" + *root + "')");
    } else {
      PrintError("'" + arg + "' is not a stoker mount (nothing is mounted there)");
    }
    return kExitFailure;
  }
  if (!IsFuseFsType(entry->fstype)) {
    PrintError("'" + arg + "' is not a stoker mount (it is a " + entry->fstype + " mount)");
    return kExitFailure;
  }
  if (IsDeadFuseMount(mp)) {
    // The daemon is gone; the kernel only needs the dead mount detached.
    if (Status s = UnmountFuse(mp, /*lazy=*/true); !s.ok()) {
      PrintError(s.message());
      return kExitFailure;
    }
    return kExitOk;
  }
  auto stats = ReadStatsFile(mp);
  if (!stats.ok()) {
    PrintError("'" + arg + "' is not a stoker mount (" + stats.status().message() + ")");
    return kExitFailure;
  }
  // Read before unmounting: afterwards the stats file is gone with the mount.
  pid_t pid = 0;
  if (auto it = stats->json.find("pid"); it != stats->json.end() && it->is_number_integer()) {
    pid = it->get<pid_t>();
  }
  // Under --supervise the supervisor exits once its daemon has.
  pid_t supervisor = 0;
  if (auto it = stats->json.find("supervisor"); it != stats->json.end() && it->is_object()) {
    supervisor = it->value("pid", 0);
  }
  if (Status s = UnmountFuse(mp, lazy); !s.ok()) {
    PrintError(s.message());
    return kExitFailure;
  }
  if (pid > 0 && WaitForProcessExit(pid, kDaemonExitWaitMs) && supervisor > 0) {
    (void)WaitForProcessExit(supervisor, kDaemonExitWaitMs);
  }
  if (pid > 0 && ProcessAlive(pid)) {
    if (lazy) {
      // A detached mount stays served until its last open file is closed.
      std::fprintf(stderr,
                   "stoker: note: '%s' is detached; its daemon (pid %d) exits once the last "
                   "open file in it is closed\n",
                   arg.c_str(), static_cast<int>(pid));
      return kExitOk;
    }
    PrintError("'" + arg + "' is unmounted, but its daemon (pid " + std::to_string(pid) +
               ") has not exited after " + std::to_string(kDaemonExitWaitMs / 1000) +
               " s; its index may still be flushing");
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

Subcommand AddUnmountCommand(CLI::App& root) {
  struct Args {
    std::string mountpoint;
    bool lazy = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand(
      "unmount", "Unmount a stoker mount and wait until its daemon has flushed the index");
  app->alias("umount");
  app->add_option("MOUNTPOINT", args->mountpoint, "Where the mount is")->required();
  app->add_flag("-z,--lazy", args->lazy,
                "Detach now even if files are open; the daemon exits when they are closed");
  return {app, [args] { return RunUnmount(args->mountpoint, args->lazy); }};
}

}  // namespace stoker
