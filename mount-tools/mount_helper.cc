#include "mount-tools/mount_helper.h"

#include <set>
#include <string_view>

#include "mount-tools/commands.h"

namespace stoker {
namespace {

// `stoker mount` options that take a value, as -o keys.
const std::set<std::string_view> kValued = {"cache",
                                            "cache_size",
                                            "chunk_size",
                                            "slab_max",
                                            "revalidate",
                                            "prefetch",
                                            "prefetch_files",
                                            "order_ahead",
                                            "order_ahead_bytes",
                                            "io_backend",
                                            "passthrough",
                                            "opens",
                                            "max_nodes",
                                            "log_level",
                                            "log_file",
                                            "view",
                                            "decoder",
                                            "gpu_library_path",
                                            "s3_endpoint",
                                            "manifest",
                                            "origin_connect_timeout",
                                            "origin_stall_timeout",
                                            "origin_retries",
                                            "origin_backoff",
                                            "metrics",
                                            "peers",
                                            "peer_listen",
                                            "peer_advertise",
                                            "peer_token_file",
                                            "peer_group"};

// `stoker mount` flags, as -o keys.
const std::set<std::string_view> kFlags = {"no_supervise", "no_default_permissions", "no_direct_io",
                                           "s3_path_style", "reset"};

// FUSE and VFS mount options libfuse takes: passed on as -o.
const std::set<std::string_view> kPassed = {"allow_other", "allow_root", "default_permissions",
                                            "nosuid",      "suid",       "nodev",
                                            "dev",         "noexec",     "exec",
                                            "noatime",     "atime",      "relatime",
                                            "strictatime", "sync",       "async",
                                            "dirsync"};

// fstab's and mount(8)'s own options, nothing to a mount's daemon. A stoker
// mount is always read-only, so rw and ro say nothing either.
const std::set<std::string_view> kIgnored = {"defaults", "auto",  "noauto", "user",    "users",
                                             "nouser",   "owner", "group",  "_netdev", "nofail",
                                             "rw",       "ro",    "loop",   "bg",      "fg"};

bool Ignored(std::string_view key) {
  return kIgnored.contains(key) || key.starts_with("x-") || key.starts_with("comment=") ||
         key.starts_with("fsname=") || key.starts_with("subtype=");
}

}  // namespace

MountOptionKind MountOptionKindOf(std::string_view key) {
  if (kValued.contains(key)) return MountOptionKind::kValued;
  if (kFlags.contains(key)) return MountOptionKind::kFlag;
  if (kPassed.contains(key) || key == "max_read") return MountOptionKind::kPassed;
  if (Ignored(key)) return MountOptionKind::kIgnored;
  return MountOptionKind::kUnknown;
}

Result<std::vector<std::string>> MountHelperArgs(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::vector<std::string> options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-o") {
      if (i + 1 == args.size()) return Status::Invalid("-o needs a list of options");
      for (std::string& o : SplitFuseOptions({args[++i]})) options.push_back(std::move(o));
    } else if (a.starts_with("-o")) {
      for (std::string& o : SplitFuseOptions({a.substr(2)})) options.push_back(std::move(o));
    } else if (a == "-n" || a == "-s" || a == "-v" || a == "-f") {
      // mount(8)'s: no mtab, sloppy, verbose, fake (a fake mount is not asked of helpers)
    } else if (a.starts_with("-")) {
      return Status::Invalid("unknown mount argument '" + a + "'");
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    return Status::Invalid("expected ORIGIN MOUNTPOINT [-o OPTIONS], got " +
                           std::to_string(positional.size()) + " positional arguments");
  }
  std::vector<std::string> out = {"mount", positional[0], positional[1]};
  std::vector<std::string> passed;
  for (const std::string& o : options) {
    const size_t eq = o.find('=');
    const std::string key = o.substr(0, eq);
    const std::string flag = "--" + [&] {
      std::string k = key;
      for (char& c : k) c = c == '_' ? '-' : c;
      return k;
    }();
    const MountOptionKind kind = Ignored(o) ? MountOptionKind::kIgnored : MountOptionKindOf(key);
    if (kind == MountOptionKind::kIgnored) continue;
    if (kind == MountOptionKind::kPassed) {
      passed.push_back(o);
    } else if (kind == MountOptionKind::kValued) {
      if (eq == std::string::npos || eq + 1 == o.size()) {
        return Status::Invalid("-o " + key + " needs a value (" + key + "=...)");
      }
      std::string value = o.substr(eq + 1);
      if (key == "view") {
        for (char& c : value) c = c == ';' ? ',' : c;  // a view's own options
      }
      out.push_back(flag);
      out.push_back(value);
    } else if (kind == MountOptionKind::kFlag) {
      if (eq != std::string::npos) return Status::Invalid("-o " + key + " takes no value");
      out.push_back(flag);
    } else {
      return Status::Invalid("unknown mount option '" + o + "' (docs/operations.md lists them)");
    }
  }
  if (!passed.empty()) {
    std::string joined;
    for (const std::string& p : passed) joined += (joined.empty() ? "" : ",") + p;
    out.push_back("-o");
    out.push_back(joined);
  }
  return out;
}

Result<std::vector<std::string>> UnmountHelperArgs(const std::vector<std::string>& args) {
  std::vector<std::string> out = {"unmount"};
  std::string dir;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-l") {
      out.push_back("--lazy");
    } else if (a == "-t") {
      ++i;  // the type: fuse.stoker
    } else if (a == "-n" || a == "-f" || a == "-v" || a == "-r" || a == "-i" || a == "-d") {
      // umount(8)'s: no mtab, force, verbose, read-only remount, no helper, free loop
    } else if (a.starts_with("-")) {
      return Status::Invalid("unknown unmount argument '" + a + "'");
    } else if (dir.empty()) {
      dir = a;
    } else {
      return Status::Invalid("expected one MOUNTPOINT, got '" + dir + "' and '" + a + "'");
    }
  }
  if (dir.empty()) return Status::Invalid("expected MOUNTPOINT");
  out.push_back(dir);
  return out;
}

}  // namespace stoker
