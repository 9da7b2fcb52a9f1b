#include "fs/serve.h"

#include <poll.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "fs/control_requests.h"
#include "fs/control_socket.h"
#include "fs/inval_notifier.h"
#include "fs/mountpoint.h"
#include "util/log.h"

namespace stoker {

namespace {

// The read-ahead FinishMount gives the mount (INIT caps it lower).
constexpr unsigned kReadaheadKb = 4096;
// The FUSE loop's most workers when MountOptions::fuse_threads is 0.
constexpr unsigned kDefaultMaxWorkers = 64;

// Serve's first step: a new daemon hands the session the device its early
// mount opened (and, supervised, INIT to the supervisor); a restarted one
// takes over the session its predecessor left (fs/supervisor.h).
Status StartSession(const MountOptions& options, const std::string& mountpoint, fuse_session* se,
                    EarlyMount* early, SupervisorLink* link) {
  const DaemonRestart* restart = link != nullptr ? link->restart() : nullptr;
  if (restart != nullptr) return TakeOverSession(se, *restart, PassthroughOf(options));
  STOKER_ASSIGN_OR_RETURN(int fd, early->TakeDevice());
  if (Status st = ServeDevice(se, fd, PassthroughOf(options)); !st.ok()) {
    close(fd);
    return Status::Error(EIO, "could not serve the mount at '" + mountpoint + "': " + st.message());
  }
  if (link != nullptr) StartSupervised(se, *link, mountpoint);
  return Status::OK();
}

// The socket `stoker warm` and `stoker stat` talk to (fs/control_socket.h);
// null if it could not be made: the mount serves without it.
std::unique_ptr<ControlSocket> StartControlSocket(const MountOptions& options, ObjectCache& cache,
                                                  FsContext& fs, const std::string& mountpoint,
                                                  const std::function<nlohmann::json()>& stats) {
  Result<std::unique_ptr<ControlSocket>> sock = ControlSocket::Start(
      options.cache.dir + "/control.sock",
      [&cache, &fs, &mountpoint, &stats](const nlohmann::json& r) {
        return HandleControlRequest(r, cache, mountpoint, stats, [&fs](const std::string& path) {
          return ForgetSubtree(fs, path);
        });
      });
  if (!sock.ok()) {
    LOG_WARN("no control socket ({}); `stoker warm` will not reach this mount",
             sock.status().message());
    return nullptr;
  }
  return std::move(sock).value();
}

// The device the mount is, once the kernel has finished INIT. Unsupervised,
// a stat() through us, which waits for the FUSE loop; supervised, from
// /proc/self/mountinfo (see Serve for why).
Result<dev_t> MountedDevice(const std::string& mountpoint, bool supervised) {
  if (supervised) return DevOfMount(mountpoint);
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) return Status::Error(errno, std::strerror(errno));
  return st.st_dev;
}

// INIT is done: whether the kernel lets us hand it backing files. Returns
// why the mount must end (--passthrough on, and the kernel refuses), or ""
// to go on, with passthrough on or off as the kernel allows.
std::string SettlePassthrough(const MountOptions& options, fuse_session* se, FsContext& fs) {
  if (PassthroughOf(options) == PassthroughMode::kOff) return "";
  const std::string why = PassthroughRefusal(options, fuse_session_fd(se));
  if (!why.empty() && options.passthrough == PassthroughMode::kOn) {
    return "--passthrough on: the kernel refuses FUSE passthrough here (" + why + ")";
  }
  if (!why.empty()) {
    fs.passthrough->Disable(why);
    fs.cache->SetDataFilesInPageCache(false);  // opens keep their own pages instead
    LOG_INFO("FUSE passthrough is off: {}; every read goes through the daemon", why);
  } else {
    LOG_INFO("FUSE passthrough is on for files held whole in the cache");
  }
  return "";
}

// The mount is live and passthrough settled: raise read-ahead (only now, as
// INIT would cap it again) and tell the CLI.
void FinishMount(const MountOptions& options, const std::string& mountpoint, dev_t dev,
                 const FsContext& fs, ReadyLine& ready) {
  if (!RaiseReadahead(dev, kReadaheadKb)) {
    LOG_DEBUG("could not raise read-ahead to {} KiB", kReadaheadKb);
  }
  if (!options.check_permissions) {
    LOG_WARN(
        "--no-default-permissions: the origin's modes are not checked; every user the "
        "mount lets in reads every file");
  }
  LOG_INFO("mounted {} at {}", fs.origin->Describe(), mountpoint);
  ready.Send("ok");
}

// Runs the FUSE loop until the mount ends; libfuse's result.
int RunSessionLoop(const MountOptions& options, fuse_session* se, bool supervised) {
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  // A clone dies with its daemon, and its unanswered requests with it
  // (fs/supervisor.h): under a supervisor every thread reads the one fd.
  fuse_loop_cfg_set_clone_fd(cfg, supervised ? 0 : 1);
  if (options.fuse_threads > 0) {
    fuse_loop_cfg_set_max_threads(cfg, static_cast<unsigned>(options.fuse_threads));
    fuse_loop_cfg_set_idle_threads(cfg, static_cast<unsigned>(options.fuse_threads));
  } else {
    // libfuse's 10 workers can all be taken by calls stuck in a hung origin
    // before the stall watch sees it (cache/origin/stall_watch.h); the rest of the
    // mount must still answer from the cache. Workers are started only when
    // all are busy.
    fuse_loop_cfg_set_max_threads(cfg, kDefaultMaxWorkers);
  }
  const int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  return rc;
}

// A session taken over does not know it is mounted (libfuse unmounts only
// what it mounted). Unmount unless the kernel already ended the connection
// (`stoker unmount`, fusermount3 -u): then whatever is at the mountpoint now
// is not ours.
void DetachTakenOver(const DaemonRestart& restart, const std::string& mountpoint) {
  pollfd p{restart.fuse_fd, 0, 0};
  const bool ended = poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0;
  if (!ended && !DetachMount(mountpoint)) LOG_ERROR("could not unmount {}", mountpoint);
}

}  // namespace

Status Serve(const MountOptions& options, const std::string& mountpoint, fuse_session* se,
             EarlyMount* early, FsContext& fs, ObjectCache& cache, ReadyLine& ready,
             const std::function<nlohmann::json()>& stats, SupervisorLink* link) {
  InvalNotifier notifier(
      [se](uint64_t ino) { return fuse_lowlevel_notify_inval_inode(se, ino, 0, 0); },
      [se](uint64_t parent, const std::string& name) {
        return fuse_lowlevel_notify_inval_entry(se, parent, name.data(), name.size());
      },
      [se](const std::vector<uint64_t>& ids) { return PruneNodes(fuse_session_fd(se), ids); });
  fs.notifier = &notifier;
  STOKER_RETURN_IF_ERROR(StartSession(options, mountpoint, se, early, link));
  std::unique_ptr<ControlSocket> control =
      StartControlSocket(options, cache, fs, mountpoint, stats);

  // The mount is live once the kernel has finished INIT and answered a stat
  // through us; only then raise read-ahead (INIT would cap it again) and
  // tell the CLI. stat() here waits for the loop started below.
  //
  // Under a supervisor the daemon must never access its own mount: a thread
  // of a killed daemon waiting for a request that the daemon itself had
  // taken waits uninterruptibly, so the process never finishes dying and no
  // new daemon can answer. INIT is done by then (StartSupervised, or the
  // first daemon's), so the device comes from /proc/self/mountinfo instead.
  std::atomic<dev_t> dev{0};
  std::string passthrough_failed;  // written by readiness, read after join
  std::thread readiness([&] {
    Result<dev_t> found = MountedDevice(mountpoint, link != nullptr);
    if (!found.ok()) {
      ready.Send("error: the mount did not come up: " + found.status().message());
      return;
    }
    dev = *found;
    passthrough_failed = SettlePassthrough(options, se, fs);
    if (!passthrough_failed.empty()) {
      ready.Send("error: " + passthrough_failed);
      // Ends the loop; the rest of the mount is taken down below. Only
      // root may abort a connection, but whoever mounted may unmount.
      if (early != nullptr) {
        early->Unmount();
      } else {
        AbortFuseConnection(*found);
      }
      return;
    }
    FinishMount(options, mountpoint, *found, fs, ready);
  });

  const int rc = RunSessionLoop(options, se, link != nullptr);
  LOG_INFO("unmounting {}", mountpoint);

  // No new warm requests into the cache, no notification into a dying
  // session (a stuck one is freed by aborting the connection).
  control.reset();
  notifier.Stop([&dev] {
    if (dev != 0) AbortFuseConnection(dev);
  });
  fs.notifier = nullptr;
  if (early != nullptr) early->Unmount();  // also unblocks a readiness stat() still waiting
  if (link != nullptr && link->restart() != nullptr) DetachTakenOver(*link->restart(), mountpoint);
  readiness.join();
  if (!passthrough_failed.empty()) return Status::Error(EOPNOTSUPP, passthrough_failed);
  if (rc < 0) return Status::FromErrno(-rc, "FUSE session loop");
  return Status::OK();
}

}  // namespace stoker
