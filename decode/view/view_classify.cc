// Classification of raw files (which view file a raw file gives, if any)
// and their layouts: ClassifyRawFile, ViewOrigin::KindOf and
// ViewOrigin::LayoutOf (decode/view/view_origin.h).
#include <algorithm>
#include <optional>

#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/jpeg_probe.h"
#include "decode/tar/tar_format.h"
#include "decode/tfrecord/tfrecord.h"
#include "decode/view/cached_byte_source.h"
#include "decode/view/tar_view.h"
#include "decode/view/view_file.h"
#include "decode/view/view_origin.h"
#include "util/log.h"
#include "util/path.h"

namespace stoker {
namespace {

// What KindOf reads of a raw file to tell its kind.
constexpr size_t kHeadBytes = 4096;

// The raw origin's file as a ByteSource (for content sniffing only).
class OriginByteSource final : public ByteSource {
 public:
  OriginByteSource(OriginFile* file, uint64_t size) : file_(file), size_(size) {}
  uint64_t size() const override { return size_; }
  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
    if (off >= size_) return size_t{0};
    return file_->ReadAt(buf, std::min<uint64_t>(len, size_ - off), off);
  }

 private:
  OriginFile* file_;
  uint64_t size_;
};

}  // namespace

RawViewKind ClassifyRawFile(std::string_view name, std::string_view head, ByteSource& src,
                            std::optional<TfRecordCompression> compression) {
  const auto* h = reinterpret_cast<const uint8_t*>(head.data());
  if (LooksLikeJpeg(h, head.size())) return RawViewKind::kJpeg;
  if (head.size() >= kTfRecordHeaderSize && IsTfRecord(h, head.size(), src.size())) {
    return RawViewKind::kTfRecord;
  }
  if (EndsWith(name, ".tar") && head.size() >= kTarBlock && IsTarBlock(h)) {
    return RawViewKind::kTar;
  }
  const TfRecordCompression c = compression ? *compression : CompressionFromName(name);
  if (c != TfRecordCompression::kNone && SniffCompression(h, head.size()) == c &&
      IsCompressedTfRecord(src, c)) {
    return c == TfRecordCompression::kGzip ? RawViewKind::kGzipTfRecord
                                           : RawViewKind::kZlibTfRecord;
  }
  return RawViewKind::kNone;
}

Result<RawViewKind> ViewOrigin::KindOf(const std::string& raw_path, const struct stat& raw_st) {
  const OriginIdentity id = IdentityFromStat(raw_st);
  {
    MutexLock l(known_mu_);
    auto it = known_.find(raw_path);
    if (it != known_.end() && it->second.identity == id) return it->second.kind;
  }
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<OriginFile> file, raw_->Open(raw_path));
  const uint64_t size = static_cast<uint64_t>(raw_st.st_size);
  std::string head(std::min<uint64_t>(size, kHeadBytes), '\0');
  OriginByteSource src(file.get(), size);
  STOKER_RETURN_IF_ERROR(ReadExactly(src, head.data(), head.size(), 0, "file head"));
  RawViewKind kind = ClassifyRawFile(BaseName(raw_path), head, src, spec_.options.compression);
  if (kind == RawViewKind::kJpeg && spec_.options.on_error == OnError::kSkip) {
    // Left out of the view if its header is bad. ENODATA with more of the
    // file to read: decided by the layout, which reads more.
    auto info =
        ProbeJpeg(reinterpret_cast<const uint8_t*>(head.data()), head.size(), spec_.options.probe);
    Result<ImageShape> shape = info.ok() ? OutputShape(*info, spec_.options.decode) : info.status();
    if (!shape.ok() && (shape.status().code() != ENODATA || head.size() == size)) {
      kind = RawViewKind::kNone;
      const std::string shown = prefix_ + "/" + raw_path + std::string(kNpySuffix);
      if (stats_->errors.Add(shown, 0, shape.status().message())) stats_->counters.errors++;
    }
  }
  Remember(raw_path, Known{id, kind, nullptr});
  return kind;
}

Result<std::shared_ptr<const ViewLayout>> ViewOrigin::LayoutOf(const std::string& raw_path,
                                                               const std::string& view_path,
                                                               RawViewKind kind,
                                                               const RawReader::Opened& raw,
                                                               Urgency who) {
  const OriginIdentity id = IdentityFromStat(raw.st);
  if (auto known = KnownLayout(raw_path, id)) return known;
  std::unique_lock<std::mutex> stripe(
      layout_stripes_[std::hash<std::string>()(raw_path) % layout_stripes_.size()],
      std::try_to_lock);
  if (!stripe.owns_lock()) {
    // Most likely laid out by another now, maybe a warm's: raise its check.
    Expedite(view_path, who);
    stripe.lock();
  }
  if (auto known = KnownLayout(raw_path, id)) return known;

  const std::string shown = prefix_ + "/" + view_path;
  const std::string name = LayoutName(kind);
  std::shared_ptr<const ViewLayout> layout;
  auto stored = reader_.GetDerived(*raw.file, name);
  if (stored.ok() && *stored) {
    auto decoded = DecodeViewLayout(**stored);
    if (decoded.ok() && decoded->fingerprint == fingerprint_ && decoded->source_size == id.size) {
      layout = std::make_shared<const ViewLayout>(std::move(decoded).value());
      stats_->counters.layouts_loaded++;
    } else {
      LOG_WARN("stored layout of '{}' is unusable ({}); laying it out again", shown,
               decoded.ok() ? "made for other options" : decoded.status().message());
    }
  } else if (!stored.ok()) {
    LOG_WARN("reading the stored layout of '{}': {}", shown, stored.status().message());
  }
  if (!layout) {
    // What was listed for this file came from another layout of it.
    stats_->errors.ForgetFile(shown);
    CachedByteSource src(&reader_, raw.file, id.size, &stats_->counters.raw_bytes_read);
    const std::string decoder = decoder_->name();
    // Under skip every JPEG is checked to decode before it gets a place
    // (view_layout.h): on the pool, at the priority of whoever waits.
    JpegCheck check;
    std::optional<RegisteredBatch> batch;
    if (spec_.options.on_error == OnError::kSkip) {
      batch.emplace(this, view_path);
      check = [this, &batch, who](const std::vector<std::string_view>& jpegs) {
        std::vector<DecodePool::Job> jobs;
        for (std::string_view j : jpegs) {
          jobs.push_back([j] {
            return CheckJpegDecodes(reinterpret_cast<const uint8_t*>(j.data()), j.size());
          });
        }
        std::vector<Status> st =
            pool_->RunAll(batch->get(), DecodePriorityFor(who), std::move(jobs));
        stats_->counters.images_checked += jpegs.size();
        return st;
      };
    }
    Result<ViewLayout> made = Status::Invalid("no layout");
    if (kind == RawViewKind::kJpeg) {
      made = LayoutJpegNpyView(src, spec_.options, decoder, check);
    } else if (kind == RawViewKind::kTar) {
      made = LayoutTarView(src, spec_.options, decoder, check);
    } else {
      made = LayoutTfRecordView(src, CompressionOf(kind), spec_.options, decoder, check);
    }
    if (!made.ok()) {
      if (IsWorldError(made.status().code())) return made.status();
      // on_error=skip and the JPEG does not decode: out of the view.
      if (stats_->errors.Add(shown, 0, made.status().message())) stats_->counters.errors++;
      Remember(raw_path, Known{id, RawViewKind::kNone, nullptr});
      return Status::NotFound("'" + shown + "' does not decode and is skipped");
    }
    stats_->counters.layouts_computed++;
    layout = std::make_shared<const ViewLayout>(std::move(made).value());
    Status put = reader_.PutDerived(*raw.file, name, EncodeViewLayout(*layout));
    if (!put.ok()) LOG_WARN("storing the layout of '{}': {}", shown, put.message());
  }
  for (const ViewError& e : layout->errors) {
    if (stats_->errors.Add(shown, e.in_offset, e.message)) stats_->counters.errors++;
  }
  Remember(raw_path, Known{id, kind, layout});
  return layout;
}

}  // namespace stoker
