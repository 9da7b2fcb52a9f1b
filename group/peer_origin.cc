#include "group/peer_origin.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "cache/origin/remote/http_client.h"
#include "group/rendezvous.h"
#include "util/log.h"
#include "util/mutex.h"

namespace stoker {

// One open of one version: extents from their owners, the rest from the
// origin (opened on first need).
class PeerFile final : public OriginFile {
 public:
  PeerFile(PeerOrigin* group, std::shared_ptr<Origin> inner, std::string path,
           OriginIdentity version)
      : group_(group),
        inner_(std::move(inner)),
        path_(std::move(path)),
        version_(std::move(version)),
        tag_(VersionTag(version_)) {}

  Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
    return Read(static_cast<char*>(buf), len, off, std::nullopt);
  }
  Result<size_t> ReadAtAligned(void* buf, size_t len, uint64_t off, Urgency who) override {
    return Read(static_cast<char*>(buf), len, off, who);
  }
  // What the origin has, once it was read from; until then the version the
  // members vouched for (they serve only a version with this tag and size).
  Result<OriginIdentity> Identity() override {
    std::shared_ptr<OriginFile> f;
    {
      MutexLock l(mu_);
      f = file_;
    }
    if (f) return f->Identity();
    return version_;
  }

 private:
  Result<size_t> Read(char* buf, size_t len, uint64_t off, std::optional<Urgency> aligned_for) {
    const uint64_t size = version_.size;
    if (off >= size) return ReadInner(buf, len, off, aligned_for);  // the origin says what is there
    size_t done = 0;
    while (done < len) {
      const uint64_t at = off + done;
      if (at >= size) break;
      const uint64_t extent_end = (ExtentIndexOf(at) + 1) * kExtentBytes;
      const size_t n = static_cast<size_t>(
          std::min<uint64_t>({len - done, extent_end - at, kMaxRequestBytes, size - at}));
      const std::string owner = group_->OwnerNow(ExtentKey{path_, size, tag_, ExtentIndexOf(at)});
      bool got = false;
      if (owner != group_->members().self()) {
        ExtentRequest r{group_->options_.group, path_, size, tag_, at, n};
        got = group_->ReadFromMember(owner, r, buf + done).ok();
      }
      if (!got) {
        STOKER_ASSIGN_OR_RETURN(size_t m, ReadInner(buf + done, n, at, aligned_for));
        if (m < n) return done + m;  // the origin's file is shorter: it changed
      }
      done += n;
    }
    return done;
  }

  Result<size_t> ReadInner(char* buf, size_t len, uint64_t off, std::optional<Urgency> who) {
    std::shared_ptr<OriginFile> f;
    {
      MutexLock l(mu_);
      if (!file_) {
        STOKER_ASSIGN_OR_RETURN(std::unique_ptr<OriginFile> opened,
                                inner_->OpenVersion(path_, version_, Via::kOriginOnly));
        file_ = std::move(opened);
      }
      f = file_;
    }
    return who ? f->ReadAtAligned(buf, len, off, *who) : f->ReadAt(buf, len, off);
  }

  PeerOrigin* const group_;
  const std::shared_ptr<Origin> inner_;
  const std::string path_;
  const OriginIdentity version_;
  const std::string tag_;
  Mutex mu_;
  std::shared_ptr<OriginFile> file_ GUARDED_BY(mu_);
};

PeerOrigin::PeerOrigin(std::shared_ptr<Origin> inner, Membership* members, PeerToken* token,
                       Options options)
    : ForwardingOrigin(std::move(inner)),
      members_(members),
      token_(token),
      options_(std::move(options)) {
  HttpClient::Options o;
  o.connect_timeout_s = options_.connect_timeout_s;
  o.stall_timeout_s = options_.stall_timeout_s;
  o.retry.max_retries = 0;  // a member that fails is skipped, not asked again
  o.backoff_s = 0;
  client_ = std::make_shared<HttpClient>(o);
}

PeerOrigin::~PeerOrigin() = default;

Result<std::unique_ptr<OriginFile>> PeerOrigin::OpenVersion(const std::string& path,
                                                            const OriginIdentity& version,
                                                            Via via) {
  if (via == Via::kOriginOnly || members_->All().size() < 2) {
    return inner_->OpenVersion(path, version, via);
  }
  return std::unique_ptr<OriginFile>(std::make_unique<PeerFile>(this, inner_, path, version));
}

bool PeerOrigin::AsksMembers(const std::string& path, const OriginIdentity& version, uint64_t off,
                             uint64_t len) {
  const uint64_t end = std::min<uint64_t>(version.size, off + len);
  if (off >= end || members_->All().size() < 2) return false;
  const std::string tag = VersionTag(version);
  for (uint64_t e = ExtentIndexOf(off); e <= ExtentIndexOf(end - 1); ++e) {
    if (OwnerNow(ExtentKey{path, version.size, tag, e}) != members_->self()) return true;
  }
  return false;
}

std::string PeerOrigin::OwnerNow(const ExtentKey& key) const {
  const std::vector<std::string> live = members_->Live();
  return live[OwnerOf(key, live)];
}

Status PeerOrigin::ReadFromMember(const std::string& member, const ExtentRequest& r, char* buf) {
  {
    MutexLock l(slots_mu_);
    if (!slots_cv_.WaitFor(
            slots_mu_, std::chrono::seconds(options_.stall_timeout_s), [&]() REQUIRES(slots_mu_) {
              auto it = in_flight_.find(member);  // no entry left behind by a wait that times out
              return it == in_flight_.end() || it->second < kMaxInFlightPerMember;
            })) {
      counters_.fallback_busy++;
      return Status::Error(EBUSY, "no slot for member " + member);
    }
    in_flight_[member]++;
  }
  struct Slot {
    PeerOrigin* self;
    const std::string& member;
    ~Slot() {
      MutexLock l(self->slots_mu_);
      if (--self->in_flight_[member] == 0) self->in_flight_.erase(member);
      self->slots_cv_.notify_all();
    }
  } slot{this, member};
  HttpRequest req;
  req.url = "http://" + member + ExtentTarget(r);
  req.headers.push_back("Authorization: Bearer " + token_->Current());
  req.range = std::make_pair(r.offset, r.length);
  req.max_retries = 0;
  req.sink = buf;
  req.sink_len = r.length;
  // A member at its bounds, on reads in flight (a 503) or on connections (a
  // connection it closed unanswered: libmicrohttpd's reset or empty reply),
  // is asked again after pauses, then this read goes to the origin: busy is
  // no fault, and leaving the member out for the back-off would send its
  // whole share to the origin meanwhile. A member that is gone refuses the
  // next connection, and a slow one times out: those are skipped.
  auto busy = [](const Result<HttpResponse>& r) {
    if (r.ok()) return r->status == 503;
    return r.status().code() == EIO &&
           r.status().message().find("timed out") == std::string::npos;  // HttpClient's words
  };
  Result<HttpResponse> resp = client_->Perform(req);
  for (auto pause = kBusyFirstPause; busy(resp) && pause <= kBusyLastPause; pause *= 2) {
    std::this_thread::sleep_for(pause);
    resp = client_->Perform(req);
  }
  if (busy(resp)) {
    counters_.fallback_busy++;
    return Status::Error(EBUSY, "member " + member + " is busy");
  }
  auto skip = [&](std::atomic<uint64_t>& counter, const std::string& why) {
    counter++;
    members_->Skip(member, options_.backoff);
    LOG_WARN("cache group member {} skipped for {} s: {}; reading '{}' from the origin", member,
             options_.backoff.count(), why, r.path);
    return Status::IOError(why);
  };
  if (!resp.ok()) return skip(counters_.fallback_unreachable, resp.status().message());
  if (resp->status == 409) {
    counters_.fallback_version++;
    return Status::Error(ESTALE, "member " + member + " holds another version of '" + r.path + "'");
  }
  if (resp->status != 206) {
    return skip(counters_.fallback_refused, "it answered " + std::to_string(resp->status));
  }
  if (resp->sunk != r.length) {
    return skip(counters_.fallback_refused, "it sent " + std::to_string(resp->sunk) + " of " +
                                                std::to_string(r.length) + " bytes");
  }
  if (!ChecksumsMatch(resp->Header("x-stoker-checksums"), buf, r.length)) {
    return skip(counters_.fallback_checksum, "its bytes do not match their checksums");
  }
  counters_.reads++;
  counters_.bytes += r.length;
  return Status::OK();
}

}  // namespace stoker
