// PeerOrigin: the origin as a member of a cache group sees it (--peers). An
// open of a version (Origin::OpenVersion with Via::kAnywhere, what the cache
// does for its readers) reads each extent of that version from the extent's
// owner (group/rendezvous.h, among the members answering now), which serves
// it from its SSD tier or fetches it from the origin once
// (group/peer_server.h); the extents this member owns, and whatever no
// member gives, come from the origin. Everything else (Stat, listings, Open,
// opens with Via::kOriginOnly) goes to the origin as before.
//
// A member that does not answer within the timeouts, refuses (401, 404,
// a malformed answer), or sends bytes whose checksums are wrong is
// skipped for Options::backoff (Membership::Skip) and the read goes to the
// origin: a reader never sees an error, nor waits longer than the stall
// timeout, because of a member. A member that holds another version (409)
// is not skipped; that read goes to the origin, whose identity check (the
// cache's, after every read) tells which version is right. A member at its
// bounds (a 503, or a connection it closed unanswered) is asked again after
// short pauses, then the read goes to the origin, and it is not skipped
// either. Wrong bytes
// are never returned (counted, and logged with the member's name).
//
// Hops: a member serving another reads from the origin only (Via::
// kOriginOnly), and never waits on a fetch of its own readers that may ask
// a member (AsksMembers, cache/fetcher.h): it reads beside it.
// So a request waits on origin reads alone, never on a loop of members.
// (A member that joins or leaves between a fetch's check and its read may
// still close one, until the stall timeout ends it.)
//
// Thread-safety: thread-safe; the membership and the token are.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "cache/origin/origin.h"
#include "group/peer_protocol.h"
#include "group/peer_token.h"
#include "group/peers.h"
#include "group/rendezvous.h"
#include "util/mutex.h"

namespace stoker {

class HttpClient;

class PeerOrigin final : public ForwardingOrigin {
 public:
  struct Options {
    std::string group;  // named in every request; a member of another group refuses
    // How long a failing member is left out. Default: 30 s.
    std::chrono::seconds backoff{30};
    // A member's connect, and a transfer that moves no byte. Default: 2 s, 30 s.
    long connect_timeout_s = 2;
    long stall_timeout_s = 30;
  };
  // A member that answers 503 (at its bound on reads in flight) is asked
  // again after kBusyFirstPause, then after twice that, up to
  // kBusyLastPause (2.55 s in all), and not skipped.
  static constexpr std::chrono::milliseconds kBusyFirstPause{10};
  static constexpr std::chrono::milliseconds kBusyLastPause{1280};
  // An asker keeps at most this many requests in flight to one member; more
  // wait for a slot (at most the stall timeout, then the origin). An owner's
  // bounds, on reads in flight (8) and on connections from one address
  // (16), are shared by every asker, and a request it turns away costs a
  // retry or an origin read.
  static constexpr int kMaxInFlightPerMember = 2;
  struct Counters {
    std::atomic<uint64_t> reads{0};  // extent reads answered by a member
    std::atomic<uint64_t> bytes{0};  // their bytes
    // Reads that went to the origin instead, by why.
    std::atomic<uint64_t> fallback_unreachable{0};  // no answer, a stall, a transport error
    std::atomic<uint64_t> fallback_refused{0};      // 401, 404, 416, a malformed answer
    // 503 or a dropped connection still after kBusyLastPause, or no slot
    // (kMaxInFlightPerMember) within the stall timeout.
    std::atomic<uint64_t> fallback_busy{0};
    std::atomic<uint64_t> fallback_version{0};   // 409
    std::atomic<uint64_t> fallback_checksum{0};  // wrong bytes
  };

  // members and token outlive this origin.
  PeerOrigin(std::shared_ptr<Origin> inner, Membership* members, PeerToken* token, Options options);
  ~PeerOrigin() override;

  Result<std::unique_ptr<OriginFile>> OpenVersion(const std::string& path,
                                                  const OriginIdentity& version, Via via) override;

  // Whether an extent of [off, off + len) has another owner now.
  bool AsksMembers(const std::string& path, const OriginIdentity& version, uint64_t off,
                   uint64_t len) override;

  // The owner of key among the members answering now.
  std::string OwnerNow(const ExtentKey& key) const;

  const Counters& counters() const { return counters_; }
  Membership& members() { return *members_; }

 private:
  friend class PeerFile;
  // Reads r's range from member into buf (r.length bytes, or to the end of
  // the version): OK only with bytes whose checksums match. A failure is
  // counted and the member skipped where the kind of failure says so.
  Status ReadFromMember(const std::string& member, const ExtentRequest& r, char* buf);

  Membership* const members_;
  PeerToken* const token_;
  const Options options_;
  std::shared_ptr<HttpClient> client_;
  Counters counters_;
  Mutex slots_mu_;
  CondVar slots_cv_;
  std::map<std::string, int> in_flight_ GUARDED_BY(slots_mu_);  // member -> requests
};

}  // namespace stoker
