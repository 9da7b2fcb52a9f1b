#include "decode/view/view_namespace.h"

#include <algorithm>
#include <set>
#include <thread>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "util/log.h"

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

std::vector<std::string> ViewNamespace::DerivedPrefixes(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const auto& v : views_) {
    const std::string dir = ViewDirName(v->spec().name);
    if (prefix.empty()) {
      out.push_back(dir);
      continue;
    }
    out.push_back(dir + "/" + prefix);
    out.push_back(dir + "/" + prefix + ".npy");
  }
  return out;
}

Result<struct stat> ViewNamespace::Stat(const std::string& path) {
  return StatFor(path, Urgency::kReader);
}

Result<struct stat> ViewNamespace::StatFor(const std::string& path, Urgency who) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->StatFor(rest, who);
  return raw_->Stat(path);
}

Status ViewNamespace::ReadDir(const std::string& path,
                              const std::function<bool(const OriginDirEntry&)>& fn) {
  return ReadDirFor(path, Urgency::kReader, fn);
}

Status ViewNamespace::ReadDirFor(const std::string& path, Urgency who,
                                 const std::function<bool(const OriginDirEntry&)>& fn) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->ReadDirFor(rest, who, fn);
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

Result<std::unique_ptr<OriginFile>> ViewNamespace::OpenVersion(const std::string& path,
                                                               const OriginIdentity& version,
                                                               Via via) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->Open(rest);
  return raw_->OpenVersion(path, version, via);
}

bool ViewNamespace::AsksMembers(const std::string& path, const OriginIdentity& version,
                                uint64_t off, uint64_t len) {
  std::string rest;
  return Route(path, &rest) == nullptr && raw_->AsksMembers(path, version, off, len);
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

uint64_t ViewNamespace::DerivedDevice(const std::string& path) const {
  std::string rest;
  ViewOrigin* v = Route(path, &rest);
  return v ? v->DerivedDevice(rest) : 0;
}

Status ViewNamespace::CheckRead(const std::string& path, uint64_t off, uint64_t len) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->CheckRead(rest, off, len);
  return Status::OK();
}

bool ViewNamespace::HasUnreadableRanges(const std::string& path) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) return v->HasUnreadableRanges(rest);
  return false;
}

void ViewNamespace::Expedite(const std::string& path, Urgency who) {
  std::string rest;
  if (ViewOrigin* v = Route(path, &rest)) v->Expedite(rest, who);
}

nlohmann::json ViewMount::Stats() const {
  nlohmann::json j;
  std::vector<std::string> names;
  for (const auto& v : views) names.push_back(v->spec().name);
  j["views"] = names;
  nlohmann::json decoders = nlohmann::json::object();
  for (const auto& v : views) {
    const char* cpu_only = gpu ? v->spec().options.CpuOnlyReason() : nullptr;
    decoders[v->spec().name] =
        v->decoder().name() + (cpu_only ? std::string(" (") + cpu_only + ")" : "");
  }
  j["view_decoders"] = decoders;
  j["decoder"] = decoder;
  j["decoder_reason"] = decoder_reason;
  if (fallbacks) {
    j["decode_fallbacks"] = fallbacks->total();
    j["decode_fallbacks_unsupported"] = fallbacks->unsupported.load();
    j["decode_fallbacks_rejected"] = fallbacks->rejected.load();
    j["decode_fallbacks_no_memory"] = fallbacks->no_memory.load();
    j["decode_fallbacks_device_error"] = fallbacks->device_errors.load();
  }
  if (gpu) j.update(gpu->Stats());
  if (!stats) return j;
  const ViewCounters& c = stats->counters;
  j["view_layouts_computed"] = c.layouts_computed.load();
  j["view_layouts_loaded"] = c.layouts_loaded.load();
  j["view_images_checked"] = c.images_checked.load();
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
  // Jobs of a prefetch or warm raised for a reader that waits on them.
  j["decode_jobs_raised"] = pool ? pool->jobs_raised() : 0;
  return j;
}

namespace {

bool UsesGpu(const ViewSpec& v, DecoderKind mount, bool have_gpu) {
  if (v.options.CpuOnlyReason() != nullptr) return false;
  switch (v.options.decoder) {
    case ViewDecoder::kCpu:
      return false;
    case ViewDecoder::kGpu:
      return true;
    case ViewDecoder::kMount:
      return mount == DecoderKind::kGpu || (mount == DecoderKind::kAuto && have_gpu);
  }
  return false;
}

// Opens the GPU decoder where the mount or a view asks for it; a GPU that
// was required and cannot be had fails the mount, one that auto would have
// used leaves the CPU.
Status ChooseDecoder(const std::vector<ViewSpec>& views, const ViewDecoderOptions& o,
                     ViewMount* m) {
  std::string required;  // who insists on the GPU
  if (o.kind == DecoderKind::kGpu) required = "--decoder=gpu";
  bool wanted = !required.empty();
  for (const ViewSpec& v : views) {
    if (v.options.decoder == ViewDecoder::kGpu && required.empty()) {
      required = "--view " + v.name + ":decoder=gpu";
    }
    // Under auto, a view the GPU cannot decode (ratio=, max_side=) asks for none.
    wanted = wanted || v.options.decoder == ViewDecoder::kGpu ||
             (v.options.decoder == ViewDecoder::kMount && o.kind == DecoderKind::kAuto &&
              v.options.CpuOnlyReason() == nullptr);
  }
  m->fallbacks = std::make_shared<FallbackCounters>();
  if (!wanted) {
    m->decoder_reason = std::string("--decoder=") + ToString(o.kind);
    return Status::OK();
  }
  auto gpu = OpenGpuJpegDecoder(o.gpu);
  if (!gpu.ok()) {
    if (!required.empty()) {
      return Status::Error(gpu.status().code(),
                           required + ": no usable GPU decoder: " + gpu.status().message());
    }
    m->decoder_reason = "--decoder=auto: no GPU decoder: " + gpu.status().message();
    LOG_INFO("decoder: cpu ({})", m->decoder_reason);
    return Status::OK();
  }
  m->gpu = *gpu;
  m->decoder = "gpu";
  m->decoder_reason = std::string("--decoder=") + ToString(o.kind) + ": " + m->gpu->name();
  LOG_INFO("decoder: gpu ({})", m->decoder_reason);
  return Status::OK();
}

}  // namespace

Result<ViewMount> MakeViewMount(std::shared_ptr<Origin> raw, const std::vector<ViewSpec>& views,
                                RawReader& reader, const DecodePoolOptions& pool_options,
                                const ViewDecoderOptions& decoder) {
  ViewMount m;
  m.stats = std::make_shared<ViewStats>();
  if (views.empty()) {
    // --decoder=gpu is checked even without views: it fails where no GPU is.
    STOKER_RETURN_IF_ERROR(ChooseDecoder(views, decoder, &m));
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
  STOKER_RETURN_IF_ERROR(ChooseDecoder(views, decoder, &m));
  auto cpu = std::shared_ptr<JpegDecoder>(NewCpuJpegDecoder());
  DecodePoolOptions pool = pool_options;
  if (m.gpu && pool.threads <= 0) {
    // Callers of a batching decoder wait on it: enough of them to fill the
    // lanes' batches, beside the cores' worth of CPU work.
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    pool.threads =
        std::max<int>(cores, decoder.gpu.lanes * static_cast<int>(decoder.gpu.max_batch));
  }
  m.pool = std::make_shared<DecodePool>(cpu, pool);
  for (const ViewSpec& v : views) {
    std::shared_ptr<JpegDecoder> d = cpu;
    if (UsesGpu(v, decoder.kind, m.gpu != nullptr)) {
      d = m.gpu;
      if (v.options.gpu_fallback)
        d = std::make_shared<FallbackJpegDecoder>(m.gpu, cpu, m.fallbacks);
    }
    LOG_INFO("view {}: decoder {}", v.name, d->name());
    m.views.push_back(std::make_shared<ViewOrigin>(v, ViewDirName(v.name), raw, reader, m.pool,
                                                   m.stats, std::move(d)));
  }
  auto ns = std::make_shared<ViewNamespace>(std::move(raw), m.views);
  m.origin = ns;
  m.derived = ns;
  return m;
}

}  // namespace stoker
