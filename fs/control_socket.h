// ControlSocket: a unix stream socket (CACHE_DIR/control.sock, mode 0600) on
// which a running mount takes requests from the stoker CLI. The protocol is one
// JSON object per connection: the client sends it on one line, the server
// answers with one JSON object on one line and closes. Requests are handled
// one at a time, in the order accepted; a client that sends nothing within
// 5 seconds (or more than 1 MiB) is dropped.
//
// What requests mean is the handler's business (see control_requests.h); the
// socket only frames them. A line that is not a JSON object is answered
// {"ok":false,"error":"..."} without calling the handler.
//
// The cache directory's lock makes this daemon the only user of the path, so a
// socket file left by a killed predecessor is replaced.
//
// Thread-safety: one thread serves; the handler runs on it. Destroying the
// object stops the thread and removes the socket file.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "util/status.h"

namespace stoker {

class ControlSocket {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;

  // Binds and listens at path, then serves on a thread. Fails (with the path
  // in the message) if the path is too long for a unix socket or cannot be
  // bound.
  static Result<std::unique_ptr<ControlSocket>> Start(const std::string& path, Handler handler);
  ~ControlSocket();
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  const std::string& path() const { return path_; }

 private:
  ControlSocket(std::string path, int listen_fd, int wake_read, int wake_write, Handler handler);
  void Serve();
  void ServeOne(int fd);

  const std::string path_;
  const int listen_fd_;
  const int wake_read_;  // a byte here stops Serve()
  const int wake_write_;
  Handler handler_;
  std::thread thread_;
};

// Client side, for the CLI and tests: sends request, returns the answer.
// Fails with the socket's errno (ENOENT, ECONNREFUSED: no daemon) or EPROTO
// for an answer that is not JSON.
Result<nlohmann::json> ControlRequest(const std::string& socket_path,
                                      const nlohmann::json& request);

}  // namespace stoker
