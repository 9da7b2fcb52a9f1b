#include "fs/control_requests.h"

#include <unistd.h>

#include <vector>

#include "fs/control_files.h"
#include "fs/fs_path.h"

namespace stoker {

namespace {

nlohmann::json Error(const std::string& why) {
  return nlohmann::json{{"ok", false}, {"error", why}};
}

nlohmann::json Warm(const nlohmann::json& request, ObjectCache& cache,
                    const std::string& mountpoint) {
  std::vector<std::string> paths;
  if (request.contains("path")) {
    if (!request["path"].is_string()) return Error("warm: \"path\" must be a string");
    paths.push_back(request["path"].get<std::string>());
  }
  if (request.contains("paths")) {
    if (!request["paths"].is_array()) return Error("warm: \"paths\" must be an array");
    for (const auto& p : request["paths"]) {
      if (!p.is_string()) return Error("warm: \"paths\" must hold strings");
      paths.push_back(p.get<std::string>());
    }
  }
  if (paths.empty()) return Error("warm: no \"path\" given");
  std::vector<std::string> rels;
  for (const std::string& p : paths) {
    Result<std::string> rel = NormalizeClientPath(p, mountpoint);
    if (!rel.ok()) return Error(rel.status().message());
    const std::string& r = *rel;
    if (r == ControlFiles::kDirName || r.compare(0, ControlFiles::kDirName.size() + 1,
                                                 std::string(ControlFiles::kDirName) + "/") == 0) {
      return Error("warm: '" + p + "' is a control file, not origin data");
    }
    rels.push_back(r);
  }
  Result<uint64_t> job = cache.StartWarm(rels);
  if (!job.ok()) return Error(job.status().message());
  return nlohmann::json{{"ok", true}, {"queued", rels.size()}, {"job", *job}};
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

}  // namespace

nlohmann::json HandleControlRequest(const nlohmann::json& request, ObjectCache& cache,
                                    const std::string& mountpoint,
                                    const std::function<nlohmann::json()>& stats) {
  if (!request.contains("op") || !request["op"].is_string()) {
    return Error("control request has no \"op\"");
  }
  const std::string op = request["op"].get<std::string>();
  if (op == "ping") return nlohmann::json{{"ok", true}, {"pid", getpid()}};
  if (op == "stats") return nlohmann::json{{"ok", true}, {"stats", stats()}};
  if (op == "warm") return Warm(request, cache, mountpoint);
  if (op == "warm_status") return WarmStatus(request, cache);
  return Error("unknown control op '" + op + "'");
}

}  // namespace stoker
