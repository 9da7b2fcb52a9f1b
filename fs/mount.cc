// RunMount: validate, open the cache, mount, serve, unmount, close the cache.
// Shutdown order matters and is written out in Serve() (fs/serve.cc) and
// RunMountImpl: nothing that can send to the session (control socket's warm
// requests, the notifier) outlives it, and the cache is closed only after
// every handle that refers to it is gone.
#include "fs/mount.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache_dir_fs.h"
#include "cache/io/direct_io.h"
#include "cache/kept_listings.h"
#include "cache/object_cache.h"
#include "cache/origin/origin.h"
#include "decode/view/view_namespace.h"
#include "fs/control_files.h"
#include "fs/fuse_access.h"
#include "fs/fuse_io.h"
#include "fs/fuse_ops.h"
#include "fs/fuse_session.h"
#include "fs/metrics.h"
#include "fs/mountpoint.h"
#include "fs/serve.h"
#include "fs/supervisor.h"
#include "util/duration.h"
#include "util/log.h"
#include "util/sanitizers.h"

namespace stoker {

namespace {

// Files whose backing file outlives their last close (fs/passthrough.h).
constexpr size_t kIdleBackingFiles = 64;

// Where to mount. A new daemon checks, before anything is opened or created,
// that it may use FUSE (a container without /dev/fuse or CAP_SYS_ADMIN is
// told so in one line, not by libfuse's fallbacks) and prepares the
// mountpoint; a restarted daemon's is ours, mounted: not to be checked again.
Result<std::string> ResolveMountpoint(const MountOptions& options, const DaemonRestart* restart) {
  if (restart != nullptr) return restart->mountpoint;
  STOKER_RETURN_IF_ERROR(CheckFuseAccess(ProbeFuseAccess()));
  return PrepareMountpoint(options.mountpoint);
}

// The cache over the raw origin, and the views it makes (*views), which
// read through it; their list of what does not decode outlives the daemon
// (view_stats.h). The cache dir's lock names the mountpoint and the process
// that lives as long as the mount (the supervisor, under one). A restarted
// daemon never resets the cache again: the kernel may still read its files.
Result<std::unique_ptr<ObjectCache>> OpenCache(const MountOptions& options,
                                               const std::string& mountpoint,
                                               const std::shared_ptr<Origin>& raw,
                                               SupervisorLink* link, ViewMount* views) {
  auto make_views = [&](RawReader& reader) -> Result<ObjectCache::Derived> {
    STOKER_ASSIGN_OR_RETURN(
        *views, MakeViewMount(raw, options.views, reader, options.decode_pool, options.decoder));
    return ObjectCache::Derived{views->origin, views->derived};
  };
  CacheOptions cache_options = options.cache;
  cache_options.holder_pid = link != nullptr ? link->supervisor_pid() : getpid();
  cache_options.holder_mountpoint = mountpoint;
  if (link != nullptr && link->restart() != nullptr) cache_options.reset = false;
  cache_options.origin_location = raw->Location();
  // Passthrough reads the cache's data files: their pages are the one copy
  // in memory (the daemon's opens of such files keep none: OpenNode).
  cache_options.data_files_in_page_cache = PassthroughOf(options) != PassthroughMode::kOff;
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<ObjectCache> cache,
                          ObjectCache::Open(cache_options, raw, make_views));
  if (!views->views.empty()) {
    Result<size_t> kept = views->stats->errors.Persist(options.cache.dir + "/view-errors");
    if (kept.ok()) {
      views->stats->counters.errors += *kept;
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
  const CacheGroup* group;  // null without --peers
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
    if (group != nullptr) j.update(group->Stats());
    if (link != nullptr) {
      j["supervisor"] = {{"pid", link->supervisor_pid()},
                         {"generation", link->generation()},
                         {"restarts", link->restarts()}};
    }
    if (fs != nullptr) {
      if (fs->passthrough != nullptr) j.update(fs->passthrough->Stats());
      j["opens"] = fs->kernel_opens ? "kernel" : "daemon";
      j["opens_asked"] = options.kernel_opens ? "kernel" : fs->opens_policy ? "auto" : "daemon";
      if (fs->opens_policy) {
        if (auto d = fs->opens_policy->decision()) {
          j["opens_decision"] = {{"why", d->why}, {"after_opens", d->after_opens}};
        }
      }
      j["fuse_opens"] = fs->fuse_opens.load();
      j["node_files"] = fs->node_files.size();
      j["nodes_retired"] = fs->nodes_retired.load();
      j["listings_kept"] = fs->listings_kept.load();
      j["nodes_shed"] = fs->nodes_shed.load();
      j["max_nodes"] = fs->max_nodes;
      j["open_files"] = fs->files.size();
      j["open_dirs"] = fs->dirs.size();
      j["inodes"] = fs->inodes.size();
      j["nodes_peak"] = fs->inodes.peak();
      j["nodes_over_bound"] = fs->nodes_over_bound.load();
      j["read_latency_seconds"] = fs->read_latency.Json();
    }
    return j;
  }
};

// The kernel's entry and attribute timeout: --revalidate, but at most a day
// (with --revalidate never the daemon answers from what it holds, at no
// cost to the origin, so the kernel need not hold names for ever).
constexpr uint64_t kMaxKernelTimeout = 24 * 3600;

// The FUSE context over the cache. Supervised, its inode table is journaled
// to the supervisor, and a restarted daemon's is restored from the journal.
std::unique_ptr<FsContext> MakeFsContext(const MountOptions& options, ObjectCache& cache,
                                         Origin& origin, ControlFiles& control,
                                         SupervisorLink* link) {
  auto fs = std::make_unique<FsContext>(
      &cache, &origin, &control,
      static_cast<double>(std::min(options.cache.revalidate_seconds, kMaxKernelTimeout)),
      MaxReadFrom(options.fuse_options));
  fs->kernel_opens = options.kernel_opens;
  // --passthrough on asks for the opens that passthrough needs.
  if (options.opens_auto && !options.kernel_opens && options.passthrough != PassthroughMode::kOn) {
    fs->opens_policy = std::make_unique<OpensPolicy>(options.cache.slab_max_bytes);
  }
  fs->max_nodes = options.max_nodes;
  if (Result<struct stat> root = origin.Stat(""); root.ok()) {
    fs->inodes.SetRootOriginIno(root->st_ino);
  }
  if (link != nullptr) {
    const DaemonRestart* restart = link->restart();
    if (restart != nullptr && restart->nodes != nullptr) {
      fs->inodes.Restore(*restart->nodes);
      // The kernel opens files by itself on this connection for good.
      if (restart->nodes->kernel_opens()) {
        fs->kernel_opens = true;
        if (fs->opens_policy) fs->opens_policy->Inherit();
      }
    }
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

// Where the cache dir's file system breaks a promise of the cache (its bound,
// surviving a reboot): said in the log and, by the first daemon, to the CLI.
void WarnOfCacheDirFs(const MountOptions& options, ObjectCache& cache, ReadyLine& ready) {
  Result<CacheDirFs> fs = ProbeCacheDirFs(options.cache.dir);
  if (!fs.ok()) return;  // the cache opened there: nothing to say the mount cannot
  const nlohmann::json used = cache.Stats()["cache_used_bytes"];
  for (const std::string& w :
       CacheDirWarnings(*fs, options.cache.capacity_bytes,
                        used.is_number_unsigned() ? used.get<uint64_t>() : 0)) {
    LOG_WARN("{}", w);
    ready.Warn(w);
  }
}

// A refusal of what the user asked, told to the CLI as such (it exits 2).
Status Refuse(Status st, ReadyLine& ready) {
  if (!st.ok()) ready.Send("usage: " + st.message());
  return st;
}

// The daemon's life: open the origin, the views and the cache; build the
// FUSE context and session; serve; then take it all down in order.
Status RunMountImpl(const MountOptions& options, ReadyLine& ready, SupervisorLink* link) {
  const auto started = std::chrono::steady_clock::now();
  const DaemonRestart* restart = link != nullptr ? link->restart() : nullptr;
  STOKER_ASSIGN_OR_RETURN(const std::string mountpoint, ResolveMountpoint(options, restart));
  SetDirectIoEnabled(options.cache.direct_io);
  const bool never = options.cache.revalidate_seconds == kNeverSeconds;
  // With never, the origin is asked at mount only if the cache does not
  // keep the root's listing (below): a remount asks it nothing, and starts
  // while it is down.
  OriginOptions origin_options = options.origin_options;
  if (never) origin_options.check_at_mount = false;
  Result<std::shared_ptr<Origin>> made = MakeOrigin(options.origin, origin_options);
  if (!made.ok() && made.status().code() == kOriginRefusesOptions) {
    return Refuse(made.status(), ready);
  }
  STOKER_RETURN_IF_ERROR(made.status());
  std::shared_ptr<Origin> raw_origin = std::move(made).value();
  // A cache group: reads of versions go to the extents' owners first.
  std::unique_ptr<CacheGroup> group;
  if (!options.group.peers.empty()) {
    Result<std::unique_ptr<CacheGroup>> g =
        CacheGroup::Make(options.group, raw_origin, raw_origin->Location(),
                         options.cache.chunk_size, options.origin_options.stall_timeout_s);
    if (!g.ok()) return g.status().code() == EINVAL ? Refuse(g.status(), ready) : g.status();
    group = std::move(g).value();
    raw_origin = group->origin();
  }
  // --revalidate never: listings kept in the index, under the views and the
  // cache alike (cache/kept_listings.h); the store comes with the cache.
  std::shared_ptr<KeptListingsOrigin> kept;
  if (never) {
    kept = std::make_shared<KeptListingsOrigin>(raw_origin);
    raw_origin = kept;
  }
  // A restarted daemon must not look at its own mount (see Serve); the
  // first one checked this.
  fuse_set_log_func(LogFromFuse);
  std::unique_ptr<EarlyMount> early;
  if (restart == nullptr) {
    STOKER_RETURN_IF_ERROR(
        Refuse(CheckNesting(options.origin, mountpoint, options.cache.dir), ready));
    STOKER_ASSIGN_OR_RETURN(early, EarlyMount::Make(options, mountpoint));
  }
  // With views, fs/ and the cache both see the ViewNamespace over the origin.
  ViewMount views;
  Result<std::unique_ptr<ObjectCache>> opened =
      OpenCache(options, mountpoint, raw_origin, link, &views);
  if (!opened.ok() && opened.status().code() == kCacheMismatch) {
    return Refuse(opened.status(), ready);
  }
  STOKER_RETURN_IF_ERROR(opened.status());
  std::unique_ptr<ObjectCache> cache = std::move(opened).value();
  if (kept != nullptr) kept->Attach(&cache->listings());
  if (never && cache->listings().Has("")) {
    LOG_INFO("--revalidate never: the root's listing is kept; the origin is not asked at mount");
  } else if (never) {
    if (Status st = raw_origin->CheckAtMount(); !st.ok()) {
      return st.code() == kOriginRefusesOptions ? Refuse(st, ready) : st;
    }
  }
  if (restart == nullptr) WarnOfCacheDirFs(options, *cache, ready);
  // Whatever way this function returns, the group's server stops before the
  // cache it reads closes.
  struct StopGroup {
    CacheGroup* group;
    ~StopGroup() {
      if (group != nullptr) group->Stop();
    }
  } stop_group{group.get()};
  if (group != nullptr) STOKER_RETURN_IF_ERROR(group->Serve(cache.get()));
  const std::shared_ptr<Origin> origin = views.origin;

  DaemonStats daemon_stats{options, mountpoint, started, *cache, *origin, views, link, group.get()};
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
  if (fs->kernel_opens) {
    passthrough.Disable("opens_kernel");
    cache->SetDataFilesInPageCache(false);
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
  if (group != nullptr) group->Stop();         // its server reads the cache
  if (kept != nullptr) kept->Attach(nullptr);  // the store goes with the cache
  cache.reset();                               // stops the cache's threads, flushes the index
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
  if (kThreadSanitizer) so.single_thread_wait = std::chrono::milliseconds(500);
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
  // ThreadSanitizer's runtime keeps a thread of its own: such a build (a
  // test build) runs without a supervisor, and says so in the log.
  if (!kThreadSanitizer) {
    // A mount the user asked to keep across crashes is never quietly one
    // that a crash ends.
    return Status::Error(EDEADLK, "no supervisor could be started (" + st.message() +
                                      "); mount with --no-supervise to run without one");
  }
  LOG_WARN("no supervisor: {}; a daemon crash will end the mount", st.message());
  spdlog::flush_every(std::chrono::seconds(2));
  return unsupervised();
}

}  // namespace stoker
