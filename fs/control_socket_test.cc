#include "fs/control_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>

#include "cache/cache_test_util.h"

namespace stoker {
namespace {

using stoker::testing::ScratchDir;

// Sends raw bytes and returns the raw answer line.
std::string RawExchange(const std::string& path, const std::string& bytes) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  shutdown(fd, SHUT_WR);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

TEST(ControlSocketTest, AnswersOneRequestPerConnection) {
  ScratchDir dir("ctlsock");
  const std::string path = dir.Sub("control.sock");
  auto sock = ControlSocket::Start(path, [](const nlohmann::json& r) {
    return nlohmann::json{{"ok", true}, {"echo", r["op"]}};
  });
  ASSERT_TRUE(sock.ok()) << sock.status().message();
  for (int i = 0; i < 3; ++i) {
    Result<nlohmann::json> a = ControlRequest(path, {{"op", "ping" + std::to_string(i)}});
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ((*a)["echo"], "ping" + std::to_string(i));
  }
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ControlSocketTest, NonJsonIsRefusedWithoutCallingTheHandler) {
  ScratchDir dir("ctlsock");
  const std::string path = dir.Sub("control.sock");
  std::atomic<int> calls{0};
  auto sock = ControlSocket::Start(path, [&](const nlohmann::json&) {
    ++calls;
    return nlohmann::json{{"ok", true}};
  });
  ASSERT_TRUE(sock.ok());
  for (const char* bad : {"not json\n", "[1,2]\n", "\n", "{\"op\":"}) {
    nlohmann::json a = nlohmann::json::parse(RawExchange(path, bad));
    EXPECT_EQ(a["ok"], false) << bad;
    EXPECT_TRUE(a["error"].is_string());
  }
  EXPECT_EQ(calls, 0);
}

TEST(ControlSocketTest, HandlerExceptionBecomesAnError) {
  ScratchDir dir("ctlsock");
  const std::string path = dir.Sub("control.sock");
  auto sock = ControlSocket::Start(
      path, [](const nlohmann::json&) -> nlohmann::json { throw std::runtime_error("boom"); });
  ASSERT_TRUE(sock.ok());
  Result<nlohmann::json> a = ControlRequest(path, {{"op", "x"}});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)["ok"], false);
  EXPECT_NE((*a)["error"].get<std::string>().find("boom"), std::string::npos);
}

TEST(ControlSocketTest, ReplacesAStaleSocketFileAndRemovesItsOwn) {
  ScratchDir dir("ctlsock");
  const std::string path = dir.Sub("control.sock");
  std::ofstream(path) << "left by a killed daemon";
  {
    auto sock = ControlSocket::Start(path, [](const nlohmann::json&) {
      return nlohmann::json{{"ok", true}};
    });
    ASSERT_TRUE(sock.ok()) << sock.status().message();
    EXPECT_TRUE(ControlRequest(path, {{"op", "ping"}}).ok());
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "socket file removed at shutdown";
  EXPECT_EQ(ControlRequest(path, {{"op", "ping"}}).status().code(), ENOENT);
}

TEST(ControlSocketTest, TooLongPathIsRefused) {
  auto sock = ControlSocket::Start("/tmp/" + std::string(200, 'x'),
                                   [](const nlohmann::json&) { return nlohmann::json{}; });
  EXPECT_EQ(sock.status().code(), ENAMETOOLONG);
}

}  // namespace
}  // namespace stoker
