// `stoker mount`: checks the arguments, then either serves in the foreground
// or forks a daemon and returns once the daemon says the mount is live.
//
// The parent/daemon handshake: a pipe whose write end RunMount gets as
// ready_fd. The parent reads one line: "ok" means live; "error: <why>" or EOF
// (the daemon died) means no mount, and the parent makes sure nothing stale
// is left at the mountpoint before it reports the error.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "fs/fuse_access.h"
#include "fs/metrics.h"
#include "fs/mountpoint.h"
#include "mount-tools/commands.h"
#include "mount-tools/init_process.h"
#include "mount-tools/mount_root.h"
#include "util/files.h"
#include "util/log.h"
#include "util/size.h"

namespace stoker {
namespace {

// How long a daemon that reported an error gets to exit before it is killed.
constexpr int kDaemonExitWaitMs = 10000;

std::string MakeAbsolute(const std::string& path) {
  if (path.find("://") != std::string::npos) return path;  // s3://, http(s)://
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

Result<uint64_t> ParseSizeFlag(const std::string& flag, const std::string& text) {
  auto r = ParseSize(text);
  if (!r.ok()) return Status::Invalid(flag + ": " + r.status().message());
  return r;
}

void WriteLine(int fd, const std::string& line) {
  std::string s = line + "\n";
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

Status StartLogging(const std::string& path, const std::string& level) {
  try {
    InitLogging(path, level);
  } catch (const std::exception& e) {
    return Status::IOError("cannot start logging to '" + path + "': " + e.what());
  }
  return Status::OK();
}

int RunForeground(const MountOptions& options, const std::string& log_file) {
  if (Status st = StartLogging(log_file, options.log_level); !st.ok()) {
    PrintError(st.message());
    return kExitFailure;
  }
  Status st = RunMount(options);
  spdlog::shutdown();
  if (!st.ok()) {
    PrintError(st.message());
    return kExitFailure;
  }
  return kExitOk;
}

// In the forked child. Returns the process's exit code.
int RunDaemonChild(MountOptions options, const std::string& log_file, int ready_fd) {
  setsid();
  // A reader that went away (the parent, a control-socket client) must not
  // kill the daemon.
  signal(SIGPIPE, SIG_IGN);
  auto fail = [&](const std::string& why) {
    WriteLine(ready_fd, "error: " + why);
    return kExitFailure;
  };
  // A mount refused before it used a cache dir it made (a missing origin, a
  // busy mountpoint) leaves no dir behind, nor a log in it.
  std::vector<std::string> made;
  if (Status st = MakeDirs(options.cache.dir, 0700, 0700, &made); !st.ok()) {
    return fail("cache dir: " + st.message());
  }
  std::string log_path = log_file.empty() ? options.cache.dir + "/stoker.log" : log_file;
  auto unmake = [&] {
    if (made.empty()) return;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(options.cache.dir, ec)) {
      if (e.path().filename() != "stoker.log" || !log_file.empty()) return;  // the cache was used
    }
    if (log_file.empty()) unlink(log_path.c_str());
    for (auto d = made.rbegin(); d != made.rend(); ++d) {
      if (rmdir(d->c_str()) != 0) break;
    }
  };
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) return fail(Status::FromErrno("log file '" + log_path + "'").message());
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  // stdout/stderr go to the log too, so that a crash message is kept.
  dup2(log_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  if (Status st = StartLogging(log_path, options.log_level); !st.ok()) return fail(st.message());
  if (chdir("/") != 0) return fail(Status::FromErrno("chdir /").message());

  // RunMount closes ready_fd once it has said "ok" or "error"; our copy lets
  // us report an error it returned without writing (or after writing, where
  // the parent reads only the first line anyway).
  int report_fd = fcntl(ready_fd, F_DUPFD_CLOEXEC, 3);
  options.ready_fd = ready_fd;
  Status st = RunMount(options);
  if (!st.ok()) {
    LOG_ERROR("mount failed: {}", st.message());
    if (report_fd >= 0) WriteLine(report_fd, "error: " + st.message());
    spdlog::shutdown();
    unmake();
  } else {
    LOG_INFO("daemon exiting after clean unmount");
  }
  if (report_fd >= 0) close(report_fd);
  spdlog::shutdown();
  return st.ok() ? kExitOk : kExitFailure;
}

// Reads the handshake line ("" at EOF without one).
std::string ReadHandshake(int fd) {
  std::string line;
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') break;
    line += c;
  }
  return line;
}

// Waits for the child, killing it if it lingers; returns its wait status.
int ReapChild(pid_t pid) {
  int wstatus = 0;
  for (int waited = 0;; waited += 20) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return wstatus;
    if (waited >= kDaemonExitWaitMs) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      return wstatus;
    }
    usleep(20000);
  }
}

// After the daemon died: a FUSE mount left at the mountpoint whose daemon is
// gone (every access ENOTCONN) is ours; clear it. A live mount is not ours.
void ClearStaleMount(const std::string& mountpoint) {
  auto mounts = ReadMountInfo();
  if (!mounts.ok()) return;
  auto m = FindMountAt(*mounts, mountpoint);
  if (!m || !IsFuseFsType(m->fstype) || !IsDeadFuseMount(mountpoint)) return;
  if (Status s = UnmountFuse(mountpoint, /*lazy=*/true); !s.ok()) {
    PrintError("could not clear the stale mount at '" + mountpoint + "': " + s.message());
  }
}

int RunDaemonized(const MountOptions& options, const std::string& log_file) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    PrintError(Status::FromErrno("pipe").message());
    return kExitFailure;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    PrintError(Status::FromErrno("fork").message());
    return kExitFailure;
  }
  if (pid == 0) {
    close(pipefd[0]);
    return RunDaemonChild(options, log_file, pipefd[1]);
  }
  close(pipefd[1]);
  std::string line = ReadHandshake(pipefd[0]);
  close(pipefd[0]);
  if (line == "ok") return kExitOk;

  std::string why;
  if (line.rfind("error: ", 0) == 0) {
    why = line.substr(7);
  } else if (!line.empty()) {
    why = "unexpected reply from the daemon: '" + line + "'";
  }
  int wstatus = ReapChild(pid);
  if (why.empty()) {
    std::string how = WIFSIGNALED(wstatus)
                          ? std::string("was killed by signal ") + strsignal(WTERMSIG(wstatus))
                          : "exited with status " + std::to_string(WEXITSTATUS(wstatus));
    std::string log_path = log_file.empty() ? options.cache.dir + "/stoker.log" : log_file;
    why = "the daemon " + how + " before the mount was live (see " + log_path + ")";
  }
  ClearStaleMount(options.mountpoint);
  PrintError(why);
  return kExitFailure;
}

// `stoker mount` once its arguments parsed. Returns the exit code.
int RunMountCommand(const MountArgs& args) {
  auto options = ToMountOptions(args);
  if (!options.ok()) {
    PrintError(options.status().message());
    return kExitUsage;
  }
  if (Status st = CheckFuseAccess(ProbeFuseAccess()); !st.ok()) {
    PrintError(st.message());
    return kExitFailure;
  }
  std::string log_file = args.log_file.empty() ? "" : MakeAbsolute(args.log_file);
  // As a container's PID 1, serve in the foreground, in a child of PID 1
  // (init_process.h): a detached daemon would die with PID 1.
  if (args.foreground || getpid() == 1) {
    return RunAsInitIfPid1([&] { return RunForeground(*options, log_file); });
  }
  return RunDaemonized(*options, log_file);
}

}  // namespace

std::vector<std::string> SplitFuseOptions(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (const auto& group : raw) {
    size_t start = 0;
    while (start <= group.size()) {
      size_t comma = group.find(',', start);
      if (comma == std::string::npos) comma = group.size();
      if (comma > start) out.push_back(group.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

namespace {

// "60" -> 60; what names the flag and its unit in the error.
Result<uint64_t> ParseWholeNumber(const char* flag, const std::string& v, const char* unit) {
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
    return Status::Invalid(std::string(flag) + " " + v + ": expected a whole number of " + unit);
  }
  return std::stoull(v);
}

Status ToOriginOptions(const MountArgs& args, uint64_t revalidate_seconds, OriginOptions* o) {
  const bool remote = args.origin.find("://") != std::string::npos;
  const bool s3 = args.origin.rfind("s3://", 0) == 0;
  if (!s3 && (!args.s3_endpoint.empty() || args.s3_path_style)) {
    return Status::Invalid("--s3-endpoint and --s3-path-style are for s3:// origins");
  }
  if ((!remote || s3) && !args.manifest.empty()) {
    return Status::Invalid("--manifest is for http(s):// origins");
  }
  o->s3_endpoint = args.s3_endpoint;
  o->s3_path_style = args.s3_path_style;
  o->manifest = args.manifest.empty() ? "" : MakeAbsolute(args.manifest);
  o->listing_ttl_seconds = revalidate_seconds;
  STOKER_ASSIGN_OR_RETURN(uint64_t page,
                          ParseWholeNumber("--s3-page-size", args.s3_page_size, "keys"));
  if (page < 1 || page > 1000) {
    return Status::Invalid("--s3-page-size " + args.s3_page_size + ": must be 1..1000");
  }
  o->s3_page_size = static_cast<int>(page);
  STOKER_ASSIGN_OR_RETURN(
      uint64_t connect,
      ParseWholeNumber("--origin-connect-timeout", args.origin_connect_timeout, "seconds"));
  STOKER_ASSIGN_OR_RETURN(uint64_t stall, ParseWholeNumber("--origin-stall-timeout",
                                                           args.origin_stall_timeout, "seconds"));
  STOKER_ASSIGN_OR_RETURN(uint64_t retries,
                          ParseWholeNumber("--origin-retries", args.origin_retries, "retries"));
  if (connect < 1 || connect > 3600 || stall < 1 || stall > 3600) {
    return Status::Invalid("--origin-connect-timeout and --origin-stall-timeout: 1..3600 seconds");
  }
  if (retries > 100)
    return Status::Invalid("--origin-retries " + args.origin_retries + ": at most 100");
  o->connect_timeout_s = static_cast<long>(connect);
  o->stall_timeout_s = static_cast<long>(stall);
  o->retries = static_cast<int>(retries);
  STOKER_ASSIGN_OR_RETURN(uint64_t backoff,
                          ParseWholeNumber("--origin-backoff", args.origin_backoff, "seconds"));
  if (backoff > 3600) {
    return Status::Invalid("--origin-backoff " + args.origin_backoff + ": at most 3600 seconds");
  }
  o->backoff_seconds = static_cast<long>(backoff);
  return Status::OK();
}

}  // namespace

Result<MountOptions> ToMountOptions(const MountArgs& args) {
  MountOptions o;
  if (args.origin.empty()) return Status::Invalid("ORIGIN is empty");
  if (args.mountpoint.empty()) return Status::Invalid("MOUNTPOINT is empty");
  if (args.cache_dir.empty()) return Status::Invalid("--cache is empty");
  o.origin = MakeAbsolute(args.origin);
  o.mountpoint = MakeAbsolute(args.mountpoint);
  o.cache.dir = MakeAbsolute(args.cache_dir);
  // Before anything is created: a cache dir made inside the mountpoint
  // would make it look non-empty, and be hidden by the mount.
  STOKER_RETURN_IF_ERROR(CheckNesting(o.origin, o.mountpoint, o.cache.dir));

  STOKER_ASSIGN_OR_RETURN(o.cache.chunk_size, ParseSizeFlag("--chunk-size", args.chunk_size));
  STOKER_ASSIGN_OR_RETURN(o.cache.capacity_bytes, ParseSizeFlag("--cache-size", args.cache_size));
  STOKER_ASSIGN_OR_RETURN(o.cache.prefetch_bytes, ParseSizeFlag("--prefetch", args.prefetch));
  STOKER_ASSIGN_OR_RETURN(o.cache.slab_max_bytes, ParseSizeFlag("--slab-max", args.slab_max));
  uint64_t chunk = o.cache.chunk_size;
  if (chunk < kMinChunkSize || chunk > kMaxChunkSize) {
    return Status::Invalid("--chunk-size " + args.chunk_size + ": must be between " +
                           FormatSize(kMinChunkSize) + " and " + FormatSize(kMaxChunkSize));
  }
  if (chunk % 4096 != 0) {
    return Status::Invalid("--chunk-size " + args.chunk_size + ": must be a multiple of 4 KiB");
  }
  if (o.cache.capacity_bytes / kMinChunksInCache < chunk) {
    return Status::Invalid("--cache-size " + args.cache_size + ": must hold at least " +
                           std::to_string(kMinChunksInCache) + " chunks (" +
                           FormatSize(kMinChunksInCache * chunk) + " with a chunk size of " +
                           FormatSize(chunk) + ")");
  }
  STOKER_ASSIGN_OR_RETURN(o.cache.revalidate_seconds,
                          ParseWholeNumber("--revalidate", args.revalidate, "seconds"));
  STOKER_ASSIGN_OR_RETURN(o.max_nodes, ParseWholeNumber("--max-nodes", args.max_nodes, "nodes"));
  if (o.max_nodes != 0 && o.max_nodes < 1000) {
    return Status::Invalid("--max-nodes " + args.max_nodes + ": 0 (no bound) or at least 1000");
  }
  STOKER_ASSIGN_OR_RETURN(o.cache.dir_prefetch_files,
                          ParseWholeNumber("--prefetch-files", args.prefetch_files, "files"));
  if (o.cache.dir_prefetch_files > kMaxPrefetchFiles) {
    return Status::Invalid("--prefetch-files " + args.prefetch_files + ": at most " +
                           std::to_string(kMaxPrefetchFiles));
  }

  if (args.io_backend == "auto") {
    o.cache.io_backend = IoBackendKind::kAuto;
  } else if (args.io_backend == "io_uring") {
    o.cache.io_backend = IoBackendKind::kUring;
  } else if (args.io_backend == "syscall") {
    o.cache.io_backend = IoBackendKind::kSyscall;
  } else {
    return Status::Invalid("--io-backend " + args.io_backend +
                           ": must be auto, io_uring or syscall");
  }
  if (args.passthrough == "auto") {
    o.passthrough = PassthroughMode::kAuto;
  } else if (args.passthrough == "on") {
    o.passthrough = PassthroughMode::kOn;
  } else if (args.passthrough == "off") {
    o.passthrough = PassthroughMode::kOff;
  } else {
    return Status::Invalid("--passthrough " + args.passthrough + ": must be auto, on or off");
  }
  if (args.opens == "kernel") {
    o.kernel_opens = true;
    if (o.passthrough == PassthroughMode::kOn) {
      return Status::Invalid(
          "--opens kernel leaves no open to pass through: it excludes --passthrough on");
    }
  } else if (args.opens != "daemon") {
    return Status::Invalid("--opens " + args.opens + ": must be daemon or kernel");
  }
  static const char* kLevels[] = {"error", "warn", "info", "debug"};
  bool level_ok = false;
  for (const char* l : kLevels) level_ok = level_ok || args.log_level == l;
  if (!level_ok) {
    return Status::Invalid("--log-level " + args.log_level +
                           ": must be error, warn, info or debug");
  }
  o.log_level = args.log_level;
  o.cache.direct_io = !args.no_direct_io;
  o.supervise = args.supervise;
  STOKER_RETURN_IF_ERROR(ToOriginOptions(args, o.cache.revalidate_seconds, &o.origin_options));
  o.origin_options.io_backend = o.cache.io_backend;  // a local origin's reads too
  o.fuse_options = SplitFuseOptions(args.fuse_options);
  o.check_permissions = args.default_permissions;
  if (!args.metrics.empty()) STOKER_RETURN_IF_ERROR(ParseMetricsAddress(args.metrics).status());
  o.metrics = args.metrics;
  for (const std::string& f : o.fuse_options) {
    if (f == "default_permissions" && !o.check_permissions) {
      return Status::Invalid("-o default_permissions contradicts --no-default-permissions");
    }
  }
  std::set<std::string> view_names;
  for (const std::string& v : args.views) {
    Result<ViewSpec> spec = ParseViewSpec(v);
    if (!spec.ok()) return Status::Invalid("--view " + v + ": " + spec.status().message());
    if (spec->name == "stoker") {
      return Status::Invalid("--view " + v + ": .stoker is the mount's control directory");
    }
    if (!view_names.insert(spec->name).second) {
      return Status::Invalid("--view " + v + ": a view named '" + spec->name + "' is given twice");
    }
    o.views.push_back(std::move(spec).value());
  }
  auto decoder = ParseDecoderKind(args.decoder);
  if (!decoder.ok()) return Status::Invalid("--decoder " + decoder.status().message());
  o.decoder.kind = *decoder;
  for (const std::string& d : args.gpu_library_path)
    o.decoder.gpu.library_path.push_back(MakeAbsolute(d));
  return o;
}

Subcommand AddMountCommand(CLI::App& root) {
  auto args = std::make_shared<MountArgs>();
  CLI::App* app = root.add_subcommand(
      "mount", "Mount ORIGIN at MOUNTPOINT, read-only, with an SSD cache in front of it");
  app->add_option("ORIGIN", args->origin,
                  "What to overlay: a directory (an HDD or NFS/SMB mount), s3://BUCKET[/PREFIX] "
                  "or http(s)://HOST/PATH/")
      ->required();
  app->add_option("MOUNTPOINT", args->mountpoint, "Empty directory to mount on")->required();
  app->add_option("--cache", args->cache_dir,
                  "Cache directory on the SSD (created 0700 if missing)")
      ->required();
  app->add_option("--cache-size", args->cache_size,
                  "Bound on the cache's space on disk: 512M, 200G, bytes")
      ->capture_default_str();
  app->add_option("--chunk-size", args->chunk_size,
                  "Unit of fetching and caching, 64K..64M, a multiple of 4K")
      ->capture_default_str();
  app->add_option("--slab-max", args->slab_max,
                  "Files up to this size (and one chunk) share slab files in the cache; "
                  "0 gives each its own file")
      ->capture_default_str();
  app->add_option("--revalidate", args->revalidate,
                  "Seconds after which an open re-checks the origin file (0 = every open)")
      ->capture_default_str();
  app->add_option("--prefetch", args->prefetch,
                  "Bytes to read ahead of a sequential reader (0 disables)")
      ->capture_default_str();
  app->add_option("--prefetch-files", args->prefetch_files,
                  "Files to read ahead of a reader going through a directory in order "
                  "(0 disables)")
      ->capture_default_str();
  app->add_flag("-f,--foreground", args->foreground,
                "Serve in this process, logging to stderr, until unmounted");
  app->add_flag("--supervise,!--no-supervise", args->supervise,
                "Keep the mount across a daemon crash (the default): a supervisor process holds "
                "/dev/fuse and starts a new daemon on it, so readers see a pause instead of "
                "errors; --no-supervise: one process, and a crash leaves the mount dead");
  app->add_flag("--default-permissions,!--no-default-permissions", args->default_permissions,
                "The kernel checks the origin's mode bits, owner and group for every reader (the "
                "default); --no-default-permissions: whoever the mount lets in (every user with "
                "-o allow_other) reads every file");
  app->add_option("--metrics", args->metrics,
                  "Serve metrics for Prometheus at http://ADDR:PORT/metrics: HOST:PORT, or :PORT "
                  "or PORT for the loopback address (default: none)");
  app->add_option("-o", args->fuse_options,
                  "FUSE mount options, passed through (allow_other lets other users in); "
                  "repeatable")
      ->allow_extra_args(false);
  app->add_option("--io-backend", args->io_backend, "auto, io_uring or syscall")
      ->capture_default_str();
  app->add_flag("--no-direct-io", args->no_direct_io,
                "Read the origin and write the cache through the page cache (default: O_DIRECT "
                "where the file systems allow it, which saves two copies on a cold read)");
  app->add_option("--passthrough", args->passthrough,
                  "auto, on or off: let the kernel read files held whole in the cache straight "
                  "from the SSD (FUSE passthrough, Linux 6.9+, needs CAP_SYS_ADMIN); on: fail "
                  "the mount if the kernel refuses")
      ->capture_default_str();
  app->add_option("--max-nodes", args->max_nodes,
                  "Most files the kernel keeps looked up (each costs the daemon and its supervisor "
                  "a record); past it the oldest are dropped from its cache, to be looked up again "
                  "if used; 0: no bound")
      ->capture_default_str();
  app->add_option("--opens", args->opens,
                  "daemon or kernel: kernel lets the kernel open files without asking the daemon "
                  "(no round trip per open, so cached small files read at page-cache speed; no "
                  "passthrough)")
      ->capture_default_str();
  app->add_option("--log-level", args->log_level, "error, warn, info or debug")
      ->capture_default_str();
  app->add_option("--view", args->views,
                  "Show MOUNTPOINT/.NAME with TFRecord and JPEG files decoded: NAME[:OPTIONS], "
                  "options channels=0|1|3,dct=fast|accurate,feature=KEY,on_error=fail|skip,"
                  "decoder=cpu|gpu,fallback=cpu|none,compression=auto|none|gzip|zlib; "
                  "repeatable")
      ->allow_extra_args(false);
  app->add_option("--decoder", args->decoder,
                  "Decoder of the views: auto (the GPU, nvJPEG, where a device is found), cpu, or "
                  "gpu (fail without one); a view's decoder=cpu|gpu overrides it")
      ->capture_default_str();
  app->add_option("--gpu-library-path", args->gpu_library_path,
                  "Directory searched first for libnvjpeg and libcudart (e.g. a pip nvidia-nvjpeg "
                  "wheel's nvidia/nvjpeg/lib); repeatable")
      ->allow_extra_args(false);
  app->add_option("--s3-endpoint", args->s3_endpoint,
                  "S3-compatible server for s3:// origins: http(s)://HOST[:PORT] (default AWS; "
                  "credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials, "
                  "region from AWS_REGION)");
  app->add_flag("--s3-path-style", args->s3_path_style,
                "Address the bucket in the path (ENDPOINT/BUCKET/KEY), not the host name");
  app->add_option("--s3-page-size", args->s3_page_size)->group("");  // tests
  app->add_option("--manifest", args->manifest,
                  "For http(s):// origins: a file listing the tree, one 'PATH SIZE' per line "
                  "(default: the server's autoindex listings)");
  app->add_option("--origin-connect-timeout", args->origin_connect_timeout,
                  "Remote origins: seconds to wait for a connection")
      ->capture_default_str();
  app->add_option("--origin-stall-timeout", args->origin_stall_timeout,
                  "Seconds a remote transfer may stall before it is retried, and a call to a local "
                  "origin before the origin counts as hung (cached files are then served without "
                  "asking it)")
      ->capture_default_str();
  app->add_option("--origin-retries", args->origin_retries,
                  "Remote origins: retries of a failed request (exponential backoff)")
      ->capture_default_str();
  app->add_option("--origin-backoff", args->origin_backoff,
                  "Seconds after a request found the origin unreachable (or hung) during which "
                  "cached files and listed directories are served without asking it "
                  "(0: always ask)")
      ->capture_default_str();
  app->add_option("--log-file", args->log_file,
                  "Log here instead of CACHE_DIR/stoker.log (or stderr with --foreground)");
  return {app, [args] { return RunMountCommand(*args); }};
}

}  // namespace stoker
