// A cache group on one machine: members with their own caches over one
// origin, each serving the others on a loopback port. What the origin is
// read for is counted.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "cache/object_cache.h"
#include "group/peer_origin.h"
#include "group/peer_protocol.h"
#include "group/peer_server.h"
#include "group/rendezvous.h"
#include "util/test_files.h"

namespace stoker {
namespace {

using testing::Pattern;
using testing::ScratchDir;
using testing::WriteFile;

// Counts the bytes read from the origin's files.
class CountingOrigin final : public ForwardingOrigin {
 public:
  explicit CountingOrigin(std::shared_ptr<Origin> inner) : ForwardingOrigin(std::move(inner)) {}
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override {
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<OriginFile> f, inner_->Open(path));
    return std::unique_ptr<OriginFile>(std::make_unique<File>(std::move(f), &bytes));
  }
  Result<std::unique_ptr<OriginFile>> OpenVersion(const std::string& path, const OriginIdentity&,
                                                  Via) override {
    return Open(path);
  }
  std::atomic<uint64_t> bytes{0};

 private:
  class File final : public OriginFile {
   public:
    File(std::unique_ptr<OriginFile> f, std::atomic<uint64_t>* n) : f_(std::move(f)), n_(n) {}
    Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
      Result<size_t> r = f_->ReadAt(buf, len, off);
      if (r.ok()) *n_ += *r;
      return r;
    }
    Result<OriginIdentity> Identity() override { return f_->Identity(); }

   private:
    std::unique_ptr<OriginFile> f_;
    std::atomic<uint64_t>* n_;
  };
};

// Where a and b first differ, for a message that does not print them.
std::string Diff(const std::string& a, const std::string& b) {
  if (a == b) return "";
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
         ", first difference at " + std::to_string(i);
}

uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::string ReadAll(ObjectCache& cache, const std::string& path, bool revalidate = false) {
  auto opened = cache.Open(path, revalidate);
  EXPECT_TRUE(opened.ok()) << path << ": " << opened.status().message();
  if (!opened.ok()) return "";
  std::string out;
  const uint64_t size = static_cast<uint64_t>(opened->st.st_size);
  for (uint64_t off = 0; off < size;) {
    ReadReply reply;
    Status s = cache.Read(*opened->file, off, 4 << 20, &reply);
    EXPECT_TRUE(s.ok()) << path << ": " << s.message();
    if (!s.ok() || reply.size() == 0) break;
    for (const ReadSegment& seg : reply.segments()) {
      std::string part(seg.len, '\0');
      if (seg.mem != nullptr) {
        part.assign(seg.mem, seg.len);
      } else {
        EXPECT_EQ(pread(seg.fd, part.data(), seg.len, seg.off), static_cast<ssize_t>(seg.len));
      }
      out += part;
    }
    off += reply.size();
  }
  return out;
}

class PeerGroupTest : public ::testing::Test {
 protected:
  struct Member {
    std::string name;
    std::unique_ptr<Membership> members;
    std::unique_ptr<PeerToken> token;
    std::shared_ptr<PeerOrigin> origin;
    std::unique_ptr<ObjectCache> cache;
    std::unique_ptr<PeerServer> server;
  };

  void SetUp() override {
    // Small files (one extent each) and one of three extents.
    for (int i = 0; i < 24; ++i) {
      files_["small/f" + std::to_string(i)] = Pattern(100000 + i * 977, i + 1);
    }
    files_["big"] = Pattern(2 * kExtentBytes + 12345, 99);
    for (const auto& [path, data] : files_) WriteFile(origin_dir_.Sub(path), data);
    WriteFile(tokens_.Sub("token"), "the-group-token-0123456789\n");
    WriteFile(tokens_.Sub("wrong"), "not-the-group-token-0123456789\n");
    counting_ = std::make_shared<CountingOrigin>(MakeOrigin(origin_dir_.path()).value());
  }

  // n members, each with its own cache, all knowing each other.
  std::vector<Member> Group(int n, const std::string& token_file = "token",
                            bool first_flips_bytes = false, unsigned first_max_requests = 8) {
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) names.push_back("127.0.0.1:" + std::to_string(FreePort()));
    std::string list;
    for (const std::string& m : names) list += (list.empty() ? "" : ",") + m;
    std::vector<Member> group(n);
    for (int i = 0; i < n; ++i) {
      Member& m = group[i];
      m.name = names[i];
      m.members = std::make_unique<Membership>(ParsePeers(list).value(), m.name);
      m.token = PeerToken::Open(tokens_.Sub(i == 0 ? "token" : token_file)).value();
      PeerOrigin::Options po;
      po.group = "g";
      po.backoff = std::chrono::seconds(60);
      po.stall_timeout_s = stall_timeout_s_;
      m.origin = std::make_shared<PeerOrigin>(counting_, m.members.get(), m.token.get(), po);
      CacheOptions o;
      o.dir = caches_.Sub("m" + std::to_string(i));
      o.capacity_bytes = 1ull << 30;
      o.dir_prefetch_files = 0;
      m.cache = ObjectCache::Open(o, m.origin).value();
      PeerServer::Options so;
      so.listen = ParseHostPort(m.name).value();
      so.group = "g";
      so.flip_a_byte_for_tests = first_flips_bytes && i == 0;
      if (i == 0) so.max_requests = first_max_requests;
      m.server = PeerServer::Start(so, m.cache.get(), m.token.get()).value();
    }
    return group;
  }

  uint64_t DatasetBytes() const {
    uint64_t n = 0;
    for (const auto& [path, data] : files_) n += data.size();
    return n;
  }

  std::map<std::string, std::string> files_;
  long stall_timeout_s_ = 30;
  ScratchDir origin_dir_{"group-origin"};
  ScratchDir caches_{"group-caches"};
  ScratchDir tokens_{"group-tokens"};
  std::shared_ptr<CountingOrigin> counting_;
};

TEST_F(PeerGroupTest, MembersReadingEverythingAtOnceReadTheOriginOnce) {
  std::vector<Member> group = Group(3);
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (Member& m : group) {
    readers.emplace_back([&, cache = m.cache.get()] {
      for (const auto& [path, data] : files_) {
        if (ReadAll(*cache, path) != data) wrong++;
      }
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // Each extent once, by its owner; a few chunks twice where a member raced
  // its owner's first read of an extent it also read itself is not allowed:
  // only owners read the origin.
  EXPECT_LE(counting_->bytes.load(), DatasetBytes() * 105 / 100);
  EXPECT_GE(counting_->bytes.load(), DatasetBytes());
  uint64_t from_peers = 0, served = 0;
  for (Member& m : group) {
    from_peers += m.origin->counters().bytes.load();
    served += m.server->counters().bytes.load();
    EXPECT_EQ(m.origin->counters().fallback_checksum.load(), 0u);
    EXPECT_EQ(m.origin->counters().fallback_unreachable.load(), 0u);
  }
  EXPECT_GT(from_peers, DatasetBytes()) << "each member read others' extents from them";
  EXPECT_EQ(from_peers, served);
}

TEST_F(PeerGroupTest, AMemberThatIsGoneIsSkippedAndTheOriginServes) {
  std::vector<Member> group = Group(3);
  group[2].server.reset();  // its port refuses connections
  for (const auto& [path, data] : files_)
    ASSERT_EQ(Diff(ReadAll(*group[0].cache, path), data), "") << path;
  EXPECT_GE(group[0].origin->counters().fallback_unreachable.load(), 1u);
  EXPECT_EQ(group[0].members->skipped(), 1u);
  EXPECT_EQ(group[0].origin->counters().fallback_unreachable.load(), 1u)
      << "asked again while skipped";
}

TEST_F(PeerGroupTest, AWrongTokenIsRefusedAndTheOriginServes) {
  std::vector<Member> group = Group(2, "wrong");  // member 1 presents another token
  for (const auto& [path, data] : files_)
    ASSERT_EQ(Diff(ReadAll(*group[1].cache, path), data), "") << path;
  EXPECT_GE(group[0].server->counters().unauthorized.load(), 1u);
  EXPECT_EQ(group[0].server->counters().bytes.load(), 0u);
  EXPECT_GE(group[1].origin->counters().fallback_refused.load(), 1u);
}

TEST_F(PeerGroupTest, BytesThatDoNotMatchTheirChecksumsAreNeverServed) {
  std::vector<Member> group = Group(2, "token", /*first_flips_bytes=*/true);
  for (const auto& [path, data] : files_) {
    ASSERT_EQ(Diff(ReadAll(*group[1].cache, path), data), "") << path;
  }
  EXPECT_GE(group[1].origin->counters().fallback_checksum.load(), 1u);
  EXPECT_EQ(group[1].origin->counters().bytes.load(), 0u);
  EXPECT_EQ(group[1].members->skipped(), 1u);
}

// A member at its bound on reads in flight answers 503: the asker asks again
// after short pauses, then reads the origin, and keeps asking that member
// (busy is no fault: skipping it would send its whole share to the origin).
TEST_F(PeerGroupTest, ABusyMemberIsAskedAgainAndNeverSkipped) {
  std::vector<Member> group = Group(2, "token", false, /*first_max_requests=*/0);
  const auto& c = group[1].origin->counters();
  for (const auto& [path, data] : files_) {
    if (path == "big") continue;
    ASSERT_EQ(Diff(ReadAll(*group[1].cache, path), data), "") << path;
    if (c.fallback_busy.load() >= 1) break;  // each costs 2.55 s
  }
  EXPECT_GE(c.fallback_busy.load(), 1u);
  EXPECT_EQ(c.fallback_refused.load(), 0u);
  EXPECT_EQ(group[1].members->skipped(), 0u);
  // Each busy read was asked 9 times: at once, then after 10, 20, ... 1280 ms.
  EXPECT_EQ(group[0].server->counters().busy.load(), c.fallback_busy.load() * 9);
}

TEST_F(PeerGroupTest, AMemberWithAnotherVersionIsNotAskedToMixIt) {
  std::vector<Member> group = Group(2);
  for (const auto& [path, data] : files_)
    ASSERT_EQ(Diff(ReadAll(*group[0].cache, path), data), "") << path;
  // The origin's files change. Member 1 asks the origin (it served member 0
  // the old versions, so it holds them too); member 0 still serves what it
  // cached: its --revalidate has not passed.
  for (auto& [path, data] : files_) {
    data = Pattern(data.size() + 1, 7);
    WriteFile(origin_dir_.Sub(path), data);
  }
  for (const auto& [path, data] : files_) {
    ASSERT_EQ(Diff(ReadAll(*group[1].cache, path, /*revalidate=*/true), data), "") << path;
  }
  EXPECT_GE(group[1].origin->counters().fallback_version.load(), 1u);
  EXPECT_EQ(group[1].members->skipped(), 0u) << "another version is no fault";
}

// Two members reading the same two chunks across an extent boundary at once,
// each owning one side: each one's run asks the other for its half, and
// each one's server finds the chunk it is asked for in a flight of its own
// reader, which waits on the other. A server then reads beside that flight
// (cache/fetcher.h) instead of waiting on it, so nobody waits for the stall
// timeout.
TEST_F(PeerGroupTest, MembersReadingAcrossTheirExtentsNeverWaitOnEachOther) {
  stall_timeout_s_ = 3;
  std::vector<Member> group = Group(2);
  const std::vector<std::string> live = group[0].members->Live();
  const uint64_t size = kExtentBytes + (2 << 20);
  std::string path, data;
  for (int i = 0; i < 64 && path.empty(); ++i) {
    const std::string name = "across" + std::to_string(i);
    data = Pattern(size, 40 + i);
    WriteFile(origin_dir_.Sub(name), data);
    auto f = counting_->Open(name);
    ASSERT_TRUE(f.ok());
    const std::string tag = VersionTag((*f)->Identity().value());
    if (OwnerOf(ExtentKey{name, size, tag, 0}, live) !=
        OwnerOf(ExtentKey{name, size, tag, 1}, live)) {
      path = name;
    }
  }
  ASSERT_FALSE(path.empty()) << "no file whose two extents have two owners";
  const uint64_t before = counting_->bytes.load();
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (Member& m : group) {
    readers.emplace_back([&, cache = m.cache.get()] {
      auto opened = cache->Open(path, false);
      ASSERT_TRUE(opened.ok());
      ReadReply reply;
      const uint64_t off = kExtentBytes - (1 << 20);
      ASSERT_TRUE(cache->Read(*opened->file, off, 2 << 20, &reply).ok());
      std::string got;
      for (const ReadSegment& seg : reply.segments()) {
        std::string part(seg.len, '\0');
        if (seg.mem != nullptr) {
          part.assign(seg.mem, seg.len);
        } else if (pread(seg.fd, part.data(), seg.len, seg.off) != static_cast<ssize_t>(seg.len)) {
          wrong++;
        }
        got += part;
      }
      if (got != data.substr(off, 2 << 20)) wrong++;
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  for (Member& m : group) {
    EXPECT_EQ(m.origin->counters().fallback_unreachable.load(), 0u) << "a member waited on another";
  }
  EXPECT_GE(counting_->bytes.load() - before, uint64_t{2} << 20);
}

}  // namespace
}  // namespace stoker
