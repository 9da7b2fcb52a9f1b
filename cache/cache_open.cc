// ObjectCache opens: versions of origin files, revalidation with the origin
// (OpenAs and its steps), attributes held for lookups, derived records.
#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <functional>

#include "cache/index_format.h"
#include "cache/object_cache_impl.h"
#include "cache/origin/origin_backoff.h"
#include "util/checksum.h"
#include "util/log.h"
#include "util/mutex.h"

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

ObjectCacheImpl::ObjectEntry ObjectCacheImpl::UncachedEntry(const std::string& path,
                                                            ObjectRecord rec, const Status& why) {
  writer_.WarnNotCaching(why.message());
  return versions_.Uncached(path, std::move(rec));
}

void ObjectCacheImpl::Supersede(const std::shared_ptr<ObjectVersion>& v, const VersionKey& key) {
  if (v) {
    v->superseded = true;
    // Reads already past their check finish their replies first; later ones
    // see superseded. (Readers never wait on an open: no cycle.)
    std::unique_lock<std::shared_mutex> drained(v->serving);
  }
  evictor_.QueueDrop(key);
}

std::shared_lock<std::shared_mutex> ObjectCacheImpl::HoldServe(OpenFileState& file) {
  return std::shared_lock<std::shared_mutex>(file.version->serving);
}

Result<ObjectCache::Opened> ObjectCacheImpl::Open(const std::string& path, bool force) {
  Result<Opened> opened = OpenAs(path, force, Opener::kFs);
  if (opened.ok()) prefetcher_.AfterOpen(path);
  return opened;
}

Result<ObjectCache::Opened> ObjectCacheImpl::OpenForDerived(const std::string& path) {
  return OpenAs(path, false, Opener::kForDerived);
}

bool ObjectCacheImpl::HeldWhole(const ObjectVersion& v) {
  uint64_t held = 0;
  Status s = index_->ForEachPrefix(VersionChunkPrefix(v.key), [&](auto, auto) {
    held++;
    return true;
  });
  return s.ok() && held == v.chunks;
}

bool ObjectCacheImpl::OriginBackingOff(const ObjectVersion& v) {
  OriginBackoff* b = origin_->backoff();
  if (b == nullptr || !b->unreachable()) return false;
  // A file held in part will need the origin for the rest: its open asks,
  // so that it reads the version the origin has now, not a stale one that
  // fails (ESTALE) where it is not cached.
  return HeldWhole(v) && b->AnswerFromHeld();
}

Result<ObjectCache::Opened> ObjectCacheImpl::OpenHeldUnlocked(const std::string& path) {
  std::optional<ObjectEntry> entry = versions_.Find(path);
  if (!entry) {
    auto r = index_->GetObject(path);
    if (r.ok() && r->has_value() && !OtherDerivation(path, **r)) {
      entry = ObjectEntry{**r, versions_.MakeVersion(path, **r), false};
    }
  }
  if (!entry || entry->version->superseded || !HeldWhole(*entry->version)) {
    counters_.errors++;
    return Status::Error(ETIMEDOUT, "open of '" + path +
                                        "': the origin is not answering and the cache does "
                                        "not hold the file whole");
  }
  counters_.revalidations_skipped++;
  Opened o;
  o.keep_cache = false;  // its stripe holder may find it changed
  o.st = entry->version->st;
  const bool derived = derived_->IsDerived(path);
  o.content_tag = ContentTag(*entry->version, derived);
  o.file = std::make_shared<OpenFileState>(
      entry->version, std::make_shared<OriginHandle>(origin_, path),
      std::make_shared<Readahead>(recent_), derived, options_.prefetch_bytes, chunk_size_);
  return o;
}

std::optional<struct stat> ObjectCacheImpl::HeldAttr(const std::string& path, bool origin_failed) {
  // Every lookup comes here: with --revalidate 0 and the origin answering,
  // at no cost.
  OriginBackoff* b = origin_->backoff();
  const bool backing_off = origin_failed || (b != nullptr && b->unreachable());
  if (!backing_off && options_.revalidate_seconds == 0) return std::nullopt;
  // A derived file's Stat opens its source through the cache, which answers
  // the same way: asked only once that Stat has failed.
  if (!origin_failed && derived_->IsDerived(path)) return std::nullopt;
  std::shared_ptr<ObjectVersion> v;
  int64_t validated_ns = 0;
  if (std::optional<ObjectEntry> e = versions_.Find(path)) {
    v = e->version;
    validated_ns = e->rec.validated_ns;
  }
  if (!v) {
    auto r = index_->GetObject(path);
    if (!r.ok() || !r->has_value() || OtherDerivation(path, **r)) return std::nullopt;
    v = versions_.MakeVersion(path, **r);
    validated_ns = (*r)->validated_ns;
  }
  // Asked less than --revalidate ago: the answer stands, as the kernel's
  // own entry would (an Open trusts it the same way).
  if (!origin_failed && ValidatedWithinWindow(validated_ns) && !v->changed_at_origin) {
    counters_.attrs_from_cache++;
    return v->st;
  }
  if (!backing_off) return std::nullopt;
  // Asked only for a held file: a probe that would not be sent is no probe.
  if (!origin_failed && !OriginBackingOff(*v)) return std::nullopt;
  counters_.revalidations_skipped++;
  return v->st;
}

bool ObjectCacheImpl::OtherDerivation(const std::string& path, const ObjectRecord& r) const {
  const uint64_t dev = derived_->DerivedDevice(path);
  // A plain path whose record is a derived file's: a view's path before.
  if (dev == 0) return (r.identity.dev & kDerivedDevBit) != 0;
  return r.identity.dev != dev;
}

bool ObjectCacheImpl::ValidatedWithinWindow(int64_t validated_ns) const {
  const int64_t now = RealtimeNs();
  const int64_t window = static_cast<int64_t>(options_.revalidate_seconds) * 1000000000;
  return window > 0 && now >= validated_ns && now - validated_ns < window;
}

Result<std::optional<std::string>> ObjectCacheImpl::GetDerived(const OpenFileState& file,
                                                               const std::string& name) {
  return index_->GetDerived(file.version->key, name);
}

Status ObjectCacheImpl::PutDerived(const OpenFileState& file, const std::string& name,
                                   const std::string& value) {
  // A record put after the version's drop finished would stay behind it.
  if (file.version->superseded || file.version->uncached) return Status::OK();
  return index_->PutDerived(file.version->key, name, value);
}

Result<ObjectCache::Opened> ObjectCacheImpl::OpenAs(const std::string& path, bool force,
                                                    Opener who) {
  auto& stripes = derived_->IsDerived(path) ? derived_stripes_ : open_stripes_;
  std::unique_lock<TimedMutex> stripe(stripes[std::hash<std::string>()(path) % stripes.size()],
                                      std::defer_lock);
  if (!stripe.try_lock()) {
    OriginBackoff* b = origin_->backoff();
    while (!stripe.try_lock_for(std::chrono::milliseconds(100))) {
      if (b != nullptr && b->unreachable()) return OpenHeldUnlocked(path);
    }
  }
  OpenLookup l;
  l.entry = versions_.Find(path);
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
  Result<ObjectEntry> revalidated = Revalidate(path, l, who, &changed);
  if (!revalidated.ok()) return FailOpen(revalidated.status());
  return FinishOpen(path, who, std::move(revalidated).value(), changed);
}

Status ObjectCacheImpl::FailOpen(const Status& s) {
  counters_.errors++;
  return s;
}

ObjectCache::Opened ObjectCacheImpl::FinishOpen(const std::string& path, Opener who,
                                                ObjectEntry entry, bool changed) {
  Opened o;
  if (changed) entry.change_unannounced = true;
  if (who == Opener::kFs) {
    o.changed = entry.change_unannounced;
    o.keep_cache = !o.changed && entry.seen;
    entry.seen = true;
    entry.change_unannounced = false;
  }
  o.st = entry.version->st;
  const bool derived = derived_->IsDerived(path);
  o.content_tag = ContentTag(*entry.version, derived);
  o.file = std::make_shared<OpenFileState>(
      entry.version, std::make_shared<OriginHandle>(origin_, path),
      std::make_shared<Readahead>(recent_), derived, options_.prefetch_bytes, chunk_size_);
  versions_.Put(path, std::move(entry));
  return o;
}

Status ObjectCacheImpl::LookUpRecord(const std::string& path, OpenLookup* l) {
  if (l->entry) {
    l->known = l->entry->rec;
    return Status::OK();
  }
  auto r = index_->GetObject(path);
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
  (void)index_->DeleteRaw(ObjectKey(path));
  return Status::OK();
}

std::optional<ObjectCacheImpl::ObjectEntry> ObjectCacheImpl::HeldWithoutAsking(
    const std::string& path, const OpenLookup& l) {
  if (!l.known || l.unrecorded || l.other) return std::nullopt;
  // Validated within --revalidate by an earlier process (the index says).
  if (!l.entry && ValidatedWithinWindow(l.known->validated_ns)) {
    return ObjectEntry{*l.known, versions_.MakeVersion(path, *l.known), false};
  }
  if (l.entry && l.entry->version->changed_at_origin) return std::nullopt;
  std::shared_ptr<ObjectVersion> held =
      l.entry ? l.entry->version : versions_.MakeVersion(path, *l.known);
  if (!OriginBackingOff(*held)) return std::nullopt;
  counters_.revalidations_skipped++;
  return l.entry ? *l.entry : ObjectEntry{*l.known, held, false};
}

Urgency ObjectCacheImpl::UrgencyOf(Opener who) {
  switch (who) {
    case Opener::kPrefetch:
      return Urgency::kPrefetch;
    case Opener::kWarm:
      return Urgency::kWarm;
    case Opener::kFs:
    case Opener::kForDerived:
      return Urgency::kReader;
  }
  return Urgency::kReader;
}

Result<ObjectCacheImpl::ObjectEntry> ObjectCacheImpl::Revalidate(const std::string& path,
                                                                 OpenLookup& l, Opener who,
                                                                 bool* changed) {
  const int64_t now = RealtimeNs();
  counters_.revalidations++;
  auto st =
      derived_->IsDerived(path) ? derived_->StatFor(path, UrgencyOf(who)) : origin_->Stat(path);
  if (!st.ok()) {
    int code = st.status().code();
    bool unavailable = IsOriginUnavailable(code);
    if (unavailable) counters_.origin_errors++;
    if (unavailable && l.known && !l.other) {
      LOG_WARN("origin unreachable for '{}' ({}); serving the cached version", path,
               st.status().message());
      return l.entry ? *l.entry
                     : ObjectEntry{*l.known, versions_.MakeVersion(path, *l.known), false};
    }
    if (code == ENOENT && l.known) {
      VersionKey old{l.known->object_id, l.known->version};
      Status s = index_->DeleteObject(path, old);
      if (!s.ok()) LOG_WARN("forgetting deleted '{}': {}", path, s.message());
      Supersede(l.entry ? l.entry->version : nullptr, old);
      versions_.Forget(path);
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
    Status s = index_->UpdateObject(path, rec);
    if (!s.ok()) LOG_WARN("recording revalidation of '{}': {}", path, s.message());
    if (!l.entry) return ObjectEntry{rec, versions_.MakeVersion(path, rec), false};
    l.entry->rec = rec;
    l.entry->version->changed_at_origin = false;
    return *l.entry;
  }
  if (l.known) {
    VersionKey old{l.known->object_id, l.known->version};
    rec.object_id = l.known->object_id;
    rec.version = l.known->version + 1;
    Status s = index_->ReplaceObject(path, rec, old);
    if (!s.ok() && s.code() != ENOSPC) return s;
    counters_.origin_changes++;
    LOG_INFO("origin file '{}' changed; caching version {}", path, rec.version);
    Supersede(l.entry ? l.entry->version : nullptr, old);
    *changed = true;
    return s.ok() ? ObjectEntry{rec, versions_.MakeVersion(path, rec), false}
                  : UncachedEntry(path, rec, s);
  }
  rec.version = 1;
  auto created = index_->CreateObject(path, rec);
  if (created.ok()) return ObjectEntry{*created, versions_.MakeVersion(path, *created), false};
  if (created.status().code() == ENOSPC) return UncachedEntry(path, rec, created.status());
  return created.status();
}

}  // namespace stoker
