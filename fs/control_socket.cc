#include "fs/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/log.h"

namespace stoker {

namespace {

constexpr size_t kMaxRequestBytes = 1 << 20;
constexpr int kClientTimeoutSeconds = 5;

Status FillAddress(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr->sun_path)) {
    return Status::Error(ENAMETOOLONG, "control socket path '" + path + "' is longer than " +
                                           std::to_string(sizeof(addr->sun_path) - 1) + " bytes");
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return Status::OK();
}

void SetTimeouts(int fd) {
  timeval tv{kClientTimeoutSeconds, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// Reads up to the first '\n' (excluded) or EOF.
Result<std::string> ReadLine(int fd) {
  std::string line;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("control socket read");
    }
    if (n == 0) return line;
    const char* nl = static_cast<const char*>(std::memchr(buf, '\n', n));
    line.append(buf, nl ? nl - buf : n);
    if (nl) return line;
    if (line.size() > kMaxRequestBytes) return Status::Invalid("control request too long");
  }
}

Status WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("control socket write");
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

nlohmann::json ErrorAnswer(const std::string& why) {
  return nlohmann::json{{"ok", false}, {"error", why}};
}

}  // namespace

Result<std::unique_ptr<ControlSocket>> ControlSocket::Start(const std::string& path,
                                                            Handler handler) {
  sockaddr_un addr;
  STOKER_RETURN_IF_ERROR(FillAddress(path, &addr));
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("control socket");
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    Status st = Status::FromErrno("remove stale control socket '" + path + "'");
    close(fd);
    return st;
  }
  // chmod rather than umask: umask is process-wide and other threads create
  // files. The cache directory is 0700, so the moment before chmod is safe.
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      chmod(path.c_str(), 0600) != 0 || listen(fd, 16) != 0) {
    Status st = Status::FromErrno("control socket '" + path + "'");
    close(fd);
    return st;
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    Status st = Status::FromErrno("control socket pipe");
    close(fd);
    unlink(path.c_str());
    return st;
  }
  return std::unique_ptr<ControlSocket>(
      new ControlSocket(path, fd, wake[0], wake[1], std::move(handler)));
}

ControlSocket::ControlSocket(std::string path, int listen_fd, int wake_read, int wake_write,
                             Handler handler)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      handler_(std::move(handler)),
      thread_([this] { Serve(); }) {}

ControlSocket::~ControlSocket() {
  const char byte = 1;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
  unlink(path_.c_str());
}

void ControlSocket::Serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LOG_ERROR("control socket poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
        LOG_WARN("control socket accept: {}", std::strerror(errno));
      }
      continue;
    }
    ServeOne(conn);
    close(conn);
  }
}

void ControlSocket::ServeOne(int fd) {
  SetTimeouts(fd);
  nlohmann::json answer;
  Result<std::string> line = ReadLine(fd);
  if (!line.ok()) {
    answer = ErrorAnswer(line.status().message());
  } else {
    nlohmann::json request = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
    if (!request.is_object()) {
      answer = ErrorAnswer("control request is not a JSON object");
    } else {
      try {
        answer = handler_(request);
      } catch (const std::exception& e) {
        answer = ErrorAnswer(std::string("control request failed: ") + e.what());
      }
    }
  }
  Status st =
      WriteAll(fd, answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (!st.ok()) LOG_DEBUG("{}", st.message());
}

Result<nlohmann::json> ControlRequest(const std::string& socket_path,
                                      const nlohmann::json& request) {
  sockaddr_un addr;
  STOKER_RETURN_IF_ERROR(FillAddress(socket_path, &addr));
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("control socket");
  SetTimeouts(fd);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status st = Status::FromErrno("connect to '" + socket_path + "'");
    close(fd);
    return st;
  }
  Status st = WriteAll(fd, request.dump() + "\n");
  if (!st.ok()) {
    close(fd);
    return st;
  }
  Result<std::string> line = ReadLine(fd);
  close(fd);
  if (!line.ok()) return line.status();
  nlohmann::json answer = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded()) {
    return Status::Error(EPROTO, "answer from '" + socket_path + "' is not JSON");
  }
  return answer;
}

}  // namespace stoker
