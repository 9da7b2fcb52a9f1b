// ViewFile: see decode/view/view_file.h.
#include "decode/view/view_file.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "cache/worker_pool.h"
#include "decode/tfrecord/tfrecord.h"
#include "decode/tfrecord/tfrecord_compressed.h"
#include "decode/view/cached_byte_source.h"
#include "decode/view/tar_view.h"
#include "decode/view/view_producer.h"
#include "util/log.h"

namespace stoker {

bool IsWorldError(int code) {
  return IsOriginUnavailable(code) || code == ECANCELED || code == EACCES || code == EPERM ||
         code == ENOENT;
}

DecodePriority DecodePriorityFor(Urgency who) {
  switch (who) {
    case Urgency::kReader:
      return DecodePriority::kReader;
    case Urgency::kPrefetch:
      return DecodePriority::kReadahead;
    case Urgency::kWarm:
      return DecodePriority::kWarm;
  }
  return DecodePriority::kReader;
}

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

namespace {

// A JPEG file is decoded whole, from memory: larger ones do not decode.
constexpr uint64_t kMaxJpegFileBytes = 1ull << 30;

// One open view file: produces the bytes of [off, off + len) from the raw
// file (read through the cache) by decoding the records the range covers.
class ViewFile final : public OriginFile {
 public:
  // Produced bytes (a record, an image), in the pool's reused buffers;
  // shared as ChunkBytes (data null: reads as zeros).
  using Bytes = OutputBuffers::Buffer;
  static ChunkBytes Share(const std::shared_ptr<Bytes>& b) {
    return ChunkBytes{std::shared_ptr<const char>(b, b->data()), b->size()};
  }
  using Parts = ViewFileParts;
  explicit ViewFile(Parts p)
      : p_(std::move(p)),
        src_(p_.reader, p_.raw.file, static_cast<uint64_t>(p_.raw.st.st_size),
             &p_.stats->counters.raw_bytes_read) {}

  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
    return Produce(buf, len, off, Urgency::kReader);
  }
  // The cache's reads: decoded at the priority of whom it reads for.
  Result<size_t> ReadAtAligned(void* buf, size_t len, uint64_t off, Urgency who) override {
    return Produce(buf, len, off, who);
  }
  Result<OriginIdentity> Identity() override { return p_.identity; }

 private:
  Result<size_t> Produce(void* buf, size_t len, uint64_t off, Urgency who) {
    const ViewLayout& l = *p_.layout;
    if (off >= l.size || len == 0) return size_t{0};
    len = static_cast<size_t>(std::min<uint64_t>(len, l.size - off));
    const DecodePriority priority = DecodePriorityFor(who);
    Status s = l.kind == ViewKind::kNpy ? ReadNpy(static_cast<char*>(buf), len, off, priority)
                                        : ReadRecords(static_cast<char*>(buf), len, off, priority);
    if (!s.ok()) {
      p_.stats->counters.failed_reads++;
      return s;
    }
    return len;
  }

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

  Status ReadNpy(char* buf, size_t len, uint64_t off, DecodePriority priority) {
    const ViewLayout& l = *p_.layout;
    if (l.npy_failed()) {
      std::memset(buf, 0, len);  // CheckRead refuses every range of it
      return Status::OK();
    }
    ChunkBytes image = p_.reader->recent().Get(KeptKey(kWholeFile)).value_or(ChunkBytes{});
    if (!image.data) {
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
      std::vector<Status> st = p_.pool->RunAll(batch.get(), priority, std::move(jobs));
      if (!st[0].ok()) {
        Status e = DataError(0, st[0]);
        if (IsWorldError(st[0].code()) || !MarkFailed(kWholeFile, st[0]).ok()) return e;
        std::memset(buf, 0, len);  // failed for good: CheckRead refuses it from now on
        return Status::OK();
      }
      p_.stats->counters.images_decoded++;
      p_.stats->counters.decoded_bytes += l.size;
      if (whole) return Status::OK();
      image = Share(out);
    }
    std::memcpy(buf, image.data.get() + off, len);
    // Kept for the next piece of this image, until a read reaches its end.
    if (off + len >= l.size) {
      p_.reader->recent().Drop(KeptKey(kWholeFile));
    } else {
      Keep(kWholeFile, image);
    }
    return Status::OK();
  }

  // The raw payloads of records idx (ascending), CRCs checked; for a tar
  // view, each member's raw bytes.
  Status RawPayloads(const std::vector<size_t>& idx, std::vector<std::string>* out) {
    const ViewLayout& l = *p_.layout;
    out->assign(idx.size(), std::string());
    if (l.kind == ViewKind::kTar) {
      for (size_t k = 0; k < idx.size(); ++k) {
        const ViewRecord& r = l.records[idx[k]];
        (*out)[k].resize(r.in_size);
        Status s = ReadExactly(src_, (*out)[k].data(), r.in_size, r.in_offset, "tar member");
        if (!s.ok()) return DataError(r.in_offset, s);
      }
      return Status::OK();
    }
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
    Status status GUARDED_BY(mu);     // a failure of the world
    ChunkBytes bytes GUARDED_BY(mu);  // data null: reads as zeros
  };

  // Completes the Pendings of the records a read produces, whatever path
  // it leaves by (unset results read as the read's own failure).
  class Producing {
   public:
    explicit Producing(ViewFile* f) : f_(f) {}
    ~Producing() { Finish(Status::IOError("another read of this view file failed")); }
    void Add(size_t idx, std::shared_ptr<Pending> p) { mine_.emplace_back(idx, std::move(p)); }
    void Set(size_t idx, ChunkBytes bytes) { results_[idx] = std::move(bytes); }
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
    std::map<size_t, ChunkBytes> results_;
  };

  // One read of TFRecord or tar view bytes, planned: each record the range
  // overlaps, by where its bytes come from.
  struct RecordRead {
    DecodePriority priority = DecodePriority::kReader;  // whom it is produced for
    uint64_t off = 0, end = 0;
    size_t first = 0, last = 0;  // records [first, last)
    // Per record: its bytes, produced before (kept) or now.
    std::vector<ChunkBytes> produced;
    std::vector<char> kept;  // per record: found kept
    // Per record: produced straight into the reader's buffer (a record
    // wholly inside the read: only this read wants it, as the cache reads
    // each chunk once, so it is not offered to others).
    std::vector<char> direct;
    std::vector<size_t> need;  // to produce here
    // Being produced by another read of this file: waited for.
    std::vector<std::pair<size_t, std::shared_ptr<Pending>>> others;
  };

  Status ReadRecords(char* buf, size_t len, uint64_t off, DecodePriority priority) {
    const ViewLayout& l = *p_.layout;
    RecordRead rr;
    rr.priority = priority;
    rr.off = off;
    rr.end = off + len;
    std::tie(rr.first, rr.last) = l.RecordsOverlapping(off, len);
    rr.produced.resize(rr.last - rr.first);
    rr.direct.assign(rr.last - rr.first, 0);
    rr.kept.assign(rr.last - rr.first, 0);
    RegisteredBatch batch(p_.owner, p_.path);
    Producing producing(this);
    PlanRecords(rr, batch, producing);
    STOKER_RETURN_IF_ERROR(CopyRaw(rr, buf));
    if (!rr.need.empty()) {
      if (Status s = ProduceNeeded(rr, buf, batch, producing); !s.ok()) {
        producing.Finish(s);
        return s;
      }
    }
    producing.Finish(Status::OK());
    // Only now, having produced ours: two reads waiting on each other's
    // records both get there.
    STOKER_RETURN_IF_ERROR(AwaitOthers(rr));
    CopyOut(rr, buf);
    return Status::OK();
  }

  // Sorts the read's records: kept (by a read of this file, in this open
  // or another), being produced by another read, or to produce here
  // (straight into the buffer, or, for a record the read cuts, into a
  // pooled buffer offered to concurrent reads and kept for the next).
  void PlanRecords(RecordRead& rr, const RegisteredBatch& batch, Producing& producing) {
    const ViewLayout& l = *p_.layout;
    MutexLock g(mu_);
    for (size_t i = rr.first; i < rr.last; ++i) {
      const ViewRecord& r = l.records[i];
      if (r.kind != ViewRecordKind::kImage) continue;  // see CopyRaw and CopyOut
      if (auto kept = p_.reader->recent().Get(KeptKey(i))) {
        rr.produced[i - rr.first] = std::move(*kept);
        rr.kept[i - rr.first] = 1;
      } else if (auto in = inflight_.find(i); in != inflight_.end()) {
        rr.others.emplace_back(i, in->second);
      } else if (r.out_offset >= rr.off && r.out_end() <= rr.end) {
        rr.need.push_back(i);
        rr.direct[i - rr.first] = 1;
      } else {
        rr.need.push_back(i);
        auto p = std::make_shared<Pending>(batch.get());
        inflight_[i] = p;
        producing.Add(i, std::move(p));
      }
    }
  }

  // A tar view's copied members: read straight into the buffer.
  Status CopyRaw(const RecordRead& rr, char* buf) {
    const ViewLayout& l = *p_.layout;
    for (size_t i = rr.first; i < rr.last; ++i) {
      const ViewRecord& r = l.records[i];
      if (r.kind != ViewRecordKind::kCopy) continue;
      const uint64_t a = std::max(rr.off, r.out_offset);
      const uint64_t b = std::min(rr.end, r.out_end());
      Status s = ReadExactly(src_, buf + (a - rr.off), b - a, r.in_offset + (a - r.out_offset),
                             "tar member");
      if (!s.ok()) return DataError(r.in_offset, s);
    }
    return Status::OK();
  }

  // Reads the raw payloads of the records to produce and decodes them in
  // the pool. A record that does not decode reads as zeros here (its
  // layout entry becomes kFailed, so EIO, first); a failure of the world
  // fails the read.
  Status ProduceNeeded(RecordRead& rr, char* buf, const RegisteredBatch& batch,
                       Producing& producing) {
    const ViewLayout& l = *p_.layout;
    std::vector<std::string> payloads;
    STOKER_RETURN_IF_ERROR(RawPayloads(rr.need, &payloads));
    std::vector<std::shared_ptr<Bytes>> outs(rr.need.size());
    std::vector<DecodePool::Job> jobs;
    for (size_t k = 0; k < rr.need.size(); ++k) {
      const ViewRecord* r = &l.records[rr.need[k]];
      // A record the read covers only in part (not direct) may begin before
      // buf: it is made in a buffer of its own.
      char* to = nullptr;
      if (rr.direct[rr.need[k] - rr.first]) {
        to = buf + (r->out_offset - rr.off);
      } else {
        outs[k] = p_.pool->buffers().Take(r->out_size);  // reused, not zeroed
        to = outs[k]->data();
      }
      const bool tar = l.kind == ViewKind::kTar;
      jobs.push_back([this, &payloads, k, r, to, tar] {
        auto* out = reinterpret_cast<uint8_t*>(to);
        return tar ? ProduceTarViewMember(*r, payloads[k], p_.options, *p_.decoder, out,
                                          r->out_size)
                   : ProduceTfRecordViewRecord(*r, payloads[k], p_.options, *p_.decoder, out,
                                               r->out_size);
      });
    }
    std::vector<Status> st = p_.pool->RunAll(batch.get(), rr.priority, std::move(jobs));
    for (size_t k = 0; k < rr.need.size(); ++k) {
      const size_t i = rr.need[k];
      const ViewRecord& r = l.records[i];
      if (!st[k].ok()) {
        // Its neighbours in this chunk stay readable.
        Status e = DataError(r.in_offset, st[k]);
        if (IsWorldError(st[k].code()) || !MarkFailed(i, st[k]).ok()) return e;
        if (rr.direct[i - rr.first]) {
          rr.direct[i - rr.first] = 0;  // produced is null: zeros below
        } else {
          producing.Set(i, ChunkBytes{});
        }
        continue;
      }
      p_.stats->counters.records_decoded++;
      p_.stats->counters.decoded_bytes += r.out_size;
      if (rr.direct[i - rr.first]) continue;
      rr.produced[i - rr.first] = Share(outs[k]);
      producing.Set(i, rr.produced[i - rr.first]);
    }
    // Records cut by the end of this read are kept before they leave
    // inflight_: a read of the next chunk that starts in between finds
    // them in one or the other, and does not decode them again.
    MutexLock g(mu_);
    for (size_t i : rr.need) {
      if (rr.produced[i - rr.first].data != nullptr && l.records[i].out_end() > rr.end) {
        Keep(i, rr.produced[i - rr.first]);
      }
    }
    return Status::OK();
  }

  // Waits for the records other reads produce. Whoever produces them may
  // do it at a lower priority (a prefetch's, a warm's): raised, not left
  // behind all the other work of that priority.
  Status AwaitOthers(RecordRead& rr) {
    for (const auto& [i, p] : rr.others) p_.pool->Raise(*p->batch, rr.priority);
    for (const auto& [i, p] : rr.others) {
      MutexLock g(p->mu);
      while (!p->done) p->cv.Wait(p->mu);
      if (!p->status.ok()) return p->status;
      rr.produced[i - rr.first] = p->bytes;  // null: failed for good, reads as zeros
    }
    return Status::OK();
  }

  // Copies each record's part into the buffer (zeros for a failed one) and
  // keeps the records the read cuts, for the next read: the next chunk, in
  // this open or, after a directory prefetch, in another. A kept record
  // whose end this read reached is done with.
  void CopyOut(const RecordRead& rr, char* buf) {
    const ViewLayout& l = *p_.layout;
    MutexLock g(mu_);
    for (size_t i = rr.first; i < rr.last; ++i) {
      const ViewRecord& r = l.records[i];
      const uint64_t a = std::max(rr.off, r.out_offset);
      const uint64_t b = std::min(rr.end, r.out_end());
      if (rr.direct[i - rr.first] || r.kind == ViewRecordKind::kCopy) continue;  // in place
      const ChunkBytes& bytes = rr.produced[i - rr.first];
      if (r.kind != ViewRecordKind::kImage || bytes.data == nullptr) {
        std::memset(buf + (a - rr.off), 0, b - a);
        continue;
      }
      std::memcpy(buf + (a - rr.off), bytes.data.get() + (a - r.out_offset), b - a);
      if (r.out_end() > rr.end) {
        Keep(i, bytes);
      } else if (rr.kept[i - rr.first] || r.out_offset < rr.off) {
        // Done with: also when this read decoded it too (a read that cut
        // it at its end ran at the same time, and keeps it).
        p_.reader->recent().Drop(KeptKey(i));
      }
    }
  }

  // Where this file version's produced bytes are kept (record idx, or
  // kWholeFile: a .npy's image): named by its layout, which the entry pins.
  RecentBytes::Key KeptKey(size_t idx) const {
    return RecentBytes::Key{RecentBytes::Kind::kProduced,
                            reinterpret_cast<uintptr_t>(p_.layout.get()), 0, idx};
  }
  void Keep(size_t idx, const ChunkBytes& bytes) {
    p_.reader->recent().Keep(KeptKey(idx), bytes, p_.layout);
  }

  const Parts p_;
  CachedByteSource src_;
  Mutex mu_;
  std::map<size_t, std::shared_ptr<Pending>> inflight_ GUARDED_BY(mu_);
  // Compressed files: where the last read's inflating stopped.
  Mutex z_mu_;
  std::unique_ptr<CompressedTfRecordReader> z_ GUARDED_BY(z_mu_);
  uint64_t z_next_ GUARDED_BY(z_mu_) = 0;  // next frame's offset
};

}  // namespace

std::unique_ptr<OriginFile> OpenViewFile(ViewFileParts parts) {
  return std::make_unique<ViewFile>(std::move(parts));
}

}  // namespace stoker
