// HandleControlRequest: what the requests on the control socket mean.
//
//   {"op":"ping"}                 -> {"ok":true,"pid":N}
//   {"op":"stats"}                -> {"ok":true,"stats":{...stats.json...}}
//   {"op":"warm","path":"train/x"}
//   {"op":"warm","paths":["a","b"]} -> {"ok":true,"queued":N}
//   {"op":"order","paths":["a","b"]}          -> {"ok":true,"order":ID,"files":N}
//   {"op":"order","order":ID,"paths":[...]}   -> the same, the paths added to order ID
//   {"op":"order","clear":true}               -> {"ok":true}
//   {"op":"refresh","path":"train"}  -> {"ok":true,"files":N,"nodes":M}
//
// Warm paths are relative to the mount root, or absolute under the
// mountpoint; a directory is warmed recursively (ObjectCache::Warm). The
// answer comes once the paths are queued, not fetched; progress shows in
// stats (warm_files_queued/done, warm_bytes). Any failure answers
// {"ok":false,"error":"<one line>"}; for several paths, the first failure.
//
// An order (ObjectCache::SetOrder, cache/order_prefetcher.h) is the paths a
// reader will open, in that order, named as warm's are; one that does not
// fit one request (1 MiB) is sent in parts, the first setting it and each
// next one adding to it by its id. A part refused drops the whole order.
//
// A refresh (`stoker refresh`, ObjectCache::Refresh) makes what the cache
// holds at or below the path be asked of the origin again; then
// forget_kernel(path) tells the kernel to drop what it holds of that tree
// (its entries, attributes and listings) and returns how many nodes it
// named. "files" counts the records marked. "" or the mountpoint is the
// whole tree; the path need not exist in the mount (a file new at the
// origin, in a listing the mount keeps).
//
// Thread-safety: as thread-safe as the cache and the stats source.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "cache/object_cache.h"

namespace stoker {

using ForgetKernelFn = std::function<uint64_t(const std::string& path)>;

nlohmann::json HandleControlRequest(const nlohmann::json& request, ObjectCache& cache,
                                    const std::string& mountpoint,
                                    const std::function<nlohmann::json()>& stats,
                                    const ForgetKernelFn& forget_kernel = nullptr);

}  // namespace stoker
