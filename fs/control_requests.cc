#include "fs/control_requests.h"

#include <unistd.h>

#include <cerrno>
#include <vector>

#include "fs/control_files.h"
#include "fs/fs_path.h"
#include "util/log.h"

namespace stoker {

namespace {

nlohmann::json Error(const std::string& why) {
  return nlohmann::json{{"ok", false}, {"error", why}};
}

// What a client named, as origin paths; the first path that is not under
// the mount, or names a control file, fails them all.
Result<std::vector<std::string>> OriginPaths(const std::string& op,
                                             const std::vector<std::string>& paths,
                                             const std::string& mountpoint) {
  std::vector<std::string> rels;
  rels.reserve(paths.size());
  for (const std::string& p : paths) {
    Result<std::string> rel = NormalizeClientPath(p, mountpoint);
    if (!rel.ok()) return Status::Invalid(op + ": " + rel.status().message());
    const std::string& r = *rel;
    if (r == ControlFiles::kDirName || r.compare(0, ControlFiles::kDirName.size() + 1,
                                                 std::string(ControlFiles::kDirName) + "/") == 0) {
      return Status::Invalid(op + ": '" + p + "' is a control file, not origin data");
    }
    rels.push_back(r);
  }
  return rels;
}

// The strings of request[key], an array.
Result<std::vector<std::string>> Strings(const std::string& op, const nlohmann::json& request,
                                         const char* key) {
  std::vector<std::string> out;
  auto it = request.find(key);
  if (it == request.end()) return out;
  if (!it->is_array()) return Status::Invalid(op + ": \"" + key + "\" must be an array");
  for (const auto& p : *it) {
    if (!p.is_string()) return Status::Invalid(op + ": \"" + key + "\" must hold strings");
    out.push_back(p.get<std::string>());
  }
  return out;
}

nlohmann::json Warm(const nlohmann::json& request, ObjectCache& cache,
                    const std::string& mountpoint) {
  std::vector<std::string> paths;
  if (request.contains("path")) {
    if (!request["path"].is_string()) return Error("warm: \"path\" must be a string");
    paths.push_back(request["path"].get<std::string>());
  }
  Result<std::vector<std::string>> more = Strings("warm", request, "paths");
  if (!more.ok()) return Error(more.status().message());
  paths.insert(paths.end(), more->begin(), more->end());
  if (paths.empty()) return Error("warm: no \"path\" given");
  Result<std::vector<std::string>> rels = OriginPaths("warm", paths, mountpoint);
  if (!rels.ok()) return Error(rels.status().message());
  Result<uint64_t> job = cache.StartWarm(*rels);
  if (!job.ok()) return Error(job.status().message());
  return nlohmann::json{{"ok", true}, {"queued", rels->size()}, {"job", *job}};
}

// {"op": "warm_status", "job": N}: that job's progress; without "job",
// every job the daemon keeps.
nlohmann::json WarmStatus(const nlohmann::json& request, ObjectCache& cache) {
  if (!request.contains("job")) return {{"ok", true}, {"jobs", cache.WarmStatus(0)}};
  if (!request["job"].is_number_unsigned() || request["job"].get<uint64_t>() == 0) {
    return Error("warm_status: \"job\" must be a job number");
  }
  nlohmann::json j = cache.WarmStatus(request["job"].get<uint64_t>());
  if (j.is_null()) return Error("warm_status: no job " + request["job"].dump());
  return {{"ok", true}, {"job", j}};
}

// {"op": "order", "paths": [...]} sets the order; with "order": N, adds
// the paths to order N; {"op": "order", "clear": true} drops it.
nlohmann::json Order(const nlohmann::json& request, ObjectCache& cache,
                     const std::string& mountpoint) {
  if (request.value("clear", false)) {
    cache.ClearOrder();
    return {{"ok", true}};
  }
  Result<std::vector<std::string>> paths = Strings("order", request, "paths");
  if (!paths.ok()) return Error(paths.status().message());
  Result<std::vector<std::string>> rels = OriginPaths("order", *paths, mountpoint);
  if (!rels.ok()) {
    cache.ClearOrder();  // no half order, nor the last epoch's, is left behind
    return Error(rels.status().message());
  }
  if (!request.contains("order")) {
    Result<uint64_t> id = cache.SetOrder(*rels);
    if (!id.ok()) {
      cache.ClearOrder();  // the last epoch's order is no better
      return Error("order: " + id.status().message());
    }
    return {{"ok", true}, {"order", *id}, {"files", rels->size()}};
  }
  if (!request["order"].is_number_unsigned()) {
    return Error("order: \"order\" must be an order number");
  }
  Status s = cache.AppendOrder(request["order"].get<uint64_t>(), *rels);
  if (!s.ok()) {
    if (s.code() != ESTALE) cache.ClearOrder();
    return Error("order: " + s.message());
  }
  return {{"ok", true}, {"order", request["order"]}, {"files", rels->size()}};
}

// {"op": "refresh", "path": P}: P's tree is asked of the origin again.
nlohmann::json Refresh(const nlohmann::json& request, ObjectCache& cache,
                       const std::string& mountpoint, const ForgetKernelFn& forget_kernel) {
  auto it = request.find("path");
  if (it == request.end() || !it->is_string()) {
    return Error("refresh: \"path\" must be a string");
  }
  Result<std::vector<std::string>> rels =
      OriginPaths("refresh", {it->get<std::string>()}, mountpoint);
  if (!rels.ok()) return Error(rels.status().message());
  const std::string& rel = rels->front();
  Result<uint64_t> files = cache.Refresh(rel);
  if (!files.ok()) return Error("refresh: " + files.status().message());
  const uint64_t nodes = forget_kernel ? forget_kernel(rel) : 0;
  LOG_INFO("refresh of '{}': {} files and {} kernel nodes are asked of the origin again", rel,
           *files, nodes);
  return {{"ok", true}, {"files", *files}, {"nodes", nodes}};
}

}  // namespace

nlohmann::json HandleControlRequest(const nlohmann::json& request, ObjectCache& cache,
                                    const std::string& mountpoint,
                                    const std::function<nlohmann::json()>& stats,
                                    const ForgetKernelFn& forget_kernel) {
  if (!request.contains("op") || !request["op"].is_string()) {
    return Error("control request has no \"op\"");
  }
  const std::string op = request["op"].get<std::string>();
  if (op == "ping") return nlohmann::json{{"ok", true}, {"pid", getpid()}};
  if (op == "stats") return nlohmann::json{{"ok", true}, {"stats", stats()}};
  if (op == "warm") return Warm(request, cache, mountpoint);
  if (op == "warm_status") return WarmStatus(request, cache);
  if (op == "order") return Order(request, cache, mountpoint);
  if (op == "refresh") return Refresh(request, cache, mountpoint, forget_kernel);
  return Error("unknown control op '" + op + "'");
}

}  // namespace stoker
