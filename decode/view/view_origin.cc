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
#include "decode/tfrecord/tfrecord.h"
#include "decode/view/cached_byte_source.h"
#include "decode/view/view_file.h"
#include "decode/view/view_producer.h"
#include "util/log.h"
#include "util/path.h"

namespace stoker {
namespace {

// Raw files remembered; past this the memory starts over (a re-stat then
// re-reads a head, or a layout from the index).
constexpr size_t kMaxKnown = size_t{1} << 17;
// Threads that recognise the files of one big directory listing.
constexpr size_t kReadDirThreads = 8;

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Whether the view file of a raw file of this kind has the raw file's name
// (a JPEG's adds kNpySuffix).
bool KeepsItsName(RawViewKind k) {
  return k == RawViewKind::kTfRecord || k == RawViewKind::kGzipTfRecord ||
         k == RawViewKind::kZlibTfRecord || k == RawViewKind::kTar;
}

}  // namespace

struct ViewOrigin::Resolved {
  bool is_dir = false;
  std::string raw_path;
  RawViewKind kind = RawViewKind::kNone;
  std::optional<RawReader::Opened> raw;
  std::shared_ptr<const ViewLayout> layout;
  struct stat st {};
};

ViewOrigin::ViewOrigin(ViewSpec spec, std::string prefix, std::shared_ptr<Origin> raw,
                       RawReader& reader, std::shared_ptr<DecodePool> pool,
                       std::shared_ptr<ViewStats> stats, std::shared_ptr<JpegDecoder> decoder)
    : spec_(std::move(spec)),
      prefix_(std::move(prefix)),
      raw_(std::move(raw)),
      reader_(reader),
      pool_(std::move(pool)),
      stats_(std::move(stats)),
      // Without a decoder of its own, the pool's (aliased: it lives as long as the pool).
      decoder_(decoder ? std::move(decoder)
                       : std::shared_ptr<JpegDecoder>(pool_, &pool_->decoder())),
      fingerprint_(spec_.options.Fingerprint(decoder_->name())),
      dev_(Fnv1a(spec_.name + "\n" + fingerprint_) | kDerivedDevBit) {}

ViewOrigin::~ViewOrigin() = default;

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

Result<ViewOrigin::Resolved> ViewOrigin::Resolve(const std::string& path, Urgency who) {
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
    if (KeepsItsName(kind)) {
      r.raw_path = path;
      r.kind = kind;
    }
  }
  if (r.kind == RawViewKind::kNone) {
    return Status::NotFound("'" + prefix_ + "/" + path + "' is not in the view");
  }
  STOKER_ASSIGN_OR_RETURN(RawReader::Opened raw, reader_.OpenForDerived(r.raw_path));
  STOKER_ASSIGN_OR_RETURN(r.layout, LayoutOf(r.raw_path, path, r.kind, raw, who));
  r.st = ViewStat(raw.st, r.layout->size);
  r.raw = std::move(raw);
  return r;
}

Result<struct stat> ViewOrigin::Stat(const std::string& path) {
  return StatFor(path, Urgency::kReader);
}

Result<struct stat> ViewOrigin::StatFor(const std::string& path, Urgency who) {
  STOKER_ASSIGN_OR_RETURN(Resolved r, Resolve(path, who));
  return r.st;
}

Status ViewOrigin::ReadDir(const std::string& path,
                           const std::function<bool(const OriginDirEntry&)>& fn) {
  return ReadDirFor(path, Urgency::kReader, fn);
}

Status ViewOrigin::ReadDirFor(const std::string& path, Urgency who,
                              const std::function<bool(const OriginDirEntry&)>& fn) {
  std::vector<OriginDirEntry> raw_entries;
  STOKER_RETURN_IF_ERROR(raw_->ReadDir(path, [&](const OriginDirEntry& e) {
    if (S_ISDIR(e.st.st_mode) || S_ISREG(e.st.st_mode)) raw_entries.push_back(e);
    return true;
  }));
  const std::vector<Result<RawViewKind>> kinds = ClassifyEntries(path, raw_entries, who);
  std::set<std::string> names;
  for (size_t i = 0; i < raw_entries.size(); ++i) {
    std::optional<OriginDirEntry> out = ListedEntry(path, raw_entries[i], kinds[i]);
    if (!out || !names.insert(out->name).second) continue;
    if (!fn(*out)) break;
  }
  return Status::OK();
}

std::vector<Result<RawViewKind>> ViewOrigin::ClassifyEntries(
    const std::string& dir, const std::vector<OriginDirEntry>& raw_entries, Urgency who) {
  // Recognising a file not seen before reads its head at the origin: over a
  // NAS that is a round trip per file, so a big directory does it in parallel.
  // Under skip a JPEG is listed only once laid out: the head does not tell
  // whether its scan decodes, and a listed name must stat.
  const bool lay_out_jpegs = spec_.options.on_error == OnError::kSkip;
  std::vector<Result<RawViewKind>> kinds(raw_entries.size(), RawViewKind::kNone);
  std::atomic<size_t> next{0};
  auto classify = [&] {
    for (size_t i; (i = next.fetch_add(1)) < raw_entries.size();) {
      if (!S_ISREG(raw_entries[i].st.st_mode)) continue;
      kinds[i] =
          ClassifyFile(JoinPath(dir, raw_entries[i].name), raw_entries[i].st, lay_out_jpegs, who);
    }
  };
  std::vector<std::thread> helpers;
  const size_t want = std::min<size_t>(kReadDirThreads - 1, raw_entries.size() / 64);
  // Helpers lay out for whom the caller lists (a warm walk's: kWarm).
  for (size_t t = 0; t < want; ++t) {
    try {
      helpers.emplace_back(classify);
    } catch (const std::system_error&) {
      break;  // no thread to be had: this one does it all
    }
  }
  classify();
  for (std::thread& t : helpers) t.join();
  return kinds;
}

Result<RawViewKind> ViewOrigin::ClassifyFile(const std::string& raw_path, const struct stat& st,
                                             bool lay_out_jpeg, Urgency who) {
  Result<RawViewKind> kind = KindOf(raw_path, st);
  if (!lay_out_jpeg || !kind.ok() || *kind != RawViewKind::kJpeg ||
      KnownLayout(raw_path, IdentityFromStat(st)) != nullptr) {
    return kind;
  }
  const std::string view_path = raw_path + std::string(kNpySuffix);
  Result<RawReader::Opened> raw = reader_.OpenForDerived(raw_path);
  Status s = raw.ok() ? LayoutOf(raw_path, view_path, RawViewKind::kJpeg, *raw, who).status()
                      : raw.status();
  if (s.ok()) return kind;
  if (s.code() == ENOENT) return s;  // does not decode (skipped), or gone
  // The origin failed us, not the file: listed without its size, as
  // under fail; a stat of it asks again.
  LOG_DEBUG("view {}: laying out '{}' for a listing: {}", spec_.name, raw_path, s.message());
  return kind;
}

std::optional<OriginDirEntry> ViewOrigin::ListedEntry(const std::string& dir,
                                                      const OriginDirEntry& e,
                                                      const Result<RawViewKind>& kind) {
  OriginDirEntry out;
  if (S_ISDIR(e.st.st_mode)) {
    out.name = e.name;
    out.st = ViewStat(e.st, 0);
    return out;
  }
  const std::string raw_path = JoinPath(dir, e.name);
  if (!kind.ok()) {
    LOG_DEBUG("view {}: leaving '{}' out of a listing: {}", spec_.name, raw_path,
              kind.status().message());
    return std::nullopt;
  }
  if (*kind == RawViewKind::kNone) return std::nullopt;
  out.name = *kind == RawViewKind::kJpeg ? e.name + std::string(kNpySuffix) : e.name;
  auto layout = KnownLayout(raw_path, IdentityFromStat(e.st));
  out.st = ViewStat(e.st, layout ? layout->size : 0);
  out.attrs_complete = layout != nullptr;
  return out;
}

Status ViewOrigin::MarkFailed(const std::string& raw_path, const RawReader::Opened& raw,
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
  STOKER_RETURN_IF_ERROR(reader_.PutDerived(*raw.file, LayoutName(kind), EncodeViewLayout(l)));
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
  if (it != known_.end() && KeepsItsName(it->second.kind)) return it->second.layout;
  return nullptr;
}

Status ViewOrigin::CheckRead(const std::string& path, uint64_t off, uint64_t len) {
  std::shared_ptr<const ViewLayout> layout = LatestLayout(path);
  if (!layout) {
    STOKER_ASSIGN_OR_RETURN(Resolved r, Resolve(path, Urgency::kReader));
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
    Result<Resolved> r = Resolve(path, Urgency::kReader);
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

void ViewOrigin::Expedite(const std::string& path, Urgency who) {
  std::vector<std::shared_ptr<DecodePool::Batch>> raise;
  {
    MutexLock l(batches_mu_);
    auto [a, b] = batches_.equal_range(path);
    for (auto it = a; it != b; ++it) raise.push_back(it->second);
  }
  const DecodePriority to = DecodePriorityFor(who);
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
  STOKER_ASSIGN_OR_RETURN(Resolved r, Resolve(path, Urgency::kReader));
  if (r.is_dir) return Status::Error(EISDIR, "'" + prefix_ + "/" + path + "' is a directory");
  ViewFileParts p;
  p.reader = &reader_;
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
  return OpenViewFile(std::move(p));
}

Result<std::string> ViewOrigin::GetXattr(const std::string& path, const std::string& name) {
  return Status::Error(ENODATA, "view files have no extended attributes");
}

Result<std::vector<std::string>> ViewOrigin::ListXattr(const std::string& path) {
  return std::vector<std::string>{};
}

}  // namespace stoker
