// `stoker mount`: checks the arguments, then either serves in the foreground
// or forks a daemon and returns once the daemon says the mount is live.
//
// The parent/daemon handshake: a pipe whose write end RunMount gets as
// ready_fd. The parent prints each "warning: <what>" line on stderr, then
// reads one line: "ok" means live; "error: <why>", "usage: <why>" (a refusal
// of the arguments: exit 2) or EOF (the daemon died) means no mount, and the
// parent makes sure nothing stale is left at the mountpoint before it
// reports the error.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string_view>

#include "decode/view/view_options.h"
#include "fs/fuse_access.h"
#include "fs/kernel_mounts.h"
#include "mount-tools/commands.h"
#include "mount-tools/init_process.h"
#include "mount-tools/mount_root.h"
#include "util/files.h"
#include "util/log.h"

namespace stoker {
namespace {

// How long a daemon that reported an error gets to exit before it is killed.
constexpr int kDaemonExitWaitMs = 10000;

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

// Reads the handshake: prints the warnings before it on stderr when asked,
// returns its line ("" at EOF, or where a non-blocking fd has nothing).
std::string ReadHandshake(int fd, bool print_warnings) {
  constexpr std::string_view kWarning = "warning: ";
  for (;;) {
    std::string line;
    char c;
    ssize_t n;
    for (;;) {
      n = read(fd, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || c == '\n') break;
      line += c;
    }
    if (line.rfind(kWarning, 0) != 0) return line;
    if (print_warnings)
      std::fprintf(stderr, "stoker: warning: %s\n", line.c_str() + kWarning.size());
    if (n <= 0) return "";
  }
}

bool IsRefusal(const std::string& line) { return line.rfind("usage: ", 0) == 0; }
// What an "error: " or "usage: " line says (both tags are 7 characters).
std::string Why(const std::string& line) { return line.substr(7); }

int RunForeground(MountOptions options, const std::string& log_file) {
  if (Status st = StartLogging(log_file, options.log_level); !st.ok()) {
    PrintError(st.message());
    return kExitFailure;
  }
  // The handshake is not waited for here (the log is the terminal); it
  // tells only whether a failure was a refusal of the arguments.
  int pipefd[2] = {-1, -1};
  if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) == 0) options.ready_fd = pipefd[1];
  Status st = RunMount(options);
  spdlog::shutdown();
  std::string line;
  if (pipefd[0] >= 0) {
    line = ReadHandshake(pipefd[0], /*print_warnings=*/false);
    close(pipefd[0]);
  }
  if (!st.ok()) {
    PrintError(IsRefusal(line) ? Why(line) : st.message());
    return IsRefusal(line) ? kExitUsage : kExitFailure;
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
  std::string line = ReadHandshake(pipefd[0], /*print_warnings=*/true);
  close(pipefd[0]);
  if (line == "ok") return kExitOk;

  std::string why;
  if (line.rfind("error: ", 0) == 0 || IsRefusal(line)) {
    why = Why(line);
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
  return IsRefusal(line) ? kExitUsage : kExitFailure;
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

// --NAME and --no-NAME setting *value to true and false; each excludes the
// other. The check is in the callbacks (which run once all is parsed) rather
// than CLI11's excludes(), which --help would print on every such line.
void AddFlagPair(CLI::App* app, const std::string& on, const std::string& off, bool* value,
                 const std::string& on_help, const std::string& off_help) {
  auto set = [app, on, off, value](bool to) {
    if (app->get_option(on)->count() > 0 && app->get_option(off)->count() > 0) {
      throw CLI::ExcludesError(on, off);
    }
    *value = to;
  };
  app->add_flag_callback(
      on, [set] { set(true); }, on_help);
  app->add_flag_callback(
      off, [set] { set(false); }, off_help);
}

}  // namespace

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
      ->required()
      ->type_name("DIR");
  app->add_option("--cache-size", args->cache_size,
                  "Bound on the cache's space on disk: 512M, 200G, bytes; at least " +
                      std::to_string(kMinChunksInCache) + " chunks")
      ->capture_default_str()
      ->type_name("SIZE");
  app->add_option("--chunk-size", args->chunk_size,
                  "Unit of fetching and caching, 64K..64M, a multiple of 4K")
      ->capture_default_str()
      ->type_name("SIZE");
  app->add_option("--slab-max", args->slab_max,
                  "Files up to this size (and one chunk) share slab files in the cache; "
                  "0 gives each its own file")
      ->capture_default_str()
      ->type_name("SIZE");
  app->add_option("--revalidate", args->revalidate,
                  "How long after its last check an open re-checks the origin file (0 = every "
                  "open; never = once known, never again, for datasets that do not change): "
                  "seconds, or 90s, 1m, 2h, 1d, or never")
      ->capture_default_str()
      ->type_name("DURATION");
  app->add_option("--prefetch", args->prefetch,
                  "Bytes to read ahead of a sequential reader (0 disables)")
      ->capture_default_str()
      ->type_name("SIZE");
  app->add_option("--prefetch-files", args->prefetch_files,
                  "Files to read ahead of a reader going through a directory in order "
                  "(0 disables); at most " +
                      std::to_string(kMaxPrefetchFiles))
      ->capture_default_str()
      ->type_name("N");
  app->add_option("--order-ahead", args->order_ahead,
                  "Files of a reader's order (`stoker order`) fetched ahead of it (0: orders "
                  "are refused); at most " +
                      std::to_string(kMaxOrderAhead))
      ->capture_default_str()
      ->type_name("N");
  app->add_option("--order-ahead-bytes", args->order_ahead_bytes,
                  "Most bytes of a reader's order fetched ahead of it and not yet opened (not 0)")
      ->capture_default_str()
      ->type_name("SIZE");
  app->add_flag("-f,--foreground", args->foreground,
                "Serve in this process, logging to stderr, until unmounted");
  // Each of a pair is a flag of its own, so that --help shows no default
  // value ("{false}") beside the one that turns the default off.
  AddFlagPair(app, "--supervise", "--no-supervise", &args->supervise,
              "Keep the mount across a daemon crash (the default): a supervisor process holds "
              "/dev/fuse and starts a new daemon on it, so readers see a pause instead of "
              "errors",
              "One process: a daemon crash leaves the mount dead");
  AddFlagPair(app, "--default-permissions", "--no-default-permissions", &args->default_permissions,
              "The kernel checks the origin's mode bits, owner and group for every reader (the "
              "default)",
              "Whoever the mount lets in (every user with -o allow_other) reads every file");
  app->add_option("--metrics", args->metrics,
                  "Serve metrics for Prometheus at http://ADDR:PORT/metrics: HOST:PORT, or :PORT "
                  "or PORT for the loopback address (default: none)")
      ->type_name("ADDR:PORT");
  app->add_option("--peers", args->peers,
                  "Join a cache group: its members, HOST:PORT,... or dns:NAME:PORT (a headless "
                  "Service); each extent is fetched from the origin by one member and read from "
                  "it by the others (default: none; docs/kubernetes.md)")
      ->type_name("MEMBERS");
  app->add_option("--peer-listen", args->peer_listen,
                  "Where this member serves the others (with --peers)")
      ->type_name("ADDR:PORT")
      ->capture_default_str();
  app->add_option("--peer-advertise", args->peer_advertise,
                  "How the other members reach this one, as --peers names it (default: "
                  "--peer-listen, which then must not be 0.0.0.0)")
      ->type_name("HOST:PORT");
  app->add_option("--peer-token-file", args->peer_token_file,
                  "The group's shared token, on the first line of FILE, read again when it "
                  "changes (required with --peers)")
      ->type_name("FILE");
  app->add_option("--peer-group", args->peer_group,
                  "The group's name; members serve only their own group (default: from the "
                  "origin and the chunk size)")
      ->type_name("NAME");
  app->add_option("-o", args->fuse_options,
                  "FUSE mount options, passed through (allow_other lets other users in); "
                  "repeatable")
      ->allow_extra_args(false)
      ->type_name("OPTIONS");
  app->add_option("--io-backend", args->io_backend, "How the cache and a local origin are read")
      ->capture_default_str()
      ->type_name("auto|io_uring|syscall");
  app->add_flag("--no-direct-io", args->no_direct_io,
                "Read the origin and write the cache through the page cache (default: O_DIRECT "
                "where the file systems allow it, which saves two copies on a cold read; files "
                "that may be passed through are written through the page cache either way)");
  app->add_option("--passthrough", args->passthrough,
                  "Let the kernel read files held whole in the cache straight from the SSD (FUSE "
                  "passthrough, Linux 6.9+, needs CAP_SYS_ADMIN); on: fail the mount if the "
                  "kernel refuses")
      ->capture_default_str()
      ->type_name("auto|on|off");
  app->add_option("--max-nodes", args->max_nodes,
                  "Most files the kernel keeps looked up (each costs the daemon and its supervisor "
                  "a record); past it the oldest are dropped from its cache, to be looked up again "
                  "if used; 0: no bound, else at least 1000")
      ->capture_default_str()
      ->type_name("N");
  app->add_option("--opens", args->opens,
                  "Who opens files: daemon (each open reaches it; passthrough for files held "
                  "whole), kernel (no round trip per open, so cached small files read at "
                  "page-cache speed; no passthrough), auto (daemon, then kernel once 900 of the "
                  "last 1000 opens were of small files)")
      ->capture_default_str()
      ->type_name("auto|daemon|kernel");
  app->add_option("--log-level", args->log_level, "What the daemon logs")
      ->capture_default_str()
      ->type_name("error|warn|info|debug");
  app->add_option("--view", args->views,
                  "Show MOUNTPOINT/.NAME with TFRecord and JPEG files decoded; OPTIONS: " +
                      ViewOptionSyntax() + " (docs/views.md); repeatable")
      ->allow_extra_args(false)
      ->type_name("NAME[:OPTIONS]");
  app->add_option("--decoder", args->decoder,
                  "Decoder of the views: auto (the GPU, nvJPEG, where a device is found), cpu, or "
                  "gpu (fail without one); a view's decoder=cpu|gpu overrides it")
      ->capture_default_str()
      ->type_name("auto|cpu|gpu");
  app->add_option("--gpu-library-path", args->gpu_library_path,
                  "Directory searched first for libnvjpeg and libcudart (e.g. a pip nvidia-nvjpeg "
                  "wheel's nvidia/nvjpeg/lib); repeatable")
      ->allow_extra_args(false)
      ->type_name("DIR");
  app->add_option("--s3-endpoint", args->s3_endpoint,
                  "S3-compatible server for s3:// origins: http(s)://HOST[:PORT] (default AWS; "
                  "credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials, "
                  "region from AWS_REGION)")
      ->type_name("URL");
  app->add_flag("--s3-path-style", args->s3_path_style,
                "Address the bucket in the path (ENDPOINT/BUCKET/KEY), not the host name");
  app->add_option("--s3-page-size", args->s3_page_size)->group("");  // tests
  app->add_option("--manifest", args->manifest,
                  "For http(s):// origins: a file listing the tree, one 'PATH SIZE' per line "
                  "(default: the server's autoindex listings)")
      ->type_name("FILE");
  app->add_option("--origin-connect-timeout", args->origin_connect_timeout,
                  "Remote origins: how long to wait for a connection; 1s..1h")
      ->capture_default_str()
      ->type_name("DURATION");
  app->add_option("--origin-stall-timeout", args->origin_stall_timeout,
                  "How long a remote transfer may stall before it is retried, and a call to a "
                  "local origin before the origin counts as hung (cached files are then served "
                  "without asking it); 1s..1h")
      ->capture_default_str()
      ->type_name("DURATION");
  app->add_option("--origin-retries", args->origin_retries,
                  "Remote origins: retries of a failed request (exponential backoff); at most " +
                      std::to_string(kMaxOriginRetries))
      ->capture_default_str()
      ->type_name("N");
  app->add_option("--origin-backoff", args->origin_backoff,
                  "How long after a request found the origin unreachable (or hung) cached files "
                  "and listed directories are served without asking it (0: always ask); at most "
                  "1h")
      ->capture_default_str()
      ->type_name("DURATION");
  app->add_flag("--reset", args->reset,
                "Empty the cache dir at mount, whatever it holds (how a cache made with another "
                "--chunk-size is taken over)");
  app->add_option("--log-file", args->log_file,
                  "Log here instead of CACHE_DIR/stoker.log (or stderr with --foreground)")
      ->type_name("FILE");
  return {app, [args] { return RunMountCommand(*args); }};
}

}  // namespace stoker
