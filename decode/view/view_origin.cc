#include "decode/view/view_origin.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include "cache/worker_pool.h"
#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/jpeg_probe.h"
#include "decode/tfrecord/tfrecord.h"
#include "decode/view/cached_byte_source.h"
#include "decode/view/view_producer.h"
#include "util/log.h"
#include "util/path.h"

namespace stoker {
namespace {

constexpr size_t kHeadBytes = 4096;
// Raw files remembered; past this the memory starts over (a re-stat then
// re-reads a head, or a layout from the index).
constexpr size_t kMaxKnown = size_t{1} << 17;
// Produced records an open view file keeps for the next read (the record a
// cache chunk boundary cuts through is produced once, not twice).
constexpr size_t kKeptRecords = 4;
constexpr uint64_t kKeptBytes = 64ull << 20;
// Records cut by the end of a read that the view hands to the next open of
// their file (ViewOrigin::HandOff): more than the files a directory
// prefetch reads ahead (16).
constexpr size_t kHandedOffRecords = 32;
constexpr uint64_t kHandedOffBytes = 64ull << 20;
// A JPEG file is decoded whole, from memory: larger ones do not decode.
constexpr uint64_t kMaxJpegFileBytes = 1ull << 30;
constexpr std::string_view kNpySuffix = ".npy";
// Threads that recognise the files of one big directory listing.
constexpr size_t kReadDirThreads = 8;

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

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Not the data's fault: passed through to the reader as it is. (ENOMEM is
// the data's: a JPEG over the decoder's memory limit.)
bool IsWorldError(int code) {
  return IsOriginUnavailable(code) || code == ECANCELED || code == EACCES || code == EPERM ||
         code == ENOENT;
}

DecodePriority CurrentDecodePriority() {
  std::optional<WorkerPool::Priority> p = WorkerPool::CurrentPriority();
  if (!p) return DecodePriority::kReader;
  return *p == WorkerPool::Priority::kHigh ? DecodePriority::kReadahead : DecodePriority::kWarm;
}

// A decode batch that ViewOrigin::Expedite finds under a view path while
// it lives: from before the raw bytes it decodes are read until it has run.
class RegisteredBatch {
 public:
  RegisteredBatch(ViewOrigin* owner, std::string path)
      : owner_(owner), path_(std::move(path)), batch_(DecodePool::NewBatch()) {
    owner_->AddBatch(path_, batch_);
  }
  ~RegisteredBatch() { owner_->RemoveBatch(path_, batch_.get()); }
  RegisteredBatch(const RegisteredBatch&) = delete;
  RegisteredBatch& operator=(const RegisteredBatch&) = delete;
  const std::shared_ptr<DecodePool::Batch>& get() const { return batch_; }

 private:
  ViewOrigin* const owner_;
  const std::string path_;
  const std::shared_ptr<DecodePool::Batch> batch_;
};

TfRecordCompression CompressionOf(RawViewKind kind) {
  switch (kind) {
    case RawViewKind::kGzipTfRecord:
      return TfRecordCompression::kGzip;
    case RawViewKind::kZlibTfRecord:
      return TfRecordCompression::kZlib;
    default:
      return TfRecordCompression::kNone;
  }
}

bool IsTfRecordKind(RawViewKind k) {
  return k == RawViewKind::kTfRecord || k == RawViewKind::kGzipTfRecord ||
         k == RawViewKind::kZlibTfRecord;
}

// One open view file: produces the bytes of [off, off + len) from the raw
// file (read through the cache) by decoding the records the range covers.
class ViewFile final : public OriginFile {
 public:
  // Produced bytes (a record, an image), in the pool's reused buffers.
  using Bytes = OutputBuffers::Buffer;
  struct Parts {
    ObjectCache* cache = nullptr;
    ObjectCache::Opened raw;
    std::shared_ptr<const ViewLayout> layout;
    ViewOptions options;
    RawViewKind kind = RawViewKind::kNone;
    OriginIdentity identity;
    std::shared_ptr<DecodePool> pool;
    std::shared_ptr<JpegDecoder> decoder;
    std::shared_ptr<ViewStats> stats;
    std::string view_path;        // as the mount shows it, for messages
    std::string path;             // relative to the view's root, for Expedite
    ViewOrigin* owner = nullptr;  // outlives every ViewFile (view_namespace.h)
    std::string raw_path;
  };
  explicit ViewFile(Parts p)
      : p_(std::move(p)),
        src_(p_.cache, p_.raw.file, static_cast<uint64_t>(p_.raw.st.st_size),
             &p_.stats->counters.raw_bytes_read) {}

  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
    const ViewLayout& l = *p_.layout;
    if (off >= l.size || len == 0) return size_t{0};
    len = static_cast<size_t>(std::min<uint64_t>(len, l.size - off));
    Status s = l.kind == ViewKind::kNpy ? ReadNpy(static_cast<char*>(buf), len, off)
                                        : ReadTfRecord(static_cast<char*>(buf), len, off);
    if (!s.ok()) {
      p_.stats->counters.failed_reads++;
      return s;
    }
    return len;
  }
  Result<OriginIdentity> Identity() override { return p_.identity; }

 private:
  // A production failure of data that laid out fine (a JPEG corrupt past
  // its header, a raw record that changed): listed, and EIO to the reader.
  Status DataError(uint64_t in_offset, const Status& why) {
    if (IsWorldError(why.code())) return why;
    if (p_.stats->errors.Add(p_.view_path, in_offset, why.message())) {
      p_.stats->counters.errors++;
      LOG_WARN("view file '{}': raw offset {} does not decode ({}); reads of it fail with EIO",
               p_.view_path, in_offset, why.message());
    }
    return Status::IOError(p_.view_path + ": offset " + std::to_string(in_offset) +
                           " does not decode: " + why.message());
  }
  static constexpr size_t kWholeFile = SIZE_MAX;
  Status MarkFailed(size_t record, const Status& why) {
    Status s = p_.owner->MarkFailed(p_.raw_path, p_.raw, p_.kind, *p_.layout, record, why);
    if (!s.ok()) LOG_WARN("recording that '{}' does not decode: {}", p_.view_path, s.message());
    return s;
  }

  Status ReadNpy(char* buf, size_t len, uint64_t off) {
    const ViewLayout& l = *p_.layout;
    if (l.npy_failed()) {
      std::memset(buf, 0, len);  // CheckRead refuses every range of it
      return Status::OK();
    }
    std::shared_ptr<const Bytes> image;
    {
      MutexLock g(mu_);
      image = npy_;
    }
    if (!image) {
      RegisteredBatch batch(p_.owner, p_.path);
      if (src_.size() > kMaxJpegFileBytes) {
        return DataError(0, Status::Error(EFBIG, "jpeg file of " + std::to_string(src_.size()) +
                                                     " bytes is too large to decode"));
      }
      std::string jpeg(src_.size(), '\0');
      STOKER_RETURN_IF_ERROR(ReadExactly(src_, jpeg.data(), jpeg.size(), 0, "jpeg"));
      // A read of the whole file (one cache chunk) takes it straight in.
      const bool whole = off == 0 && len == l.size;
      std::shared_ptr<Bytes> out = whole ? nullptr : p_.pool->buffers().Take(l.size);
      char* to = whole ? buf : out->data();
      std::vector<DecodePool::Job> jobs;
      jobs.push_back([&] {
        return ProduceNpyView(l, jpeg, p_.options, *p_.decoder, reinterpret_cast<uint8_t*>(to),
                              l.size);
      });
      std::vector<Status> st =
          p_.pool->RunAll(batch.get(), CurrentDecodePriority(), std::move(jobs));
      if (!st[0].ok()) {
        Status e = DataError(0, st[0]);
        if (IsWorldError(st[0].code()) || !MarkFailed(kWholeFile, st[0]).ok()) return e;
        std::memset(buf, 0, len);  // failed for good: CheckRead refuses it from now on
        return Status::OK();
      }
      p_.stats->counters.images_decoded++;
      p_.stats->counters.decoded_bytes += l.size;
      if (whole) return Status::OK();
      image = out;
    }
    std::memcpy(buf, image->data() + off, len);
    MutexLock g(mu_);
    // Kept for the next piece of this image, until a read reaches its end.
    npy_ = off + len >= l.size ? nullptr : image;
    return Status::OK();
  }

  // The raw payloads of records idx (ascending), CRCs checked.
  Status RawPayloads(const std::vector<size_t>& idx, std::vector<std::string>* out) {
    const ViewLayout& l = *p_.layout;
    out->assign(idx.size(), std::string());
    const TfRecordCompression c = CompressionOf(p_.kind);
    if (c == TfRecordCompression::kNone) {
      for (size_t k = 0; k < idx.size(); ++k) {
        const ViewRecord& r = l.records[idx[k]];
        auto payload = ReadTfRecordAt(src_, r.in_offset);
        if (!payload.ok()) return DataError(r.in_offset, payload.status());
        (*out)[k] = std::move(payload).value();
      }
      return Status::OK();
    }
    // A compressed stream reads only from its start; a sequential reader
    // goes on from where the previous read of this file stopped.
    MutexLock g(z_mu_);
    if (!z_ || l.records[idx[0]].in_offset < z_next_) {
      z_ = std::make_unique<CompressedTfRecordReader>(&src_, c);
      z_next_ = 0;
    }
    TfRecordExtent extent;
    std::string payload;
    size_t k = 0;
    while (k < idx.size()) {
      auto got = z_->Next(&extent, &payload);
      const uint64_t want = l.records[idx[k]].in_offset;
      if (!got.ok()) {
        if (!z_->framing_intact() || extent.offset == want) {
          z_.reset();
          return DataError(want, got.status());
        }
        z_next_ = extent.end();
        continue;
      }
      if (!*got) {
        z_.reset();
        return DataError(want, Status::Corruption("compressed TFRecord ended early"));
      }
      z_next_ = extent.end();
      if (extent.offset == want) (*out)[k++] = std::move(payload);
    }
    return Status::OK();
  }

  // A record another read of this file is producing now (prefetch reads
  // neighbouring chunks at once, and a record may straddle them): waited
  // for, not decoded twice.
  struct Pending {
    explicit Pending(std::shared_ptr<DecodePool::Batch> b) : batch(std::move(b)) {}
    const std::shared_ptr<DecodePool::Batch> batch;  // what produces it: a waiter raises it
    Mutex mu;
    CondVar cv;
    bool done GUARDED_BY(mu) = false;
    Status status GUARDED_BY(mu);                       // a failure of the world
    std::shared_ptr<const Bytes> bytes GUARDED_BY(mu);  // null = reads as zeros
  };

  // Completes the Pendings of the records a read produces, whatever path
  // it leaves by (unset results read as the read's own failure).
  class Producing {
   public:
    explicit Producing(ViewFile* f) : f_(f) {}
    ~Producing() { Finish(Status::IOError("another read of this view file failed")); }
    void Add(size_t idx, std::shared_ptr<Pending> p) { mine_.emplace_back(idx, std::move(p)); }
    void Set(size_t idx, std::shared_ptr<const Bytes> bytes) { results_[idx] = bytes; }
    void Finish(const Status& failed) {
      if (mine_.empty()) return;
      {
        MutexLock g(f_->mu_);
        for (const auto& [idx, p] : mine_) f_->inflight_.erase(idx);
      }
      for (const auto& [idx, p] : mine_) {
        MutexLock g(p->mu);
        auto it = results_.find(idx);
        if (it != results_.end()) {
          p->bytes = it->second;
        } else {
          p->status = failed;
        }
        p->done = true;
        p->cv.notify_all();
      }
      mine_.clear();
    }

   private:
    ViewFile* const f_;
    std::vector<std::pair<size_t, std::shared_ptr<Pending>>> mine_;
    std::map<size_t, std::shared_ptr<const Bytes>> results_;
  };

  Status ReadTfRecord(char* buf, size_t len, uint64_t off) {
    const ViewLayout& l = *p_.layout;
    auto [first, last] = l.RecordsOverlapping(off, len);
    const uint64_t end = off + len;
    std::vector<std::shared_ptr<const Bytes>> produced(last - first);
    // A record wholly inside this read is produced straight into buf (no
    // buffer, no copy); only this read wants it (the cache reads each chunk
    // once), so it is not offered to others. Records the read cuts go into
    // a pooled buffer, offered to concurrent reads and kept for the next.
    std::vector<char> direct(last - first, 0);
    std::vector<size_t> need;
    std::vector<std::pair<size_t, std::shared_ptr<Pending>>> others;
    RegisteredBatch batch(p_.owner, p_.path);
    Producing producing(this);
    {
      MutexLock g(mu_);
      for (size_t i = first; i < last; ++i) {
        const ViewRecord& r = l.records[i];
        if (r.kind == ViewRecordKind::kFailed) continue;  // zeros, see CheckRead
        auto it = kept_.find(i);
        ViewOrigin::RecordBytes handed;
        if (it != kept_.end()) {
          produced[i - first] = it->second;
        } else if (r.out_offset < off && (handed = p_.owner->HandedOff(p_.layout, i))) {
          produced[i - first] = std::move(handed);  // cut by another open's read
        } else if (auto in = inflight_.find(i); in != inflight_.end()) {
          others.emplace_back(i, in->second);
        } else if (r.out_offset >= off && r.out_end() <= end) {
          need.push_back(i);
          direct[i - first] = 1;
        } else {
          need.push_back(i);
          auto p = std::make_shared<Pending>(batch.get());
          inflight_[i] = p;
          producing.Add(i, std::move(p));
        }
      }
    }
    if (!need.empty()) {
      std::vector<std::string> payloads;
      Status raw = RawPayloads(need, &payloads);
      if (!raw.ok()) {
        producing.Finish(raw);
        return raw;
      }
      std::vector<std::shared_ptr<Bytes>> outs(need.size());
      std::vector<DecodePool::Job> jobs;
      for (size_t k = 0; k < need.size(); ++k) {
        const ViewRecord* r = &l.records[need[k]];
        char* to = buf + (r->out_offset - off);
        if (!direct[need[k] - first]) {
          outs[k] = p_.pool->buffers().Take(r->out_size);  // reused, not zeroed
          to = outs[k]->data();
        }
        jobs.push_back([this, &payloads, k, r, to] {
          return ProduceTfRecordViewRecord(*r, payloads[k], p_.options, *p_.decoder,
                                           reinterpret_cast<uint8_t*>(to), r->out_size);
        });
      }
      std::vector<Status> st =
          p_.pool->RunAll(batch.get(), CurrentDecodePriority(), std::move(jobs));
      for (size_t k = 0; k < need.size(); ++k) {
        const ViewRecord& r = l.records[need[k]];
        if (!st[k].ok()) {
          // Its neighbours in this chunk stay readable: the record reads as
          // zeros here, and its layout entry becomes kFailed (so EIO) first.
          Status e = DataError(r.in_offset, st[k]);
          if (IsWorldError(st[k].code()) || !MarkFailed(need[k], st[k]).ok()) {
            producing.Finish(e);
            return e;
          }
          if (direct[need[k] - first]) {
            direct[need[k] - first] = 0;  // produced is null: zeros below
          } else {
            producing.Set(need[k], nullptr);
          }
          continue;
        }
        p_.stats->counters.records_decoded++;
        p_.stats->counters.decoded_bytes += r.out_size;
        if (direct[need[k] - first]) continue;
        produced[need[k] - first] = outs[k];
        producing.Set(need[k], outs[k]);
      }
      // Records cut by the end of this read are kept before they leave
      // inflight_: a read of the next chunk that starts in between finds
      // them in one or the other, and does not decode them again.
      MutexLock g(mu_);
      for (size_t i : need) {
        const ViewRecord& r = l.records[i];
        if (produced[i - first] != nullptr && r.out_end() > end && r.out_size <= kKeptBytes) {
          kept_[i] = produced[i - first];
        }
      }
    }
    producing.Finish(Status::OK());
    // Only now, having produced ours: two reads waiting on each other's
    // records both get there.
    // Whoever produces them may do it at a lower priority (a prefetch's,
    // a warm's): not behind all the other work of that priority.
    for (const auto& [i, p] : others) p_.pool->Raise(*p->batch, CurrentDecodePriority());
    for (const auto& [i, p] : others) {
      MutexLock g(p->mu);
      while (!p->done) p->cv.Wait(p->mu);
      if (!p->status.ok()) return p->status;
      produced[i - first] = p->bytes;  // null: failed for good, reads as zeros
    }
    MutexLock g(mu_);
    for (size_t i = first; i < last; ++i) {
      const ViewRecord& r = l.records[i];
      const uint64_t a = std::max(off, r.out_offset);
      const uint64_t b = std::min(end, r.out_end());
      if (direct[i - first]) {
        kept_.erase(i);
        continue;  // already in place
      }
      if (r.kind == ViewRecordKind::kFailed || produced[i - first] == nullptr) {
        std::memset(buf + (a - off), 0, b - a);
        continue;
      }
      std::memcpy(buf + (a - off), produced[i - first]->data() + (a - r.out_offset), b - a);
      // Cut by the end of this read: the next read (the next chunk) wants
      // it, in this open or, after a directory prefetch, in another.
      if (r.out_end() > end && r.out_size <= kKeptBytes) {
        kept_[i] = produced[i - first];
        p_.owner->HandOff(p_.layout, i, produced[i - first]);
      } else {
        kept_.erase(i);
      }
    }
    uint64_t kept_bytes = 0;
    for (const auto& [idx, bytes] : kept_) kept_bytes += bytes->size();
    while (!kept_.empty() && (kept_.size() > kKeptRecords || kept_bytes > kKeptBytes)) {
      kept_bytes -= kept_.begin()->second->size();
      kept_.erase(kept_.begin());
    }
    return Status::OK();
  }

  const Parts p_;
  CachedByteSource src_;
  Mutex mu_;
  std::map<size_t, std::shared_ptr<const Bytes>> kept_ GUARDED_BY(mu_);
  std::map<size_t, std::shared_ptr<Pending>> inflight_ GUARDED_BY(mu_);
  std::shared_ptr<const Bytes> npy_ GUARDED_BY(mu_);
  // Compressed files: where the last read's inflating stopped.
  Mutex z_mu_;
  std::unique_ptr<CompressedTfRecordReader> z_ GUARDED_BY(z_mu_);
  uint64_t z_next_ GUARDED_BY(z_mu_) = 0;  // next frame's offset
};

}  // namespace

RawViewKind ClassifyRawFile(std::string_view name, std::string_view head, ByteSource& src,
                            std::optional<TfRecordCompression> compression) {
  const auto* h = reinterpret_cast<const uint8_t*>(head.data());
  if (LooksLikeJpeg(h, head.size())) return RawViewKind::kJpeg;
  if (head.size() >= kTfRecordHeaderSize && IsTfRecord(h, head.size(), src.size())) {
    return RawViewKind::kTfRecord;
  }
  const TfRecordCompression c = compression ? *compression : CompressionFromName(name);
  if (c != TfRecordCompression::kNone && SniffCompression(h, head.size()) == c &&
      IsCompressedTfRecord(src, c)) {
    return c == TfRecordCompression::kGzip ? RawViewKind::kGzipTfRecord
                                           : RawViewKind::kZlibTfRecord;
  }
  return RawViewKind::kNone;
}

struct ViewOrigin::Resolved {
  bool is_dir = false;
  std::string raw_path;
  RawViewKind kind = RawViewKind::kNone;
  std::optional<ObjectCache::Opened> raw;
  std::shared_ptr<const ViewLayout> layout;
  struct stat st {};
};

ViewOrigin::ViewOrigin(ViewSpec spec, std::string prefix, std::shared_ptr<Origin> raw,
                       std::shared_ptr<DecodePool> pool, std::shared_ptr<ViewStats> stats,
                       std::shared_ptr<JpegDecoder> decoder)
    : spec_(std::move(spec)),
      prefix_(std::move(prefix)),
      raw_(std::move(raw)),
      pool_(std::move(pool)),
      stats_(std::move(stats)),
      // Without a decoder of its own, the pool's (aliased: it lives as long as the pool).
      decoder_(decoder ? std::move(decoder)
                       : std::shared_ptr<JpegDecoder>(pool_, &pool_->decoder())),
      fingerprint_(spec_.options.Fingerprint(decoder_->name())),
      dev_(Fnv1a(spec_.name + "\n" + fingerprint_) | kDerivedDevBit) {}

ViewOrigin::~ViewOrigin() = default;

void ViewOrigin::Attach(ObjectCache* cache) { cache_ = cache; }

void ViewOrigin::HandOff(const std::shared_ptr<const ViewLayout>& layout, size_t record,
                         RecordBytes bytes) {
  MutexLock l(handoff_mu_);
  for (const HandedOffRecord& h : handed_off_) {
    if (h.layout == layout && h.record == record) return;
  }
  handed_off_bytes_ += bytes->size();
  handed_off_.push_back({layout, record, std::move(bytes)});
  while (handed_off_.size() > kHandedOffRecords || handed_off_bytes_ > kHandedOffBytes) {
    handed_off_bytes_ -= handed_off_.front().bytes->size();
    handed_off_.pop_front();
  }
}

ViewOrigin::RecordBytes ViewOrigin::HandedOff(const std::shared_ptr<const ViewLayout>& layout,
                                              size_t record) {
  MutexLock l(handoff_mu_);
  for (const HandedOffRecord& h : handed_off_) {
    if (h.layout == layout && h.record == record) return h.bytes;
  }
  return nullptr;
}

std::string ViewOrigin::Describe() const {
  return "view " + spec_.name + " of " + raw_->Describe();
}

struct stat ViewOrigin::ViewStat(const struct stat& raw_st, uint64_t size) const {
  struct stat st = raw_st;
  st.st_dev = static_cast<dev_t>(dev_);
  // Not the raw file's number: tar, rsync -H and du would take a view file
  // for a hard link of its raw file. Bit 62 keeps it away from the origin's
  // numbers; the top of the range belongs to .stoker.
  std::string key = std::to_string(dev_) + ":" + std::to_string(raw_st.st_ino);
  // A remote raw file (no device) carries its ETag in ctime; a view file's
  // times are its raw file's, and its identity compares no ctime (it has a
  // device), so the ETag goes into its inode: a raw object re-uploaded with
  // the same size within the same second gives a new view file.
  if (raw_st.st_dev == 0) {
    key +=
        ":" + std::to_string(raw_st.st_ctim.tv_sec) + "." + std::to_string(raw_st.st_ctim.tv_nsec);
  }
  st.st_ino = static_cast<ino_t>((Fnv1a(key) & ((uint64_t{1} << 62) - 1)) | (uint64_t{1} << 62));
  st.st_mode &= ~static_cast<mode_t>(0222);
  if (S_ISREG(st.st_mode)) {
    st.st_size = static_cast<off_t>(size);
    st.st_blocks = static_cast<blkcnt_t>((size + 511) / 512);
    st.st_nlink = 1;
  }
  return st;
}

std::string ViewOrigin::LayoutName(RawViewKind kind) const {
  return "view-layout;kind=" + std::to_string(static_cast<int>(kind)) + ";" + fingerprint_;
}

std::shared_ptr<const ViewLayout> ViewOrigin::KnownLayout(const std::string& raw_path,
                                                          const OriginIdentity& id) {
  MutexLock l(known_mu_);
  auto it = known_.find(raw_path);
  if (it == known_.end() || !(it->second.identity == id)) return nullptr;
  return it->second.layout;
}

void ViewOrigin::Remember(const std::string& raw_path, Known k) {
  MutexLock l(known_mu_);
  if (known_.size() >= kMaxKnown && known_.find(raw_path) == known_.end()) known_.clear();
  known_[raw_path] = std::move(k);
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
                                                               const ObjectCache::Opened& raw) {
  const OriginIdentity id = IdentityFromStat(raw.st);
  if (auto known = KnownLayout(raw_path, id)) return known;
  std::unique_lock<std::mutex> stripe(
      layout_stripes_[std::hash<std::string>()(raw_path) % layout_stripes_.size()],
      std::try_to_lock);
  if (!stripe.owns_lock()) {
    // Most likely laid out by another now, maybe a warm's: raise its check.
    Expedite(view_path);
    stripe.lock();
  }
  if (auto known = KnownLayout(raw_path, id)) return known;

  const std::string shown = prefix_ + "/" + view_path;
  const std::string name = LayoutName(kind);
  std::shared_ptr<const ViewLayout> layout;
  auto stored = cache_->GetDerived(*raw.file, name);
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
    CachedByteSource src(cache_, raw.file, id.size, &stats_->counters.raw_bytes_read);
    const std::string decoder = decoder_->name();
    // Under skip every JPEG is checked to decode before it gets a place
    // (view_layout.h): on the pool, at the priority of whoever waits.
    JpegCheck check;
    std::optional<RegisteredBatch> batch;
    if (spec_.options.on_error == OnError::kSkip) {
      batch.emplace(this, view_path);
      check = [this, &batch](const std::vector<std::string_view>& jpegs) {
        std::vector<DecodePool::Job> jobs;
        for (std::string_view j : jpegs) {
          jobs.push_back([j] {
            return CheckJpegDecodes(reinterpret_cast<const uint8_t*>(j.data()), j.size());
          });
        }
        std::vector<Status> st =
            pool_->RunAll(batch->get(), CurrentDecodePriority(), std::move(jobs));
        stats_->counters.images_checked += jpegs.size();
        return st;
      };
    }
    Result<ViewLayout> made =
        kind == RawViewKind::kJpeg
            ? LayoutJpegNpyView(src, spec_.options, decoder, check)
            : LayoutTfRecordView(src, CompressionOf(kind), spec_.options, decoder, check);
    if (!made.ok()) {
      if (IsWorldError(made.status().code())) return made.status();
      // on_error=skip and the JPEG does not decode: out of the view.
      if (stats_->errors.Add(shown, 0, made.status().message())) stats_->counters.errors++;
      Remember(raw_path, Known{id, RawViewKind::kNone, nullptr});
      return Status::NotFound("'" + shown + "' does not decode and is skipped");
    }
    stats_->counters.layouts_computed++;
    layout = std::make_shared<const ViewLayout>(std::move(made).value());
    Status put = cache_->PutDerived(*raw.file, name, EncodeViewLayout(*layout));
    if (!put.ok()) LOG_WARN("storing the layout of '{}': {}", shown, put.message());
  }
  for (const ViewError& e : layout->errors) {
    if (stats_->errors.Add(shown, e.in_offset, e.message)) stats_->counters.errors++;
  }
  Remember(raw_path, Known{id, kind, layout});
  return layout;
}

Result<ViewOrigin::Resolved> ViewOrigin::Resolve(const std::string& path) {
  STOKER_CHECK(cache_ != nullptr, "a view origin used before Attach");
  Resolved r;
  Result<struct stat> st = raw_->Stat(path);
  if (!st.ok() && st.status().code() != ENOENT) return st.status();
  if (st.ok() && S_ISDIR(st->st_mode)) {
    r.is_dir = true;
    r.raw_path = path;
    r.st = ViewStat(*st, 0);
    return r;
  }
  if (EndsWith(path, kNpySuffix)) {
    const std::string raw_path = path.substr(0, path.size() - kNpySuffix.size());
    Result<struct stat> rs = raw_->Stat(raw_path);
    if (rs.ok() && S_ISREG(rs->st_mode)) {
      STOKER_ASSIGN_OR_RETURN(RawViewKind kind, KindOf(raw_path, *rs));
      if (kind == RawViewKind::kJpeg) {
        r.raw_path = raw_path;
        r.kind = kind;
      }
    } else if (!rs.ok() && rs.status().code() != ENOENT) {
      return rs.status();
    }
  }
  if (r.kind == RawViewKind::kNone && st.ok() && S_ISREG(st->st_mode)) {
    STOKER_ASSIGN_OR_RETURN(RawViewKind kind, KindOf(path, *st));
    if (IsTfRecordKind(kind)) {
      r.raw_path = path;
      r.kind = kind;
    }
  }
  if (r.kind == RawViewKind::kNone) {
    return Status::NotFound("'" + prefix_ + "/" + path + "' is not in the view");
  }
  STOKER_ASSIGN_OR_RETURN(ObjectCache::Opened raw, cache_->OpenForDerived(r.raw_path));
  STOKER_ASSIGN_OR_RETURN(r.layout, LayoutOf(r.raw_path, path, r.kind, raw));
  r.st = ViewStat(raw.st, r.layout->size);
  r.raw = std::move(raw);
  return r;
}

Result<struct stat> ViewOrigin::Stat(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(Resolved r, Resolve(path));
  return r.st;
}

Status ViewOrigin::ReadDir(const std::string& path,
                           const std::function<bool(const OriginDirEntry&)>& fn) {
  std::vector<OriginDirEntry> raw_entries;
  STOKER_RETURN_IF_ERROR(raw_->ReadDir(path, [&](const OriginDirEntry& e) {
    if (S_ISDIR(e.st.st_mode) || S_ISREG(e.st.st_mode)) raw_entries.push_back(e);
    return true;
  }));
  // Recognising a file not seen before reads its head at the origin: over a
  // NAS that is a round trip per file, so a big directory does it in parallel.
  // Under skip a JPEG is listed only once laid out: the head does not tell
  // whether its scan decodes, and a listed name must stat.
  const bool lay_out_jpegs = spec_.options.on_error == OnError::kSkip;
  STOKER_CHECK(!lay_out_jpegs || cache_ != nullptr, "a view origin used before Attach");
  std::vector<Result<RawViewKind>> kinds(raw_entries.size(), RawViewKind::kNone);
  std::atomic<size_t> next{0};
  auto classify = [&] {
    for (size_t i; (i = next.fetch_add(1)) < raw_entries.size();) {
      const OriginDirEntry& e = raw_entries[i];
      if (!S_ISREG(e.st.st_mode)) continue;
      const std::string raw_path = JoinPath(path, e.name);
      kinds[i] = KindOf(raw_path, e.st);
      if (!lay_out_jpegs || !kinds[i].ok() || *kinds[i] != RawViewKind::kJpeg ||
          KnownLayout(raw_path, IdentityFromStat(e.st)) != nullptr) {
        continue;
      }
      const std::string view_path = raw_path + std::string(kNpySuffix);
      Result<ObjectCache::Opened> raw = cache_->OpenForDerived(raw_path);
      Status s = raw.ok() ? LayoutOf(raw_path, view_path, RawViewKind::kJpeg, *raw).status()
                          : raw.status();
      if (s.ok()) continue;
      if (s.code() == ENOENT) {
        kinds[i] = s;  // does not decode (skipped), or gone
      } else {
        // The origin failed us, not the file: listed without its size, as
        // under fail; a stat of it asks again.
        LOG_DEBUG("view {}: laying out '{}' for a listing: {}", spec_.name, raw_path, s.message());
      }
    }
  };
  std::vector<std::thread> helpers;
  const size_t want = std::min<size_t>(kReadDirThreads - 1, raw_entries.size() / 64);
  // Helpers lay out at the caller's priority (a warm walk's: kWarm).
  const std::optional<WorkerPool::Priority> priority = WorkerPool::CurrentPriority();
  for (size_t t = 0; t < want; ++t) {
    try {
      helpers.emplace_back([&] {
        WorkerPool::AsPriority as(priority);
        classify();
      });
    } catch (const std::system_error&) {
      break;  // no thread to be had: this one does it all
    }
  }
  classify();
  for (std::thread& t : helpers) t.join();

  std::set<std::string> names;
  for (size_t i = 0; i < raw_entries.size(); ++i) {
    const OriginDirEntry& e = raw_entries[i];
    OriginDirEntry out;
    if (S_ISDIR(e.st.st_mode)) {
      out.name = e.name;
      out.st = ViewStat(e.st, 0);
    } else {
      const std::string raw_path = JoinPath(path, e.name);
      const Result<RawViewKind>& kind = kinds[i];
      if (!kind.ok()) {
        LOG_DEBUG("view {}: leaving '{}' out of a listing: {}", spec_.name, raw_path,
                  kind.status().message());
        continue;
      }
      if (*kind == RawViewKind::kNone) continue;
      out.name = *kind == RawViewKind::kJpeg ? e.name + std::string(kNpySuffix) : e.name;
      auto layout = KnownLayout(raw_path, IdentityFromStat(e.st));
      out.st = ViewStat(e.st, layout ? layout->size : 0);
      out.attrs_complete = layout != nullptr;
    }
    if (!names.insert(out.name).second) continue;
    if (!fn(out)) break;
  }
  return Status::OK();
}

Status ViewOrigin::MarkFailed(const std::string& raw_path, const ObjectCache::Opened& raw,
                              RawViewKind kind, const ViewLayout& made_from, size_t record,
                              const Status& why) {
  const OriginIdentity id = IdentityFromStat(raw.st);
  std::lock_guard<std::mutex> stripe(
      layout_stripes_[std::hash<std::string>()(raw_path) % layout_stripes_.size()]);
  std::shared_ptr<const ViewLayout> base = KnownLayout(raw_path, id);
  ViewLayout l = base ? *base : made_from;
  if (l.kind == ViewKind::kNpy) {
    if (l.npy_failed()) return Status::OK();
    ViewRecord r;
    r.kind = ViewRecordKind::kFailed;
    r.in_size = l.source_size;
    r.out_size = l.size;
    l.records = {r};
  } else {
    if (record >= l.records.size()) return Status::Invalid("no such view record");
    ViewRecord& r = l.records[record];
    if (r.kind == ViewRecordKind::kFailed) return Status::OK();
    r.kind = ViewRecordKind::kFailed;
    r.prefix_size = 0;
    r.shape = ImageShape{};
  }
  const uint64_t in_offset = l.kind == ViewKind::kNpy ? 0 : l.records[record].in_offset;
  l.errors.push_back({in_offset, why.code(), why.message()});
  // Stored before any zero of it reaches the cache: the index never says a
  // record is good whose bytes the cache holds as zeros.
  STOKER_RETURN_IF_ERROR(cache_->PutDerived(*raw.file, LayoutName(kind), EncodeViewLayout(l)));
  Remember(raw_path, Known{id, kind, std::make_shared<const ViewLayout>(std::move(l))});
  return Status::OK();
}

std::shared_ptr<const ViewLayout> ViewOrigin::LatestLayout(const std::string& path) {
  MutexLock l(known_mu_);
  if (EndsWith(path, kNpySuffix)) {
    auto it = known_.find(path.substr(0, path.size() - kNpySuffix.size()));
    if (it != known_.end() && it->second.kind == RawViewKind::kJpeg) return it->second.layout;
  }
  auto it = known_.find(path);
  if (it != known_.end() && IsTfRecordKind(it->second.kind)) return it->second.layout;
  return nullptr;
}

Status ViewOrigin::CheckRead(const std::string& path, uint64_t off, uint64_t len) {
  std::shared_ptr<const ViewLayout> layout = LatestLayout(path);
  if (!layout) {
    STOKER_ASSIGN_OR_RETURN(Resolved r, Resolve(path));
    layout = r.layout;
    if (!layout) return Status::OK();  // a directory
  }
  auto fail = [&](uint64_t in_offset) {
    stats_->counters.failed_reads++;
    return Status::IOError(prefix_ + "/" + path + ": raw offset " + std::to_string(in_offset) +
                           " does not decode (see .stoker/errors)");
  };
  if (layout->npy_failed()) return len > 0 && off < layout->size ? fail(0) : Status::OK();
  if (layout->kind == ViewKind::kNpy) return Status::OK();
  auto [first, last] = layout->RecordsOverlapping(off, len);
  for (size_t i = first; i < last; ++i) {
    if (layout->records[i].kind == ViewRecordKind::kFailed) {
      return fail(layout->records[i].in_offset);
    }
  }
  return Status::OK();
}

bool ViewOrigin::HasUnreadableRanges(const std::string& path) {
  std::shared_ptr<const ViewLayout> layout = LatestLayout(path);
  if (!layout) {
    Result<Resolved> r = Resolve(path);
    if (!r.ok()) return true;  // unknown: let reads say
    layout = r->layout;
    if (!layout) return false;  // a directory
  }
  if (layout->npy_failed()) return true;
  for (const auto& rec : layout->records) {
    if (rec.kind == ViewRecordKind::kFailed) return true;
  }
  return false;
}

void ViewOrigin::Expedite(const std::string& path) {
  std::vector<std::shared_ptr<DecodePool::Batch>> raise;
  {
    MutexLock l(batches_mu_);
    auto [a, b] = batches_.equal_range(path);
    for (auto it = a; it != b; ++it) raise.push_back(it->second);
  }
  const DecodePriority to = CurrentDecodePriority();
  for (const auto& batch : raise) pool_->Raise(*batch, to);
}

void ViewOrigin::AddBatch(const std::string& path, std::shared_ptr<DecodePool::Batch> batch) {
  MutexLock l(batches_mu_);
  batches_.emplace(path, std::move(batch));
}

void ViewOrigin::RemoveBatch(const std::string& path, const DecodePool::Batch* batch) {
  MutexLock l(batches_mu_);
  auto [a, b] = batches_.equal_range(path);
  for (auto it = a; it != b; ++it) {
    if (it->second.get() == batch) {
      batches_.erase(it);
      return;
    }
  }
  STOKER_CHECK(false, "a decode batch removed that was never added");
}

Result<std::string> ViewOrigin::ReadLink(const std::string& path) {
  return Status::Invalid("views hold no symlinks");
}

Result<std::unique_ptr<OriginFile>> ViewOrigin::Open(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(Resolved r, Resolve(path));
  if (r.is_dir) return Status::Error(EISDIR, "'" + prefix_ + "/" + path + "' is a directory");
  ViewFile::Parts p;
  p.cache = cache_;
  p.raw = std::move(*r.raw);
  p.layout = r.layout;
  p.options = spec_.options;
  p.kind = r.kind;
  p.identity = IdentityFromStat(r.st);
  p.pool = pool_;
  p.decoder = decoder_;
  p.stats = stats_;
  p.view_path = prefix_ + "/" + path;
  p.path = path;
  p.owner = this;
  p.raw_path = r.raw_path;
  return std::unique_ptr<OriginFile>(std::make_unique<ViewFile>(std::move(p)));
}

Result<std::string> ViewOrigin::GetXattr(const std::string& path, const std::string& name) {
  return Status::Error(ENODATA, "view files have no extended attributes");
}

Result<std::vector<std::string>> ViewOrigin::ListXattr(const std::string& path) {
  return std::vector<std::string>{};
}

}  // namespace stoker
