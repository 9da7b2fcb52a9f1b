// `stoker mount`'s arguments checked and turned into MountOptions (and the
// origin's options): one line naming the bad argument for each refusal.
#include <filesystem>

#include "cache/origin/remote/url.h"
#include "fs/metrics.h"
#include "fs/mountpoint.h"
#include "mount-tools/commands.h"
#include "util/duration.h"
#include "util/size.h"

namespace stoker {

std::string MakeAbsolute(const std::string& path) {
  if (path.find("://") != std::string::npos) return path;  // s3://, http(s)://
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

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

// A parser's error with the flag's name in front.
Result<uint64_t> OfFlag(const std::string& flag, Result<uint64_t> r) {
  if (!r.ok()) return Status::Invalid(flag + ": " + r.status().message());
  return r;
}

Result<uint64_t> ParseSizeFlag(const std::string& flag, const std::string& text) {
  return OfFlag(flag, ParseSize(text));
}

// "1m" -> 60, "60" -> 60 (util/duration.h).
Result<uint64_t> ParseSecondsFlag(const std::string& flag, const std::string& text) {
  return OfFlag(flag, ParseDuration(text));
}

// The S3 origin's check of its endpoint, made before anything is mounted so
// that a bad value is a usage error as every other.
Status CheckS3Endpoint(const std::string& endpoint) {
  Result<Url> url = ParseUrl(endpoint);
  if (!url.ok() || (url->scheme != "http" && url->scheme != "https") ||
      (!url->path.empty() && url->path != "/")) {
    return Status::Invalid("--s3-endpoint " + endpoint +
                           ": expected http(s)://HOST[:PORT] without a path");
  }
  return Status::OK();
}

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
  if (!args.s3_endpoint.empty()) STOKER_RETURN_IF_ERROR(CheckS3Endpoint(args.s3_endpoint));
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
      uint64_t connect, ParseSecondsFlag("--origin-connect-timeout", args.origin_connect_timeout));
  STOKER_ASSIGN_OR_RETURN(uint64_t stall,
                          ParseSecondsFlag("--origin-stall-timeout", args.origin_stall_timeout));
  STOKER_ASSIGN_OR_RETURN(uint64_t retries,
                          ParseWholeNumber("--origin-retries", args.origin_retries, "retries"));
  auto out_of_range = [](const char* flag, const std::string& v, uint64_t s, uint64_t min) {
    return s < min || s > kMaxOriginSeconds
               ? Status::Invalid(std::string(flag) + " " + v + ": " + std::to_string(min) + ".." +
                                 std::to_string(kMaxOriginSeconds) + " seconds")
               : Status::OK();
  };
  STOKER_RETURN_IF_ERROR(
      out_of_range("--origin-connect-timeout", args.origin_connect_timeout, connect, 1));
  STOKER_RETURN_IF_ERROR(
      out_of_range("--origin-stall-timeout", args.origin_stall_timeout, stall, 1));
  if (retries > kMaxOriginRetries) {
    return Status::Invalid("--origin-retries " + args.origin_retries + ": at most " +
                           std::to_string(kMaxOriginRetries));
  }
  o->connect_timeout_s = static_cast<long>(connect);
  o->stall_timeout_s = static_cast<long>(stall);
  o->retries = static_cast<int>(retries);
  STOKER_ASSIGN_OR_RETURN(uint64_t backoff,
                          ParseSecondsFlag("--origin-backoff", args.origin_backoff));
  STOKER_RETURN_IF_ERROR(out_of_range("--origin-backoff", args.origin_backoff, backoff, 0));
  o->backoff_seconds = static_cast<long>(backoff);
  return Status::OK();
}

}  // namespace

namespace {

// --peers and the options that go with it: their shapes (the token file is
// read by the daemon). A --peer-* option without --peers is refused.
Status ToGroupOptions(const MountArgs& args, GroupOptions* g) {
  const bool any = !args.peer_advertise.empty() || !args.peer_token_file.empty() ||
                   !args.peer_group.empty() || args.peer_listen != MountArgs().peer_listen;
  if (args.peers.empty()) {
    if (any) return Status::Invalid("--peer-* options need --peers (the cache group's members)");
    return Status::OK();
  }
  STOKER_RETURN_IF_ERROR(ParsePeers(args.peers).status());
  if (Result<HostPort> l = ParseHostPort(args.peer_listen); !l.ok()) {
    return Status::Invalid("--peer-listen: " + l.status().message());
  }
  if (!args.peer_advertise.empty()) {
    if (Result<HostPort> a = ParseHostPort(args.peer_advertise); !a.ok()) {
      return Status::Invalid("--peer-advertise: " + a.status().message());
    }
  }
  if (args.peer_token_file.empty()) {
    return Status::Invalid("--peers needs --peer-token-file FILE (the group's shared token)");
  }
  g->peers = args.peers;
  g->listen = args.peer_listen;
  g->advertise = args.peer_advertise;
  g->token_file = MakeAbsolute(args.peer_token_file);  // the daemon changes to /
  g->name = args.peer_group;
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
  if (args.revalidate == "never") {
    o.cache.revalidate_seconds = kNeverSeconds;
  } else {
    Result<uint64_t> seconds = ParseSecondsFlag("--revalidate", args.revalidate);
    if (!seconds.ok()) return Status::Invalid(seconds.status().message() + ", or never");
    o.cache.revalidate_seconds = *seconds;
  }
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
  STOKER_ASSIGN_OR_RETURN(o.cache.order_ahead_files,
                          ParseWholeNumber("--order-ahead", args.order_ahead, "files"));
  if (o.cache.order_ahead_files > kMaxOrderAhead) {
    return Status::Invalid("--order-ahead " + args.order_ahead + ": at most " +
                           std::to_string(kMaxOrderAhead));
  }
  STOKER_ASSIGN_OR_RETURN(o.cache.order_ahead_bytes,
                          ParseSizeFlag("--order-ahead-bytes", args.order_ahead_bytes));
  if (o.cache.order_ahead_bytes == 0) {
    return Status::Invalid("--order-ahead-bytes 0: give a size (--order-ahead 0 turns orders off)");
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
  if (args.opens == "auto") {
    o.opens_auto = true;
  } else if (args.opens == "kernel") {
    o.kernel_opens = true;
    if (o.passthrough == PassthroughMode::kOn) {
      return Status::Invalid(
          "--opens kernel leaves no open to pass through: it excludes --passthrough on");
    }
  } else if (args.opens != "daemon") {
    return Status::Invalid("--opens " + args.opens + ": must be auto, daemon or kernel");
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
  o.cache.reset = args.reset;
  o.supervise = args.supervise;
  STOKER_RETURN_IF_ERROR(ToOriginOptions(args, o.cache.revalidate_seconds, &o.origin_options));
  o.origin_options.io_backend = o.cache.io_backend;  // a local origin's reads too
  o.fuse_options = SplitFuseOptions(args.fuse_options);
  o.check_permissions = args.default_permissions;
  if (!args.metrics.empty()) STOKER_RETURN_IF_ERROR(ParseMetricsAddress(args.metrics).status());
  o.metrics = args.metrics;
  STOKER_RETURN_IF_ERROR(ToGroupOptions(args, &o.group));
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

}  // namespace stoker
