// ViewNamespace: the Origin of a mount with decoded views, and its
// DerivedSource (cache/derived_source.h). A path whose
// first component is ".NAME" for a view NAME goes to that view's ViewOrigin
// (with ".NAME/" stripped); every other path goes to the raw origin. Both
// fs/ (metadata) and the ObjectCache (data) use it, so view files are cached
// objects like any other, under their ".NAME/..." paths.
//
// The view directories are reached by lookup but not listed in the root
// (like .stoker: the mount shows the origin's tree, and a `find` or `du` of
// the mount does not decode everything). A root entry of the raw origin
// named like a view is hidden; MakeViewMount refuses to start if one exists.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/derived_source.h"
#include "cache/origin/origin.h"
#include "cache/raw_reader.h"
#include "decode/gpu/gpu_jpeg_decoder.h"
#include "decode/jpeg/decode_pool.h"
#include "decode/jpeg/fallback_jpeg_decoder.h"
#include "decode/view/view_options.h"
#include "decode/view/view_origin.h"
#include "decode/view/view_stats.h"

namespace stoker {

class ViewNamespace final : public Origin, public DerivedSource {
 public:
  ViewNamespace(std::shared_ptr<Origin> raw, std::vector<std::shared_ptr<ViewOrigin>> views);

  std::string Describe() const override { return raw_->Describe(); }
  std::string IoBackendName() const override { return raw_->IoBackendName(); }
  Result<struct stat> Stat(const std::string& path) override;
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override;
  Result<std::string> ReadLink(const std::string& path) override;
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override;
  // A raw path's goes to the raw origin; a view file's is its view's Open.
  Result<std::unique_ptr<OriginFile>> OpenVersion(const std::string& path,
                                                  const OriginIdentity& version, Via via) override;
  // A raw path's, the raw origin's; a view file's is never read from a
  // member (views read their raw bytes through the cache).
  bool AsksMembers(const std::string& path, const OriginIdentity& version, uint64_t off,
                   uint64_t len) override;
  Result<std::string> GetXattr(const std::string& path, const std::string& name) override;
  Result<std::vector<std::string>> ListXattr(const std::string& path) override;
  bool IsDerived(const std::string& path) const override;
  uint64_t DerivedDevice(const std::string& path) const override;
  Status CheckRead(const std::string& path, uint64_t off, uint64_t len) override;
  bool HasUnreadableRanges(const std::string& path) override;
  Result<struct stat> StatFor(const std::string& path, Urgency who) override;
  Status ReadDirFor(const std::string& path, Urgency who,
                    const std::function<bool(const OriginDirEntry&)>& fn) override;
  void Expedite(const std::string& path, Urgency who) override;
  // ".NAME/prefix" of each view, and ".NAME/prefix.npy" (a JPEG's array).
  std::vector<std::string> DerivedPrefixes(const std::string& prefix) const override;
  OriginBackoff* backoff() override { return raw_->backoff(); }
  void Stale(const std::string& path) override { raw_->Stale(path); }
  void Refresh(const std::string& prefix) override { raw_->Refresh(prefix); }

 private:
  // The view path names, and the rest of the path inside it; null if none.
  ViewOrigin* Route(const std::string& path, std::string* rest) const;

  const std::shared_ptr<Origin> raw_;
  const std::vector<std::shared_ptr<ViewOrigin>> views_;
};

// The decoder the views of a mount use (--decoder, --gpu-library-path).
struct ViewDecoderOptions {
  // Default: kCpu (the CLI's default is auto).
  DecoderKind kind = DecoderKind::kCpu;
  GpuDecoderOptions gpu;
};

// Everything a mount's views are made of.
struct ViewMount {
  std::shared_ptr<Origin> origin;  // the ViewNamespace (or the raw origin if no views)
  // The ViewNamespace as the cache asks it about view files; null if no views.
  std::shared_ptr<DerivedSource> derived;
  std::vector<std::shared_ptr<ViewOrigin>> views;
  std::shared_ptr<DecodePool> pool;  // null if no views
  std::shared_ptr<ViewStats> stats;
  // The GPU decoder, if any view uses it, and the CPU fallbacks of all
  // GPU views; decoder: "gpu" or "cpu", what the mount chose and why.
  std::shared_ptr<BatchingJpegDecoder> gpu;
  std::shared_ptr<FallbackCounters> fallbacks;
  std::string decoder = "cpu";
  std::string decoder_reason;

  // The view fields of stats.json (view_*, decode_*).
  nlohmann::json Stats() const;
};

// The directory name a view appears under: "." + name.
std::string ViewDirName(const std::string& view_name);

// Checks the views (distinct names, none named like .stoker, no collision
// with an entry of the raw origin's root: EEXIST naming it) and builds them.
// The GPU is opened when --decoder is gpu (views or not) or auto, or a view
// says decoder=gpu; where it cannot be, gpu and decoder=gpu fail the mount
// (ENODEV and the like, "--decoder=gpu: <why>") and auto takes the CPU.
// With a GPU, the pool gets enough threads to fill its batches. The views
// read raw files through reader (the cache: ObjectCache::Open's
// make_derived makes them).
Result<ViewMount> MakeViewMount(std::shared_ptr<Origin> raw, const std::vector<ViewSpec>& views,
                                RawReader& reader, const DecodePoolOptions& pool_options = {},
                                const ViewDecoderOptions& decoder = {});

}  // namespace stoker
