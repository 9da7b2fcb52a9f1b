#include "group/peer_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "cache/origin/remote/url.h"
#include "group/peer_protocol.h"
#include "util/log.h"

namespace stoker {

struct PeerServer::Answer {
  unsigned status = MHD_HTTP_OK;
  std::string error;     // the body of a refusal
  char* body = nullptr;  // malloc'd; given to libmicrohttpd
  size_t len = 0;
  uint64_t offset = 0, size = 0;  // Content-Range of a 206
  std::string checksums;
  std::string version;  // a 409's
};

namespace {

const char* Value(MHD_Connection* c, MHD_ValueKind kind, const char* key) {
  const char* v = MHD_lookup_connection_value(c, kind, key);
  return v != nullptr ? v : "";
}

std::string Decoded(const char* raw) {
  std::string out;
  return PercentDecode(raw, &out) ? out : std::string();
}

// Copies a read reply's segments (file ranges or memory) into out.
Status Gather(const ReadReply& reply, char* out, size_t len) {
  size_t pos = 0;
  for (const ReadSegment& seg : reply.segments()) {
    if (pos + seg.len > len) return Status::IOError("a reply longer than asked");
    if (seg.mem != nullptr) {
      std::memcpy(out + pos, seg.mem, seg.len);
    } else {
      size_t done = 0;
      while (done < seg.len) {
        const ssize_t n =
            pread(seg.fd, out + pos + done, seg.len - done, seg.off + static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "reading the cache");
        done += static_cast<size_t>(n);
      }
    }
    pos += seg.len;
  }
  return pos == len ? Status::OK() : Status::IOError("a reply shorter than asked");
}

}  // namespace

struct PeerServerAccess {
  // Keeps raw bytes: paths and values are decoded by the protocol's own rules.
  static size_t NoUnescape(void*, MHD_Connection*, char* s) { return std::strlen(s); }

  static MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char*, const char*, size_t*, void** req_cls) {
    // The first call is for the headers alone; answer on the second.
    if (*req_cls == nullptr) {
      *req_cls = reinterpret_cast<void*>(1);
      return MHD_YES;
    }
    auto* server = static_cast<PeerServer*>(cls);
    PeerServer::Answer a;
    if (std::strcmp(method, "GET") != 0) {
      a.status = MHD_HTTP_METHOD_NOT_ALLOWED;
      a.error = "GET only";
    } else {
      a = server->Serve(connection, url);
    }
    MHD_Response* r = a.body != nullptr
                          ? MHD_create_response_from_buffer(a.len, a.body, MHD_RESPMEM_MUST_FREE)
                          : MHD_create_response_from_buffer(a.error.size(), a.error.data(),
                                                            MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) {
      std::free(a.body);
      return MHD_NO;
    }
    if (a.status == MHD_HTTP_PARTIAL_CONTENT) {
      const std::string range = "bytes " + std::to_string(a.offset) + "-" +
                                std::to_string(a.offset + a.len - 1) + "/" + std::to_string(a.size);
      MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, range.c_str());
      MHD_add_response_header(r, kChecksumsHeader, a.checksums.c_str());
    }
    if (!a.version.empty()) MHD_add_response_header(r, kVersionHeader, a.version.c_str());
    const MHD_Result ret = MHD_queue_response(connection, a.status, r);
    MHD_destroy_response(r);
    return ret;
  }
};

PeerServer::Answer PeerServer::Serve(MHD_Connection* c, const char* url) {
  Answer a;
  auto refuse = [&](unsigned status, std::string why) {
    a.status = status;
    a.error = std::move(why) + "\n";
    if (status == MHD_HTTP_UNAUTHORIZED) {
      counters_.unauthorized++;
    } else if (status == MHD_HTTP_CONFLICT) {
      counters_.other_version++;
    } else {
      counters_.failed++;
    }
    return a;
  };
  const std::string_view target(url);
  if (target.substr(0, kExtentPathPrefix.size()) != kExtentPathPrefix) {
    return refuse(MHD_HTTP_NOT_FOUND, "not an extent");
  }
  const std::string_view auth = Value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.substr(0, kBearer.size()) != kBearer || !token_->Matches(auth.substr(kBearer.size()))) {
    return refuse(MHD_HTTP_UNAUTHORIZED, "the group's token is needed");
  }
  ExtentRequest r;
  Status parsed = ParseExtentRequest(
      target.substr(kExtentPathPrefix.size()), Decoded(Value(c, MHD_GET_ARGUMENT_KIND, "group")),
      Value(c, MHD_GET_ARGUMENT_KIND, "size"), Decoded(Value(c, MHD_GET_ARGUMENT_KIND, "version")),
      Value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE), &r);
  if (!parsed.ok()) return refuse(MHD_HTTP_BAD_REQUEST, parsed.message());
  if (r.group != options_.group) return refuse(MHD_HTTP_NOT_FOUND, "another group");
  if (r.length > kMaxRequestBytes || r.offset >= r.size) {
    return refuse(MHD_HTTP_RANGE_NOT_SATISFIABLE, "a range past the file or too large");
  }
  if (in_flight_.fetch_add(1) >= options_.max_requests) {
    in_flight_--;
    counters_.busy++;
    a.status = MHD_HTTP_SERVICE_UNAVAILABLE;
    a.error = "busy\n";
    return a;
  }
  struct Release {
    std::atomic<unsigned>& n;
    ~Release() { n--; }
  } release{in_flight_};
  Result<ObjectCache::Opened> opened = cache_->OpenForPeer(r.path);
  if (!opened.ok()) {
    return refuse(
        opened.status().code() == ENOENT ? MHD_HTTP_NOT_FOUND : MHD_HTTP_SERVICE_UNAVAILABLE,
        opened.status().message());
  }
  const std::string have = VersionTag(IdentityFromStat(opened->st));
  if (have != r.version || static_cast<uint64_t>(opened->st.st_size) != r.size) {
    a.version = have;
    return refuse(MHD_HTTP_CONFLICT, "another version");
  }
  const size_t len = static_cast<size_t>(std::min(r.length, r.size - r.offset));
  ReadReply reply;
  Status read = cache_->Read(*opened->file, r.offset, len, &reply);
  if (read.ok() && reply.size() != len) read = Status::IOError("a short read");
  char* body = read.ok() ? static_cast<char*>(std::malloc(len == 0 ? 1 : len)) : nullptr;
  if (read.ok() && body == nullptr) read = Status::NoSpace("no memory for the reply");
  if (read.ok()) read = Gather(reply, body, len);
  if (!read.ok()) {
    std::free(body);
    return refuse(MHD_HTTP_SERVICE_UNAVAILABLE, read.message());
  }
  a.status = MHD_HTTP_PARTIAL_CONTENT;
  a.body = body;
  a.len = len;
  a.offset = r.offset;
  a.size = r.size;
  a.checksums = EncodeChecksums(body, len);
  if (options_.flip_a_byte_for_tests && len > 0) body[len / 2] ^= 0x20;
  counters_.requests++;
  counters_.bytes += len;
  return a;
}

Result<std::unique_ptr<PeerServer>> PeerServer::Start(Options options, ObjectCache* cache,
                                                      PeerToken* token) {
  std::unique_ptr<PeerServer> s(new PeerServer(std::move(options), cache, token));
  sockaddr_storage addr{};
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
  const HostPort& l = s->options_.listen;
  if (l.host.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(l.port);
    if (inet_pton(AF_INET6, l.host.c_str(), &a6->sin6_addr) != 1) {
      return Status::Invalid("--peer-listen: '" + l.host + "' is not an IPv6 address");
    }
    flags |= MHD_USE_IPv6;
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(l.port);
    if (inet_pton(AF_INET, l.host.c_str(), &a4->sin_addr) != 1) {
      return Status::Invalid("--peer-listen: '" + l.host + "' is not an IPv4 address");
    }
  }
  s->daemon_ = MHD_start_daemon(
      flags, l.port, nullptr, nullptr, &PeerServerAccess::Handle, s.get(), MHD_OPTION_SOCK_ADDR,
      reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_CONNECTION_LIMIT, s->options_.max_connections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->options_.max_per_peer, MHD_OPTION_CONNECTION_TIMEOUT,
      s->options_.idle_timeout_s, MHD_OPTION_UNESCAPE_CALLBACK, &PeerServerAccess::NoUnescape,
      nullptr, MHD_OPTION_END);
  if (s->daemon_ == nullptr) {
    return Status::Error(EADDRINUSE, "--peer-listen: cannot listen on " + l.Name() +
                                         " (in use, or not an address of this host)");
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(s->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  s->port_ = info != nullptr ? info->port : l.port;
  LOG_INFO("serving the cache group '{}' on {}", s->options_.group,
           HostPort{l.host, s->port_}.Name());
  return s;
}

PeerServer::~PeerServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace stoker
