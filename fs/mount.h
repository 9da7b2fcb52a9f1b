// RunMount: the daemon's life. Validates the request, opens the cache, mounts
// the FUSE filesystem, serves it on a multi-threaded loop, and unmounts
// cleanly on `fusermount3 -u`, SIGTERM or SIGINT, leaving the index
// consistent.
// Thread-safety: call once per process.
#pragma once

#include <string>
#include <vector>

#include "cache/options.h"
#include "cache/origin/origin.h"
#include "decode/jpeg/decode_pool.h"
#include "decode/view/view_namespace.h"
#include "decode/view/view_options.h"
#include "fs/passthrough.h"
#include "group/cache_group.h"
#include "util/status.h"

namespace stoker {

struct MountOptions {
  std::string origin;            // a directory, s3://BUCKET/PREFIX or http(s)://HOST/PATH/
  OriginOptions origin_options;  // cache/origin/origin.h
  std::string mountpoint;        // must exist and be empty; a stale FUSE mount is cleared
  CacheOptions cache;
  // -o options for FUSE, passed through ("allow_other").
  std::vector<std::string> fuse_options;
  // The kernel checks the origin's mode bits, owner and group for every
  // caller (FUSE default_permissions). Default: on. Off
  // (--no-default-permissions): FUSE's own model, where whoever the mount
  // lets in (its user; every user with allow_other) reads every file.
  bool check_permissions = true;
  // The cache group this mount is a member of (--peers, group/cache_group.h).
  // Default: none.
  GroupOptions group;
  // Where the daemon serves its metrics for Prometheus (fs/metrics.h):
  // "HOST:PORT", ":PORT" or "PORT" (loopback). Default: "" (none).
  std::string metrics;
  // Worker threads of the FUSE loop. Default: 0 = up to 64, started only
  // when all are busy.
  int fuse_threads = 0;
  std::string log_level = "info";
  // Decoded views (--view NAME[:OPTIONS]), each shown at MOUNTPOINT/.NAME.
  // Default: none. A name colliding with an origin root entry fails the mount.
  std::vector<ViewSpec> views;
  // Threads that decode for the views. Default: the core count.
  DecodePoolOptions decode_pool;
  // Which decoder the views use (--decoder, --gpu-library-path).
  // Default: the CPU here; the CLI's default is auto.
  ViewDecoderOptions decoder;
  // FUSE passthrough for files the cache holds whole (fs/passthrough.h).
  // Default: auto (where the kernel allows it; otherwise every read goes
  // through the daemon, and stats say why).
  PassthroughMode passthrough = PassthroughMode::kAuto;
  // --opens kernel: the kernel opens files without asking the daemon (FUSE
  // no_open, fs/node_files.h): no round trip per open, pages kept across
  // opens, and no passthrough. Default: off (--opens daemon).
  bool kernel_opens = false;
  // --opens auto: daemon opens until the opens seen are mostly of small
  // files, then kernel opens (fs/opens_policy.h); never with --passthrough
  // on. Default: off here; the CLI's default is auto.
  bool opens_auto = false;
  // The most file nodes the kernel may hold (each costs the daemon and its
  // supervisor a record); past it the oldest looked up are dropped from the
  // kernel's dentry cache, to be looked up again if used. 0: no bound.
  size_t max_nodes = 100000;
  // Keep the mount across a crash of the daemon (fs/supervisor.h).
  // Default: off.
  bool supervise = false;
  // If >= 0, RunMount writes one line here once the mount is live ("ok\n") or
  // could not be made ("error: <why>\n"), then closes it. The CLI's parent
  // process waits on this to return.
  int ready_fd = -1;
};

// Returns OK after a clean unmount. Errors before mounting name the problem
// in one line (the CLI prints it and exits non-zero); nothing stays mounted.
Status RunMount(const MountOptions& options);

}  // namespace stoker
