// ViewOrigin: one decoded view (--view NAME[:OPTIONS]) as an Origin whose
// files hold decoded bytes, so that the ObjectCache caches decoded output
// exactly as it caches raw data (chunks, checksums, quota, eviction, fsck,
// crash rules, collapsed misses, prefetch, warm).
//
// Paths are relative to the view's root (ViewNamespace strips ".NAME/") and
// mirror the raw origin's tree:
//  - a directory is the raw directory;
//  - a TFRecord file (by content: its first frame's length CRC checks out;
//    GZIP/ZLIB by name suffix and content) keeps its name and reads as the
//    rewritten TFRecord of view_layout.h;
//  - a JPEG file X (by content: FF D8 FF) appears as X.npy;
//  - everything else (other files, symlinks, devices) is left out: ENOENT.
// ReadDir recognises files by their first 4 KiB, read from the raw origin
// (not the cache, so a listing never pulls whole chunks), remembered per
// raw identity. Under on_error=fail an entry whose layout is not known yet
// comes without its size (attrs_complete = false), so listing a fail view
// never scans raw files. Under on_error=skip a JPEG is listed only once laid
// out (as Stat does, through the cache, in the listing's parallel step): its
// head does not tell whether its scan decodes, and a name listed must not
// then be ENOENT; such entries come with their sizes. (TFRecords are listed
// by their head under skip too: a record that does not decode is left out
// of the file, not the file out of the listing.) Stat and Open lay the file
// out: the raw file is opened in the cache (RawReader::OpenForDerived) and
// its layout read from the index (RawReader::GetDerived, keyed by the
// view's fingerprint) or computed by one scan of the raw file through the
// cache and stored there. Concurrent stats of one file scan it once.
//
// Attributes of a view entry are the raw entry's with st_dev set to the
// view's device number (a hash of its name and fingerprint, top bit set),
// st_ino a hash of that and the raw inode number (bit 62 set: never the raw
// file's, so tools do not take a view file for a hard link of its raw file),
// st_size the layout's size and write bits cleared. The cache's identity of
// a view file is therefore the raw file's identity plus the view's options:
// a changed raw file, or other options, is a new version of the view file.
//
// Reading: an open view file decodes exactly the records a read covers, on
// the DecodePool, at the priority of whom the cache reads for (its Urgency:
// a reader's kReader; the cache's prefetch: kReadahead; warm: kWarm). A reader that
// waits on records another read is producing (the cache's collapsed miss on
// a prefetch's or warm's fetch: Expedite; a record two reads of one open
// file share) raises that read's decode batch to its own priority; so does
// a stat waiting on another's layout of the file.
// A record or file the layout marks kFailed reads as zeros here, so that the
// cache chunk it shares with good records can still be made and cached;
// CheckRead (which fs/ calls before every read) answers EIO for any range
// that touches it.
// A record that laid out but fails to decode (its entropy data is corrupt or
// truncated) becomes kFailed the same way (MarkFailed). Under on_error=skip
// that does not happen with the CPU decoder: the layout checks every JPEG
// to decode first (CheckJpegDecodes on the pool) and leaves out those that
// do not, so a size once given out never changes; what the check passes
// and a view's own decoder still fails (a GPU view with fallback=none) is
// kFailed as under fail. Every failure is counted, logged once and listed
// in ViewStats.
//
// Thread-safety: all methods are thread-safe. The reader (the cache the
// view is made with, ObjectCache::Open's make_derived) outlives every call.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "cache/derived_source.h"
#include "cache/origin/origin.h"
#include "cache/raw_reader.h"
#include "decode/jpeg/decode_pool.h"
#include "decode/tfrecord/tfrecord_compressed.h"
#include "decode/view/view_layout.h"
#include "decode/view/view_options.h"
#include "decode/view/view_stats.h"
#include "util/mutex.h"

namespace stoker {

// How a raw file is seen by a view.
// (The numbers name stored layouts: never renumber.)
enum class RawViewKind { kNone, kTfRecord, kGzipTfRecord, kZlibTfRecord, kJpeg, kTar };

// Recognises a raw file from its first bytes (head, up to 4 KiB) and name
// (a tar archive: named *.tar, its first block a tar header).
// src reads the whole raw file (only compressed TFRecords need more than
// the head to be told apart).
// compression: as ViewOptions::compression (nullopt: by name).
RawViewKind ClassifyRawFile(std::string_view name, std::string_view head, ByteSource& src,
                            std::optional<TfRecordCompression> compression = std::nullopt);

class ViewOrigin final : public Origin, public DerivedSource {
 public:
  // raw: the real origin; reader: the cache its files are read through.
  // prefix: where the view appears in the mount (".decoded"), for messages
  // and the error list. decoder: the view's JpegDecoder (the GPU one for a
  // decoder=gpu view); null = the pool's. Its name() is part of the view's
  // fingerprint.
  ViewOrigin(ViewSpec spec, std::string prefix, std::shared_ptr<Origin> raw, RawReader& reader,
             std::shared_ptr<DecodePool> pool, std::shared_ptr<ViewStats> stats,
             std::shared_ptr<JpegDecoder> decoder = nullptr);
  ~ViewOrigin() override;

  const ViewSpec& spec() const { return spec_; }
  const JpegDecoder& decoder() const { return *decoder_; }
  uint64_t device() const { return dev_; }

  std::string Describe() const override;
  Result<struct stat> Stat(const std::string& path) override;
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override;
  Result<std::string> ReadLink(const std::string& path) override;
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override;
  Result<std::string> GetXattr(const std::string& path, const std::string& name) override;
  Result<std::vector<std::string>> ListXattr(const std::string& path) override;
  bool IsDerived(const std::string& path) const override { return true; }
  uint64_t DerivedDevice(const std::string& path) const override { return dev_; }
  Status CheckRead(const std::string& path, uint64_t off, uint64_t len) override;
  bool HasUnreadableRanges(const std::string& path) override;
  // Raises the decode batches producing path now (its reads' and its
  // layout's, registered by AddBatch) to who's priority (a reader's:
  // kReader; a prefetch's: kReadahead), never down.
  Result<struct stat> StatFor(const std::string& path, Urgency who) override;
  Status ReadDirFor(const std::string& path, Urgency who,
                    const std::function<bool(const OriginDirEntry&)>& fn) override;
  void Expedite(const std::string& path, Urgency who) override;

  // A decode batch that works for path (a view path) until RemoveBatch:
  // what Expedite(path) raises. Registered before the raw bytes it needs
  // are read, so that a raise that comes first is kept for its run.
  void AddBatch(const std::string& path, std::shared_ptr<DecodePool::Batch> batch);
  void RemoveBatch(const std::string& path, const DecodePool::Batch* batch);

  // A record (or, for .npy, the file: record == SIZE_MAX) that laid out but
  // does not decode: its layout entry becomes kFailed, in the index and in
  // memory, so that CheckRead refuses its range from now on (its bytes are
  // zeros in the cache). made_from: the layout the caller produced from;
  // why: the decode error, kept in the layout's error list.
  Status MarkFailed(const std::string& raw_path, const RawReader::Opened& raw, RawViewKind kind,
                    const ViewLayout& made_from, size_t record, const Status& why);

 private:
  struct Resolved;
  struct Known {
    OriginIdentity identity;
    RawViewKind kind = RawViewKind::kNone;
    std::shared_ptr<const ViewLayout> layout;  // null until laid out
  };
  // The raw file behind a view path, opened in the cache and laid out for
  // who (or the raw directory).
  Result<Resolved> Resolve(const std::string& path, Urgency who);
  Result<RawViewKind> KindOf(const std::string& raw_path, const struct stat& raw_st);
  // ReadDir's steps. What each raw entry of dir is in the view (kNone: not
  // in it; an error: left out), recognised on several threads for a big
  // directory; one regular file's (laid out first where lay_out_jpeg, for a
  // JPEG not laid out yet); the entry the view lists for one, if any.
  std::vector<Result<RawViewKind>> ClassifyEntries(const std::string& dir,
                                                   const std::vector<OriginDirEntry>& raw_entries,
                                                   Urgency who);
  Result<RawViewKind> ClassifyFile(const std::string& raw_path, const struct stat& st,
                                   bool lay_out_jpeg, Urgency who);
  std::optional<OriginDirEntry> ListedEntry(const std::string& dir, const OriginDirEntry& e,
                                            const Result<RawViewKind>& kind);
  Result<std::shared_ptr<const ViewLayout>> LayoutOf(const std::string& raw_path,
                                                     const std::string& view_path, RawViewKind kind,
                                                     const RawReader::Opened& raw, Urgency who);
  struct stat ViewStat(const struct stat& raw_st, uint64_t size) const;
  std::string LayoutName(RawViewKind kind) const;
  std::shared_ptr<const ViewLayout> KnownLayout(const std::string& raw_path,
                                                const OriginIdentity& id);
  // The latest layout known for the view file at path, or null.
  std::shared_ptr<const ViewLayout> LatestLayout(const std::string& path);
  void Remember(const std::string& raw_path, Known k);

  const ViewSpec spec_;
  const std::string prefix_;
  const std::shared_ptr<Origin> raw_;
  RawReader& reader_;  // the cache the raw files are read through
  const std::shared_ptr<DecodePool> pool_;
  const std::shared_ptr<ViewStats> stats_;
  const std::shared_ptr<JpegDecoder> decoder_;
  const std::string fingerprint_;
  const uint64_t dev_;

  // What this process knows of raw files, by raw path.
  mutable Mutex known_mu_;
  std::unordered_map<std::string, Known> known_ GUARDED_BY(known_mu_);
  // Held while laying out a file: concurrent stats of it scan once.
  std::array<std::mutex, 64> layout_stripes_;

  // Decode batches at work, by view path, for Expedite.
  Mutex batches_mu_;
  std::unordered_multimap<std::string, std::shared_ptr<DecodePool::Batch>> batches_
      GUARDED_BY(batches_mu_);
};

}  // namespace stoker
