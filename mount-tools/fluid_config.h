// Fluid's ThinRuntime contract (docs/kubernetes.md): Fluid starts the FUSE
// container of a ThinRuntimeProfile with a JSON config at
// /etc/fluid/config/config.json (before Fluid 1.1: /etc/fluid/config.json),
// and the container mounts the dataset at the config's targetPath, serves
// in the foreground and unmounts on SIGTERM. `stoker fluid` reads that
// config and runs `stoker mount` for it:
//
//   {"mounts": [{"mountPoint": "s3://bucket/imagenet", "name": "imagenet",
//                "options": {"s3-endpoint": "http://minio:9000",
//                            "aws-access-key-id": "/etc/fluid/secrets/s3/id", ...}}],
//    "targetPath": "/runtime-mnt/thin/default/imagenet/thin-fuse",
//    "runtimeOptions": {"cache-size": "200G", "peers": "dns:stoker-peers:7070"}, ...}
//
// - mounts[0].mountPoint is the origin: a path, local://PATH, s3://,
//   http:// or https://. One mount per dataset.
// - runtimeOptions (the ThinRuntime's fuse.options), then the mount's
//   options (Fluid merges the Dataset's shared options into them; the
//   mount's win) are `stoker mount` options by their long names, with - or _
//   between words (cache, cache-size, view, peers, ...); flags and FUSE
//   options (allow_other) as "true"/"false". The cache defaults to
//   /var/cache/stoker, a hostPath in the profile; allow_other defaults to
//   true (the application pods read the mount as other users).
// - A value may name environment variables as ${NAME}, expanded from
//   stoker fluid's environment (the profile sets them, e.g. POD_IP from the
//   downward API, for --peer-advertise ${POD_IP}:7070); an unset one is an
//   error.
// - S3 credentials: aws-access-key-id, aws-secret-access-key,
//   aws-session-token, as the value itself or, as Fluid passes a Dataset's
//   encryptOptions, a path under /etc/fluid/secrets/ whose file holds it;
//   they reach the origin as the AWS_* environment variables.
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace stoker {

inline constexpr const char* kFluidConfig = "/etc/fluid/config/config.json";
inline constexpr const char* kFluidConfigBefore11 = "/etc/fluid/config.json";

struct FluidDefaults {
  std::string cache_dir = "/var/cache/stoker";
  std::string secrets_dir = "/etc/fluid/secrets";
  // Reads a secret's file (its contents, whole).
  std::function<Result<std::string>(const std::string& path)> read_file;
  // An environment variable's value, or null where it is not set.
  std::function<const char*(const char* name)> getenv = [](const char*) -> const char* {
    return nullptr;
  };
};

struct FluidMount {
  std::vector<std::string> args;                         // `stoker mount ...`'s arguments
  std::vector<std::pair<std::string, std::string>> env;  // set before it runs
  std::string target;                                    // the mountpoint (targetPath)
};

// The mount a Fluid config asks for; EINVAL with one line naming the field
// that is missing or wrong.
Result<FluidMount> FluidMountOf(const std::string& config_json, const FluidDefaults& defaults);

}  // namespace stoker
