#include "decode/view_namespace.h"

#include <set>

#include "decode/cpu_jpeg_decoder.h"

namespace stoker {

std::string ViewDirName(const std::string& view_name) { return "." + view_name; }

ViewNamespace::ViewNamespace(std::shared_ptr<Origin> raw,
                             std::vector<std::shared_ptr<ViewOrigin>> views)
    : raw_(std::move(raw)), views_(std::move(views)) {}

ViewOrigin* ViewNamespace::Route(const std::string& path, std::string* rest) const {
  if (path.empty() || path[0] != '.') return nullptr;
  const size_t slash = path.find('/');
  const std::string_view first = std::string_view(path).substr(0, slash);
  for (const auto& v : views_) {
    const std::string& name = v->spec().name;
    if (first.size() == name.size() + 1 && first.substr(1) == name) {
      *rest = slash == std::string::npos ? std::string() : path.substr(slash + 1);
      return v.get();
    }
  }
  return nullptr;
}

Result<struct stat> ViewNamespace::Stat(const std::string& path) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->Stat(rest);
  return raw_->Stat(path);
}

Status ViewNamespace::ReadDir(const std::string& path,
                              const std::function<bool(const OriginDirEntry&)>& fn) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->ReadDir(rest, fn);
  if (!path.empty()) return raw_->ReadDir(path, fn);
  return raw_->ReadDir(path, [&](const OriginDirEntry& e) {
    std::string ignored;
    if (Route(e.name, &ignored) != nullptr) return true;  // hidden by the view
    return fn(e);
  });
}

Result<std::string> ViewNamespace::ReadLink(const std::string& path) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->ReadLink(rest);
  return raw_->ReadLink(path);
}

Result<std::unique_ptr<OriginFile>> ViewNamespace::Open(const std::string& path) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->Open(rest);
  return raw_->Open(path);
}

Result<std::string> ViewNamespace::GetXattr(const std::string& path, const std::string& name) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->GetXattr(rest, name);
  return raw_->GetXattr(path, name);
}

Result<std::vector<std::string>> ViewNamespace::ListXattr(const std::string& path) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->ListXattr(rest);
  return raw_->ListXattr(path);
}

bool ViewNamespace::IsDerived(const std::string& path) const {
  std::string rest;
  return Route(path, &rest) != nullptr;
}

Status ViewNamespace::CheckRead(const std::string& path, uint64_t off, uint64_t len) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->CheckRead(rest, off, len);
  return Status::OK();
}

void ViewMount::Attach(ObjectCache* cache) {
  for (const auto& v : views) v->Attach(cache);
}

nlohmann::json ViewMount::Stats() const {
  nlohmann::json j;
  std::vector<std::string> names;
  for (const auto& v : views) names.push_back(v->spec().name);
  j["views"] = names;
  if (!stats) return j;
  const ViewCounters& c = stats->counters;
  j["view_layouts_computed"] = c.layouts_computed.load();
  j["view_layouts_loaded"] = c.layouts_loaded.load();
  j["view_records_decoded"] = c.records_decoded.load();
  j["view_images_decoded"] = c.images_decoded.load();
  j["view_decoded_bytes"] = c.decoded_bytes.load();
  j["view_errors"] = c.errors.load();
  j["view_failed_reads"] = c.failed_reads.load();
  j["view_raw_bytes_read"] = c.raw_bytes_read.load();
  j["decode_queue_depth"] = pool ? pool->queued() : 0;
  j["decode_running"] = pool ? pool->running() : 0;
  j["decode_threads"] = pool ? pool->threads() : 0;
  j["decode_images_per_second"] = pool ? pool->RecentJobsPerSecond() : 0.0;
  return j;
}

Result<ViewMount> MakeViewMount(std::shared_ptr<Origin> raw, const std::vector<ViewSpec>& views,
                                const DecodePoolOptions& pool_options) {
  ViewMount m;
  m.stats = std::make_shared<ViewStats>();
  if (views.empty()) {
    m.origin = std::move(raw);
    return m;
  }
  std::set<std::string> names;
  for (const ViewSpec& v : views) {
    if (!names.insert(v.name).second) {
      return Status::Invalid("--view " + v.name + ": given twice");
    }
    if (v.name == "stoker") {
      return Status::Invalid("--view stoker: .stoker is the mount's control directory");
    }
    const std::string dir = ViewDirName(v.name);
    Result<struct stat> st = raw->Stat(dir);
    if (st.ok()) {
      return Status::Error(EEXIST, "--view " + v.name + ": the origin has an entry '" + dir +
                                       "' where the view would appear");
    }
    if (st.status().code() != ENOENT) return st.status();
  }
  m.pool =
      std::make_shared<DecodePool>(std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder()), pool_options);
  for (const ViewSpec& v : views) {
    m.views.push_back(std::make_shared<ViewOrigin>(v, ViewDirName(v.name), raw, m.pool, m.stats));
  }
  m.origin = std::make_shared<ViewNamespace>(std::move(raw), m.views);
  return m;
}

}  // namespace stoker
