#include "group/peers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stoker {
namespace {

using std::chrono::seconds;

TEST(PeersTest, HostPortForms) {
  EXPECT_EQ(ParseHostPort("node-1:7070")->Name(), "node-1:7070");
  EXPECT_EQ(ParseHostPort("10.0.0.1:1")->port, 1);
  Result<HostPort> v6 = ParseHostPort("[fd00::1]:65535");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "fd00::1");
  EXPECT_EQ(v6->Name(), "[fd00::1]:65535");
  for (const char* bad : {"", "host", "host:", ":80", "host:0", "host:65536", "host:8x", "a:b:80",
                          "[fd00::1]", "[fd00::1]80", "[]:80"}) {
    Result<HostPort> r = ParseHostPort(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), EINVAL) << bad;
  }
}

TEST(PeersTest, AListOrADnsName) {
  Result<PeerSpec> list = ParsePeers("a:1,b:2,,[::1]:3");
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(list->members, (std::vector<std::string>{"a:1", "b:2", "[::1]:3"}));
  EXPECT_TRUE(list->dns.host.empty());
  Result<PeerSpec> dns = ParsePeers("dns:stoker-group.ns.svc:7070");
  ASSERT_TRUE(dns.ok());
  EXPECT_EQ(dns->dns.host, "stoker-group.ns.svc");
  EXPECT_EQ(dns->dns.port, 7070);
  EXPECT_TRUE(dns->members.empty());
  for (const char* bad : {"", ",", "a:1,b", "dns:name", "dns:name:0"}) {
    Result<PeerSpec> r = ParsePeers(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--peers"), std::string::npos) << r.status().message();
  }
}

TEST(PeersTest, SelfIsAlwaysAMember) {
  Membership m(*ParsePeers("b:1,a:1"), "c:1");
  EXPECT_EQ(m.All(), (std::vector<std::string>{"a:1", "b:1", "c:1"}));
  Membership named(*ParsePeers("b:1,a:1"), "a:1");
  EXPECT_EQ(named.All(), (std::vector<std::string>{"a:1", "b:1"}));
}

TEST(PeersTest, ADnsNameIsResolvedAgainAndAFailureKeepsTheLast) {
  std::vector<std::string> answer = {"10.0.0.2:7070", "10.0.0.1:7070"};
  bool fail = false;
  Membership m(*ParsePeers("dns:group:7070"), "10.0.0.1:7070",
               [&](const std::string& name, uint16_t port) -> Result<std::vector<std::string>> {
                 EXPECT_EQ(name, "group");
                 EXPECT_EQ(port, 7070);
                 if (fail) return Status::Error(EHOSTUNREACH, "no answer");
                 return answer;
               });
  EXPECT_EQ(m.All(), (std::vector<std::string>{"10.0.0.1:7070"}));
  ASSERT_TRUE(m.Refresh().ok());
  EXPECT_EQ(m.All(), (std::vector<std::string>{"10.0.0.1:7070", "10.0.0.2:7070"}));
  answer = {"10.0.0.3:7070"};
  ASSERT_TRUE(m.Refresh().ok());
  EXPECT_EQ(m.All(), (std::vector<std::string>{"10.0.0.1:7070", "10.0.0.3:7070"}));
  fail = true;
  EXPECT_FALSE(m.Refresh().ok());
  EXPECT_EQ(m.All(), (std::vector<std::string>{"10.0.0.1:7070", "10.0.0.3:7070"}));
}

TEST(PeersTest, LocalhostResolves) {
  Result<std::vector<std::string>> r = Membership::ResolveDns("localhost", 7070);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->empty());
  for (const std::string& m : *r) EXPECT_TRUE(m == "127.0.0.1:7070" || m == "[::1]:7070") << m;
  EXPECT_FALSE(Membership::ResolveDns("no-such-host.invalid", 1).ok());
}

TEST(PeersTest, ASkippedMemberComesBackAfterItsBackOff) {
  Membership m(*ParsePeers("a:1,b:1"), "c:1");
  const auto t0 = std::chrono::steady_clock::now();
  m.Skip("b:1", seconds(10), t0);
  m.Skip("c:1", seconds(10), t0);  // never itself
  EXPECT_EQ(m.Live(t0), (std::vector<std::string>{"a:1", "c:1"}));
  EXPECT_EQ(m.skipped(t0), 1u);
  EXPECT_EQ(m.Live(t0 + seconds(10)), (std::vector<std::string>{"a:1", "b:1", "c:1"}));
  EXPECT_EQ(m.skipped(t0 + seconds(11)), 0u);
  EXPECT_EQ(m.All().size(), 3u);
}

}  // namespace
}  // namespace stoker
