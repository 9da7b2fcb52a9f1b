// RunMount: validate, open the cache, mount, serve, unmount, close the cache.
// Shutdown order matters and is written out in Serve(): nothing that can send
// to the session (control socket's warm requests, the notifier) outlives it,
// and the cache is closed only after every handle that refers to it is gone.
#include "fs/mount.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/io/direct_io.h"
#include "cache/object_cache.h"
#include "cache/origin/origin.h"
#include "decode/view/view_namespace.h"
#include "fs/control_files.h"
#include "fs/control_requests.h"
#include "fs/control_socket.h"
#include "fs/fuse_access.h"
#include "fs/fuse_io.h"
#include "fs/fuse_ops.h"
#include "fs/fuse_session.h"
#include "fs/inval_notifier.h"
#include "fs/metrics.h"
#include "fs/mountpoint.h"
#include "fs/supervisor.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {

namespace {

constexpr unsigned kReadaheadKb = 4096;
// The FUSE loop's most workers when MountOptions::fuse_threads is 0.
constexpr unsigned kDefaultMaxWorkers = 64;
// Files whose backing file outlives their last close (fs/passthrough.h).
constexpr size_t kIdleBackingFiles = 64;

// The one line RunMount owes the CLI on ready_fd: "ok" or "error: why".
class ReadyLine {
 public:
  explicit ReadyLine(int fd) : fd_(fd) {}
  ~ReadyLine() { Send("error: stoker exited before the mount was ready"); }
  void Send(const std::string& line) {
    MutexLock lock(mu_);
    if (fd_ < 0) return;
    const std::string text = line + "\n";
    (void)!write(fd_, text.data(), text.size());
    close(fd_);
    fd_ = -1;
  }

 private:
  Mutex mu_;
  int fd_ GUARDED_BY(mu_);
};

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
                                                  const std::string& mountpoint,
                                                  const std::function<nlohmann::json()>& stats) {
  Result<std::unique_ptr<ControlSocket>> sock = ControlSocket::Start(
      options.cache.dir + "/control.sock", [&cache, &mountpoint, &stats](const nlohmann::json& r) {
        return HandleControlRequest(r, cache, mountpoint, stats);
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

// Everything after fuse_session_new succeeded: start the session, the
// control socket and the readiness check, run the loop, then stop what can
// send to the session before it ends. Returns the loop's status.
Status Serve(const MountOptions& options, const std::string& mountpoint, fuse_session* se,
             EarlyMount* early, FsContext& fs, ObjectCache& cache, ReadyLine& ready,
             const std::function<nlohmann::json()>& stats, SupervisorLink* link) {
  InvalNotifier notifier(
      [se](uint64_t ino) { return fuse_lowlevel_notify_inval_inode(se, ino, 0, 0); },
      [se](uint64_t parent, const std::string& name) {
        return fuse_lowlevel_notify_inval_entry(se, parent, name.data(), name.size());
      });
  fs.notifier = &notifier;
  STOKER_RETURN_IF_ERROR(StartSession(options, mountpoint, se, early, link));
  std::unique_ptr<ControlSocket> control = StartControlSocket(options, cache, mountpoint, stats);

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

// Where to mount. A new daemon checks, before anything is opened or created,
// that it may use FUSE (a container without /dev/fuse or CAP_SYS_ADMIN is
// told so in one line, not by libfuse's fallbacks) and prepares the
// mountpoint; a restarted daemon's is ours, mounted: not to be checked again.
Result<std::string> ResolveMountpoint(const MountOptions& options, const DaemonRestart* restart) {
  if (restart != nullptr) return restart->mountpoint;
  STOKER_RETURN_IF_ERROR(CheckFuseAccess(ProbeFuseAccess()));
  return PrepareMountpoint(options.mountpoint);
}

// The cache over the origin the views give, attached to the views, whose
// list of what does not decode outlives the daemon (view_stats.h).
Result<std::unique_ptr<ObjectCache>> OpenCache(const MountOptions& options, ViewMount& views) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<ObjectCache> cache,
                          ObjectCache::Open(options.cache, views.origin, views.derived));
  views.Attach(cache.get());
  if (!views.views.empty()) {
    Result<size_t> kept = views.stats->errors.Persist(options.cache.dir + "/view-errors");
    if (kept.ok()) {
      views.stats->counters.errors += *kept;
    } else {
      LOG_WARN("{}; view errors are listed in memory only", kept.status().message());
    }
  }
  return cache;
}

// What stats.json, `stoker stat` and the metrics say of this daemon: the
// cache's stats, then the mount's own. Read by the control files, the
// control socket and the metrics thread while the mount serves.
struct DaemonStats {
  const MountOptions& options;
  const std::string& mountpoint;
  std::chrono::steady_clock::time_point started;
  ObjectCache& cache;
  const Origin& origin;
  const ViewMount& views;
  SupervisorLink* link;
  // The FUSE context, from when it is made until its handles are freed.
  const FsContext* fs = nullptr;

  nlohmann::json Json() const {
    nlohmann::json j = cache.Stats();
    if (!j.is_object()) j = nlohmann::json{{"cache", j}};
    j["mountpoint"] = mountpoint;
    j["origin"] = origin.Describe();
    j["cache_dir"] = options.cache.dir;
    j["control_socket"] = options.cache.dir + "/control.sock";
    j["pid"] = getpid();
    j["uptime_seconds"] =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started)
            .count();
    if (!views.views.empty()) j.update(views.Stats());
    if (link != nullptr) {
      j["supervisor"] = {{"pid", link->supervisor_pid()},
                         {"generation", link->generation()},
                         {"restarts", link->restarts()}};
    }
    if (fs != nullptr) {
      if (fs->passthrough != nullptr) j.update(fs->passthrough->Stats());
      j["opens"] = fs->kernel_opens ? "kernel" : "daemon";
      j["fuse_opens"] = fs->fuse_opens.load();
      j["node_files"] = fs->node_files.size();
      j["nodes_retired"] = fs->nodes_retired.load();
      j["listings_kept"] = fs->listings_kept.load();
      j["nodes_shed"] = fs->nodes_shed.load();
      j["max_nodes"] = fs->max_nodes;
      j["open_files"] = fs->files.size();
      j["open_dirs"] = fs->dirs.size();
      j["inodes"] = fs->inodes.size();
      j["read_latency_seconds"] = fs->read_latency.Json();
    }
    return j;
  }
};

// The FUSE context over the cache. Supervised, its inode table is journaled
// to the supervisor, and a restarted daemon's is restored from the journal.
std::unique_ptr<FsContext> MakeFsContext(const MountOptions& options, ObjectCache& cache,
                                         Origin& origin, ControlFiles& control,
                                         SupervisorLink* link) {
  auto fs = std::make_unique<FsContext>(&cache, &origin, &control,
                                        static_cast<double>(options.cache.revalidate_seconds),
                                        MaxReadFrom(options.fuse_options));
  fs->kernel_opens = options.kernel_opens;
  fs->max_nodes = options.max_nodes;
  if (Result<struct stat> root = origin.Stat(""); root.ok()) {
    fs->inodes.SetRootOriginIno(root->st_ino);
  }
  if (link != nullptr) {
    const DaemonRestart* restart = link->restart();
    if (restart != nullptr && restart->nodes != nullptr) fs->inodes.Restore(*restart->nodes);
    fs->inodes.SetJournal([link](std::string_view r) { link->Record(r); });
    fs->handle_tag = static_cast<uint64_t>(link->generation() & 0xFFFF) << 48;
  }
  return fs;
}

// The low-level session over fs, with the mount's arguments; not mounted.
Result<fuse_session*> NewSession(const MountOptions& options, FsContext& fs) {
  Args args = FuseArgs(options, FsName(options.origin));
  fuse_args fargs = args.Get();
  const fuse_lowlevel_ops& ops = StokerLowlevelOps();
  fuse_session* se = fuse_session_new(&fargs, &ops, sizeof(ops), &fs);
  fuse_opt_free_args(&fargs);
  if (se == nullptr) return Status::Invalid("invalid FUSE options" + LastFuseError());
  return se;
}

// How passthrough registers backing files with the kernel through the
// session. Supervised, each change is journaled too: a restarted daemon must
// know what the kernel still reads directly.
PassthroughNodes::Hooks BackingFileHooks(fuse_session* se, FsContext& fs, bool supervised) {
  PassthroughNodes::Hooks hooks{[se](int fd) { return OpenBackingFile(fuse_session_fd(se), fd); },
                                [se](int32_t id) { CloseBackingFile(fuse_session_fd(se), id); },
                                nullptr};
  if (supervised) {
    hooks.journal = [&fs](uint64_t node, int32_t id, const WholeFileLease* lease) {
      if (lease == nullptr) {
        fs.inodes.JournalBacking(node, 0);
      } else {
        fs.inodes.JournalBacking(node, id, lease->object_id(), lease->version(), lease->chunks());
      }
    };
  }
  return hooks;
}

// A restarted daemon takes over the backing files its predecessor handed the
// kernel, each with its version pinned; a node opened normally gets no
// passthrough in this daemon (fs/passthrough.h).
void InheritBackingFiles(const InodeTable::Saved& nodes, ObjectCache& cache,
                         PassthroughNodes& passthrough) {
  size_t inherited = 0;
  for (const InodeTable::Saved::OpenedNode& n : nodes.Opened()) {
    if (n.backing_id != 0) {
      passthrough.Inherit(n.id, n.backing_id, cache.HoldVersion(n.object_id, n.version, n.chunks));
      inherited++;
    } else {
      passthrough.MarkRestored(n.id);
    }
  }
  if (inherited > 0) LOG_INFO("took over {} files the kernel reads directly", inherited);
}

// libfuse leaves an ignored signal ignored, and a daemon started from a
// script's background job inherits SIGINT ignored; these must unmount.
Status InstallSignalHandlers(fuse_session* se) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
  if (fuse_set_signal_handlers(se) != 0) {
    return Status::Error(EIO, "could not install signal handlers");
  }
  return Status::OK();
}

// The metrics server where --metrics asks for one, else null. A daemon
// restarted after a crash keeps serving the mount without one it cannot
// start; a first daemon fails the mount.
Result<std::unique_ptr<MetricsServer>> StartMetrics(const MountOptions& options,
                                                    const std::function<nlohmann::json()>& stats,
                                                    SupervisorLink* link) {
  if (options.metrics.empty()) return std::unique_ptr<MetricsServer>();
  Result<sockaddr_in> addr = ParseMetricsAddress(options.metrics);
  Result<std::unique_ptr<MetricsServer>> started =
      addr.ok() ? MetricsServer::Start(*addr, stats)
                : Result<std::unique_ptr<MetricsServer>>(addr.status());
  if (started.ok()) {
    LOG_INFO("metrics for Prometheus at http://{}/metrics", AddressText(*addr));
    return started;
  }
  if (link != nullptr && link->restart() != nullptr) {
    LOG_WARN("{}; this daemon serves no metrics", started.status().message());
    return std::unique_ptr<MetricsServer>();
  }
  return started.status();
}

// The daemon's life: open the origin, the views and the cache; build the
// FUSE context and session; serve; then take it all down in order.
Status RunMountImpl(const MountOptions& options, ReadyLine& ready, SupervisorLink* link) {
  const auto started = std::chrono::steady_clock::now();
  const DaemonRestart* restart = link != nullptr ? link->restart() : nullptr;
  STOKER_ASSIGN_OR_RETURN(const std::string mountpoint, ResolveMountpoint(options, restart));
  SetDirectIoEnabled(options.cache.direct_io);
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Origin> raw_origin,
                          MakeOrigin(options.origin, options.origin_options));
  // A restarted daemon must not look at its own mount (see Serve); the
  // first one checked this.
  fuse_set_log_func(LogFromFuse);
  std::unique_ptr<EarlyMount> early;
  if (restart == nullptr) {
    STOKER_RETURN_IF_ERROR(CheckNesting(options.origin, mountpoint, options.cache.dir));
    STOKER_ASSIGN_OR_RETURN(early, EarlyMount::Make(options, mountpoint));
  }
  // With views, fs/ and the cache both see the ViewNamespace over the origin.
  STOKER_ASSIGN_OR_RETURN(ViewMount views, MakeViewMount(raw_origin, options.views,
                                                         options.decode_pool, options.decoder));
  const std::shared_ptr<Origin> origin = views.origin;
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<ObjectCache> cache, OpenCache(options, views));

  DaemonStats daemon_stats{options, mountpoint, started, *cache, *origin, views, link};
  std::function<nlohmann::json()> stats = [&daemon_stats] { return daemon_stats.Json(); };
  ControlFiles control(stats, [&views] { return views.stats->errors.Text(); });
  std::unique_ptr<FsContext> fs = MakeFsContext(options, *cache, *origin, control, link);
  daemon_stats.fs = fs.get();
  fuse_session* se = nullptr;
  STOKER_ASSIGN_OR_RETURN(se, NewSession(options, *fs));
  // Idle files keep their backing file for their next open: a few, and
  // never more than a sixteenth of the cache pinned so.
  PassthroughNodes passthrough(BackingFileHooks(se, *fs, link != nullptr), kIdleBackingFiles,
                               options.cache.capacity_bytes / 16);
  if (options.kernel_opens) {
    passthrough.Disable("opens_kernel");
  } else if (options.passthrough == PassthroughMode::kOff) {
    passthrough.Disable("off");
  }
  if (restart != nullptr && restart->nodes != nullptr) {
    InheritBackingFiles(*restart->nodes, *cache, passthrough);
  }
  fs->passthrough = &passthrough;
  if (Status st = InstallSignalHandlers(se); !st.ok()) {
    fuse_session_destroy(se);
    return st;
  }
  Result<std::unique_ptr<MetricsServer>> started_metrics = StartMetrics(options, stats, link);
  if (!started_metrics.ok()) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return started_metrics.status();
  }
  std::unique_ptr<MetricsServer> metrics = std::move(started_metrics).value();

  Status st = Serve(options, mountpoint, se, early.get(), *fs, *cache, ready, stats, link);
  metrics.reset();  // its thread reads what goes below
  fuse_remove_signal_handlers(se);
  // Backing ids go with the connection; the leases (pins) before the cache.
  passthrough.Clear();
  fuse_session_destroy(se);
  // Handles the kernel never released refer to the cache: free them first.
  fs->files.Clear();
  fs->dirs.Clear();
  fs->node_files.Clear();
  daemon_stats.fs = nullptr;
  cache.reset();  // stops the cache's threads, flushes the index
  if (views.pool) views.pool->Stop();
  if (st.ok()) LOG_INFO("unmounted {}", mountpoint);
  return st;
}

}  // namespace

Status RunMount(const MountOptions& options) {
  // glibc gives each thread that meets contention an arena of its own, up to
  // 8 per core, and memory freed in one is kept for it: over a million files
  // the daemon's RSS was 35 MiB (15%) above its heap with 16 arenas. Unless
  // the environment says otherwise (MALLOC_ARENA_MAX), four.
  if (getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 4);
  if (spdlog::level::from_str(options.log_level) != spdlog::level::off ||
      options.log_level == "off") {
    spdlog::set_level(spdlog::level::from_str(options.log_level));
  }
  auto unsupervised = [&options] {
    ReadyLine ready(options.ready_fd);
    Status st = RunMountImpl(options, ready, nullptr);
    if (!st.ok()) ready.Send("error: " + st.message());
    return st;
  };
  if (!options.supervise) return unsupervised();
  // Supervise forks, so no other thread may run: stop the log's flusher
  // (each daemon starts its own again).
  spdlog::flush_every(std::chrono::seconds(0));
  SupervisorOptions so;
  // The ready line is the first daemon's to write; the CLI sees its end
  // once that daemon has said it or died.
  so.after_first_fork = [&options] {
    if (options.ready_fd >= 0) close(options.ready_fd);
  };
  Status st = Supervise(so, [&options](SupervisorLink& link) {
    spdlog::flush_every(std::chrono::seconds(2));
    MountOptions o = options;
    if (link.restart() != nullptr) o.ready_fd = -1;  // said by the first daemon
    ReadyLine ready(o.ready_fd);
    Status st = RunMountImpl(o, ready, &link);
    if (!st.ok()) {
      ready.Send("error: " + st.message());
      LOG_ERROR("daemon failed: {}", st.message());
    } else {
      LOG_INFO("daemon exiting after clean unmount");
    }
    spdlog::default_logger()->flush();
    return st.ok() ? 0 : 1;
  });
  if (st.code() != EDEADLK) return st;
  LOG_WARN("no supervisor: {}; a daemon crash will end the mount", st.message());
  spdlog::flush_every(std::chrono::seconds(2));
  return unsupervised();
}

}  // namespace stoker
