#include "cache/file_opener.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>

#include "cache/index_format.h"
#include "cache/origin/origin_backoff.h"
#include "util/checksum.h"
#include "util/duration.h"
#include "util/log.h"
#include "util/path.h"

namespace stoker {
namespace {

// Opened::content_tag: what SameContent judges by in the identity the
// version was first cached with (not a local file's ctime: linking a file
// changes it, and hard links must share their tag; a remote origin's ETag is
// in it); for a derived object also the version itself, as its bytes may be
// remade from an unchanged source.
uint64_t ContentTag(const ObjectVersion& v, bool derived) {
  const OriginIdentity& id = v.identity;
  std::string b = id.etag;
  const bool remote = id.dev == 0;
  for (uint64_t x : {id.size, static_cast<uint64_t>(id.mtime_ns),
                     remote ? static_cast<uint64_t>(id.ctime_ns) : 0, id.ino, id.dev,
                     derived ? v.key.object_id : 0, derived ? v.key.version : 0}) {
    b.append(reinterpret_cast<const char*>(&x), sizeof(x));
  }
  return ChunkChecksum(b.data(), b.size());
}

int64_t RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

ObjectAttrs AttrsOf(const struct stat& st) {
  ObjectAttrs a;
  a.mode = st.st_mode;
  a.uid = st.st_uid;
  a.gid = st.st_gid;
  a.nlink = st.st_nlink;
  a.atime_ns = static_cast<int64_t>(st.st_atim.tv_sec) * 1000000000 + st.st_atim.tv_nsec;
  a.blocks = static_cast<int64_t>(st.st_blocks);
  return a;
}

}  // namespace

FileOpener::FileOpener(const CacheOptions& options, Parts parts)
    : revalidate_seconds_(options.revalidate_seconds),
      prefetch_bytes_(options.prefetch_bytes),
      p_(std::move(parts)) {}

FileOpener::ObjectEntry FileOpener::UncachedEntry(const std::string& path, ObjectRecord rec,
                                                  const Status& why) {
  p_.writer->WarnNotCaching(why.message());
  return p_.versions->Uncached(path, std::move(rec));
}

void FileOpener::Supersede(const std::shared_ptr<ObjectVersion>& v, const VersionKey& key) {
  if (v) {
    v->superseded = true;
    // Reads already past their check finish their replies first; later ones
    // see superseded. (Readers never wait on an open: no cycle.)
    std::unique_lock<std::shared_mutex> drained(v->serving);
  }
  p_.evictor->QueueDrop(key);
}

bool FileOpener::HeldWhole(const ObjectVersion& v) {
  uint64_t held = 0;
  Status s = p_.index->ForEachPrefix(VersionChunkPrefix(v.key), [&](auto, auto) {
    held++;
    return true;
  });
  return s.ok() && held == v.chunks;
}

bool FileOpener::OriginBackingOff(const ObjectVersion& v) {
  OriginBackoff* b = p_.origin->backoff();
  if (b == nullptr || !b->unreachable()) return false;
  // A file held in part will need the origin for the rest: its open asks,
  // so that it reads the version the origin has now, not a stale one that
  // fails (ESTALE) where it is not cached.
  return HeldWhole(v) && b->AnswerFromHeld();
}

Result<FileOpener::Opened> FileOpener::OpenHeldUnlocked(const std::string& path) {
  std::optional<ObjectEntry> entry = p_.versions->Find(path);
  if (!entry) {
    auto r = p_.index->GetObject(path);
    if (r.ok() && r->has_value() && !OtherDerivation(path, **r)) {
      entry = ObjectEntry{**r, p_.versions->MakeVersion(path, **r), false};
    }
  }
  if (!entry || entry->version->superseded || !HeldWhole(*entry->version)) {
    p_.counters->errors++;
    return Status::Error(ETIMEDOUT, "open of '" + path +
                                        "': the origin is not answering and the cache does "
                                        "not hold the file whole");
  }
  p_.counters->revalidations_skipped++;
  Opened o = OpenedOf(path, entry->version, Opener::kFs);
  o.keep_cache = false;  // its stripe holder may find it changed
  return o;
}

FileOpener::Opened FileOpener::OpenedOf(const std::string& path,
                                        const std::shared_ptr<ObjectVersion>& v, Opener who) {
  Opened o;
  o.st = v->st;
  const bool derived = p_.derived->IsDerived(path);
  o.content_tag = ContentTag(*v, derived);
  o.own_data_file = v->chunks > 0 && !p_.writer->UsesSlab(*v);
  o.file = std::make_shared<OpenFileState>(
      v,
      std::make_shared<OriginHandle>(p_.origin, path, v->identity,
                                     who == Opener::kPeer ? Via::kOriginOnly : Via::kAnywhere),
      p_.new_readahead(), derived, prefetch_bytes_, p_.chunk_size);
  return o;
}

std::optional<struct stat> FileOpener::HeldAttr(const std::string& path, bool origin_failed) {
  // Every lookup comes here: with --revalidate 0 and the origin answering,
  // at no cost.
  OriginBackoff* b = p_.origin->backoff();
  const bool backing_off = origin_failed || (b != nullptr && b->unreachable());
  if (!backing_off && revalidate_seconds_ == 0) return std::nullopt;
  // A derived file's Stat opens its source through the cache, which answers
  // the same way: asked only once that Stat has failed.
  if (!origin_failed && p_.derived->IsDerived(path)) return std::nullopt;
  std::shared_ptr<ObjectVersion> v;
  int64_t validated_ns = 0;
  if (std::optional<ObjectEntry> e = p_.versions->Find(path)) {
    v = e->version;
    validated_ns = e->rec.validated_ns;
  }
  if (!v) {
    auto r = p_.index->GetObject(path);
    if (!r.ok() || !r->has_value() || OtherDerivation(path, **r)) return std::nullopt;
    v = p_.versions->MakeVersion(path, **r);
    validated_ns = (*r)->validated_ns;
  }
  // Asked less than --revalidate ago: the answer stands, as the kernel's
  // own entry would (an Open trusts it the same way).
  if (!origin_failed && ValidatedWithinWindow(validated_ns) && !v->changed_at_origin) {
    p_.counters->attrs_from_cache++;
    return v->st;
  }
  if (!backing_off) return std::nullopt;
  // Asked only for a held file: a probe that would not be sent is no probe.
  if (!origin_failed && !OriginBackingOff(*v)) return std::nullopt;
  p_.counters->revalidations_skipped++;
  return v->st;
}

bool FileOpener::OtherDerivation(const std::string& path, const ObjectRecord& r) const {
  const uint64_t dev = p_.derived->DerivedDevice(path);
  // A plain path whose record is a derived file's: a view's path before.
  if (dev == 0) return (r.identity.dev & kDerivedDevBit) != 0;
  return r.identity.dev != dev;
}

Result<uint64_t> FileOpener::Refresh(const std::string& prefix) {
  p_.origin->Refresh(prefix);
  // The files made from those under prefix (a view's) are asked again too:
  // their records would otherwise stand for the sources' old versions.
  std::vector<std::string> prefixes = p_.derived->DerivedPrefixes(prefix);
  prefixes.push_back(prefix);
  std::vector<std::string> paths;
  for (const std::string& under : prefixes) {
    std::vector<std::string> held = p_.versions->PathsUnder(under);
    paths.insert(paths.end(), held.begin(), held.end());
    // Object keys are kObjectPrefix + path: every path under `under` starts
    // with its key (and so do siblings such as "under2": skipped).
    STOKER_RETURN_IF_ERROR(
        p_.index->ForEachPrefix(ObjectKey(under), [&](std::string_view key, std::string_view) {
          Result<std::string> path = DecodeObjectKey(key);
          if (path.ok() && IsAtOrUnder(*path, under)) paths.push_back(std::move(path).value());
          return true;
        }));
  }
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  uint64_t marked = 0;
  for (const std::string& path : paths) {
    auto& stripes = p_.derived->IsDerived(path) ? derived_stripes_ : open_stripes_;
    std::lock_guard<TimedMutex> stripe(stripes[std::hash<std::string>()(path) % stripes.size()]);
    bool was_checked = false;
    if (std::optional<ObjectEntry> e = p_.versions->Find(path); e && e->rec.validated_ns != 0) {
      e->rec.validated_ns = 0;
      p_.versions->Put(path, std::move(*e));
      was_checked = true;
    }
    auto r = p_.index->GetObject(path);
    if (r.ok() && r->has_value() && (*r)->validated_ns != 0) {
      ObjectRecord rec = **r;
      rec.validated_ns = 0;
      STOKER_RETURN_IF_ERROR(p_.index->UpdateObject(path, rec));
      was_checked = true;
    }
    if (was_checked) marked++;
  }
  return marked;
}

bool FileOpener::ValidatedWithinWindow(int64_t validated_ns) const {
  // Marked unchecked (Refresh), or never checked.
  if (validated_ns == 0) return false;
  if (revalidate_seconds_ == kNeverSeconds) return true;
  const int64_t now = RealtimeNs();
  // Past what 64 bits of nanoseconds hold (292 years): as good as never.
  constexpr uint64_t kMaxSeconds = INT64_MAX / 1000000000;
  if (revalidate_seconds_ > kMaxSeconds) return now >= validated_ns;
  const int64_t window = static_cast<int64_t>(revalidate_seconds_) * 1000000000;
  return window > 0 && now >= validated_ns && now - validated_ns < window;
}

Result<FileOpener::Opened> FileOpener::Open(const std::string& path, bool force, Opener who) {
  auto& stripes = p_.derived->IsDerived(path) ? derived_stripes_ : open_stripes_;
  std::unique_lock<TimedMutex> stripe(stripes[std::hash<std::string>()(path) % stripes.size()],
                                      std::defer_lock);
  if (!stripe.try_lock()) {
    OriginBackoff* b = p_.origin->backoff();
    while (!stripe.try_lock_for(std::chrono::milliseconds(100))) {
      if (b != nullptr && b->unreachable()) return OpenHeldUnlocked(path);
    }
  }
  OpenLookup l;
  l.entry = p_.versions->Find(path);
  // Not in the index (its disk was full): the origin is asked again and the
  // version recorded, and cached, as soon as there is room. What the index
  // holds for the path is older (or nothing): it must not stand for it.
  l.unrecorded = l.entry && l.entry->version->uncached;
  if (l.unrecorded) l.entry.reset();
  if (l.entry && !force && ValidatedWithinWindow(l.entry->rec.validated_ns) &&
      !l.entry->version->changed_at_origin) {
    return FinishOpen(path, who, std::move(*l.entry), /*changed=*/false);
  }
  if (Status s = LookUpRecord(path, &l); !s.ok()) return FailOpen(s);
  if (!force) {
    if (std::optional<ObjectEntry> held = HeldWithoutAsking(path, l)) {
      return FinishOpen(path, who, std::move(*held), /*changed=*/false);
    }
  }
  bool changed = false;
  // A read found the file changed: what a wrapper keeps of its attributes
  // (a kept listing) is stale, and must not make the change look undone.
  if (l.entry && l.entry->version->changed_at_origin) p_.origin->Stale(path);
  Result<ObjectEntry> revalidated = Revalidate(path, l, who, &changed);
  if (!revalidated.ok()) return FailOpen(revalidated.status());
  return FinishOpen(path, who, std::move(revalidated).value(), changed);
}

Status FileOpener::FailOpen(const Status& s) {
  p_.counters->errors++;
  return s;
}

FileOpener::Opened FileOpener::FinishOpen(const std::string& path, Opener who, ObjectEntry entry,
                                          bool changed) {
  Opened o = OpenedOf(path, entry.version, who);
  if (changed) entry.change_unannounced = true;
  if (who == Opener::kFs) {
    o.changed = entry.change_unannounced;
    o.keep_cache = !o.changed && entry.seen;
    entry.seen = true;
    entry.change_unannounced = false;
  }
  p_.versions->Put(path, std::move(entry));
  return o;
}

Status FileOpener::LookUpRecord(const std::string& path, OpenLookup* l) {
  if (l->entry) {
    l->known = l->entry->rec;
    return Status::OK();
  }
  auto r = p_.index->GetObject(path);
  if (r.ok()) {
    l->known = *r;
    // The index's record is of another derivation: it is replaced (a new
    // version), never served.
    l->other = l->known && OtherDerivation(path, *l->known);
    return Status::OK();
  }
  if (r.status().code() != EBADMSG) return r.status();
  // Its chunks become unreachable and leave through eviction.
  LOG_WARN("dropping undecodable index record of '{}': {}", path, r.status().message());
  (void)p_.index->DeleteRaw(ObjectKey(path));
  return Status::OK();
}

std::optional<FileOpener::ObjectEntry> FileOpener::HeldWithoutAsking(const std::string& path,
                                                                     const OpenLookup& l) {
  if (!l.known || l.unrecorded || l.other) return std::nullopt;
  // Validated within --revalidate by an earlier process (the index says).
  if (!l.entry && ValidatedWithinWindow(l.known->validated_ns)) {
    return ObjectEntry{*l.known, p_.versions->MakeVersion(path, *l.known), false};
  }
  if (l.entry && l.entry->version->changed_at_origin) return std::nullopt;
  std::shared_ptr<ObjectVersion> held =
      l.entry ? l.entry->version : p_.versions->MakeVersion(path, *l.known);
  if (!OriginBackingOff(*held)) return std::nullopt;
  p_.counters->revalidations_skipped++;
  return l.entry ? *l.entry : ObjectEntry{*l.known, held, false};
}

Urgency FileOpener::UrgencyOf(Opener who) {
  switch (who) {
    case Opener::kPrefetch:
      return Urgency::kPrefetch;
    case Opener::kWarm:
      return Urgency::kWarm;
    case Opener::kFs:
    case Opener::kForDerived:
    case Opener::kPeer:
      return Urgency::kReader;
  }
  return Urgency::kReader;
}

Result<FileOpener::ObjectEntry> FileOpener::Revalidate(const std::string& path, OpenLookup& l,
                                                       Opener who, bool* changed) {
  const int64_t now = RealtimeNs();
  p_.counters->revalidations++;
  auto st = p_.derived->IsDerived(path) ? p_.derived->StatFor(path, UrgencyOf(who))
                                        : p_.origin->Stat(path);
  if (!st.ok()) {
    int code = st.status().code();
    bool unavailable = IsOriginUnavailable(code);
    if (unavailable) p_.counters->origin_errors++;
    if (unavailable && l.known && !l.other) {
      LOG_WARN("origin unreachable for '{}' ({}); serving the cached version", path,
               st.status().message());
      return l.entry ? *l.entry
                     : ObjectEntry{*l.known, p_.versions->MakeVersion(path, *l.known), false};
    }
    if (code == ENOENT && l.known) {
      VersionKey old{l.known->object_id, l.known->version};
      Status s = p_.index->DeleteObject(path, old);
      if (!s.ok()) LOG_WARN("forgetting deleted '{}': {}", path, s.message());
      Supersede(l.entry ? l.entry->version : nullptr, old);
      p_.versions->Forget(path);
    }
    return st.status();
  }
  if (!S_ISREG(st->st_mode)) {
    int code = S_ISDIR(st->st_mode) ? EISDIR : (S_ISLNK(st->st_mode) ? ELOOP : EINVAL);
    return Status::Error(code, "origin '" + path + "' is not a regular file");
  }

  OriginIdentity id = IdentityFromStat(*st);
  ObjectRecord rec;
  rec.identity = id;
  rec.attrs = AttrsOf(*st);
  rec.validated_ns = now;
  // Against where this process last saw the version, if it did (it may
  // have moved since the record was written).
  const bool same =
      l.entry ? l.entry->version->AtOrigin(id) : (l.known && SameContent(l.known->identity, id));
  if (same) {
    rec.object_id = l.known->object_id;
    rec.version = l.known->version;
    Status s = p_.index->UpdateObject(path, rec);
    if (!s.ok()) LOG_WARN("recording revalidation of '{}': {}", path, s.message());
    if (!l.entry) return ObjectEntry{rec, p_.versions->MakeVersion(path, rec), false};
    l.entry->rec = rec;
    l.entry->version->changed_at_origin = false;
    return *l.entry;
  }
  if (l.known) {
    VersionKey old{l.known->object_id, l.known->version};
    rec.object_id = l.known->object_id;
    rec.version = l.known->version + 1;
    Status s = p_.index->ReplaceObject(path, rec, old);
    if (!s.ok() && s.code() != ENOSPC) return s;
    p_.counters->origin_changes++;
    LOG_INFO("origin file '{}' changed; caching version {}", path, rec.version);
    Supersede(l.entry ? l.entry->version : nullptr, old);
    *changed = true;
    return s.ok() ? ObjectEntry{rec, p_.versions->MakeVersion(path, rec), false}
                  : UncachedEntry(path, rec, s);
  }
  rec.version = 1;
  auto created = p_.index->CreateObject(path, rec);
  if (created.ok()) return ObjectEntry{*created, p_.versions->MakeVersion(path, *created), false};
  if (created.status().code() == ENOSPC) return UncachedEntry(path, rec, created.status());
  return created.status();
}

}  // namespace stoker
