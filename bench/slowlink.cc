// slowlink: a TCP forwarder that behaves like a slow network link, for the remote-origin tests and
// bench/remote.
//
// This project's kernel has no queueing disciplines at all (`tc qdisc add ... netem` and even `tbf`
// answer "Specified qdisc kind is unknown", and there is no module to load), so the link that netem
// would make is made here, in user space:
//
//   slowlink --listen HOST:PORT --connect HOST:PORT [--delay-ms D] [--rate-mbit R] [--backlog-ms B]
//            [--window BYTES]
//
// Every connection accepted on --listen is forwarded to --connect. Each direction is one link,
// shared by all connections: a block of bytes read from one side leaves the link's sender when the
// link has serialized what was queued before it (R Mbit/s), and arrives at the other side D ms
// later (one-way delay: RTT = 2 D). A new connection is held for one RTT before its first byte
// moves (the TCP handshake over the link). The link queues at most B ms of bytes (a router's
// buffer, netem's 1000-packet default at 1 Gbit/s is 12 ms); a connection has at most W bytes on
// the wire per direction (its TCP window), and a byte counts as on the wire until its
// acknowledgement would be back (one RTT after it was sent). Beyond those limits the forwarder
// stops reading, and the sender's TCP sees a full window, as it would over a real link.
//
// Its threads run SCHED_FIFO where allowed, so that the link's timing does not depend on the
// machine's load. Prints "listening HOST:PORT" on stdout once it accepts (port 0 picks a free
// port), then runs until killed. On SIGTERM/SIGINT it prints one line to stderr and exits:
// connections accepted, bytes each way, and the most connections that had bytes on the wire at once
// in each direction (how many requests a client kept in flight).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using Nanos = std::chrono::nanoseconds;

struct Options {
  std::string listen = "127.0.0.1:0";
  std::string connect;
  double delay_ms = 2.5;
  double rate_mbit = 1000;
  double backlog_ms = 12;
  size_t window = 4 << 20;
};

// One direction of the link, shared by every connection.
struct Link {
  std::mutex mu;
  Clock::time_point free_at{};  // GUARDED_BY(mu): when the sender has serialized all it was given
  int busy = 0;                 // GUARDED_BY(mu): connections with bytes on the wire now
  int peak_busy = 0;            // GUARDED_BY(mu): the most at once
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> connections{0};

  void Busy(int delta) {
    std::lock_guard<std::mutex> l(mu);
    busy += delta;
    peak_busy = std::max(peak_busy, busy);
  }
};

Options g_opt;
Link g_up, g_down;  // client -> server, server -> client
Nanos g_delay, g_backlog;
double g_ns_per_byte;

bool ParseHostPort(const std::string& s, sockaddr_in* out) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(std::atoi(s.c_str() + colon + 1)));
  return inet_pton(AF_INET, s.substr(0, colon).c_str(), &out->sin_addr) == 1;
}

struct Block {
  std::vector<char> data;
  size_t sent = 0;
  Clock::time_point arrive;  // at the other end
  Clock::time_point acked;   // its acknowledgement is back at the sender
};

// Moves bytes from `from` to `to` through `link` until `from` closes (then half-closes `to`) or
// either fails.
void PumpLoop(int from, int to, Link* link, std::deque<Block>& wire) {
  constexpr size_t kRead = 64 << 10;
  std::deque<std::pair<Clock::time_point, size_t>> unacked;
  size_t unacked_bytes = 0;
  bool eof = false;
  for (;;) {
    auto now = Clock::now();
    while (!unacked.empty() && unacked.front().first <= now) {
      unacked_bytes -= unacked.front().second;
      unacked.pop_front();
    }
    // Deliver what has arrived.
    while (!wire.empty() && wire.front().arrive <= now) {
      Block& b = wire.front();
      ssize_t n = send(to, b.data.data() + b.sent, b.data.size() - b.sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      b.sent += static_cast<size_t>(n);
      if (b.sent == b.data.size()) {
        wire.pop_front();
        if (wire.empty()) link->Busy(-1);
      }
    }
    if (eof && wire.empty()) {
      shutdown(to, SHUT_WR);
      return;
    }
    bool link_full;
    {
      std::lock_guard<std::mutex> l(link->mu);
      link_full = link->free_at > now + g_backlog;
    }
    bool can_read = !eof && !link_full && unacked_bytes < g_opt.window;
    // Wait for the next event: a block's arrival, an acknowledgement, room on the link, or bytes to
    // read.
    Clock::time_point wake = now + std::chrono::milliseconds(50);
    if (!wire.empty()) wake = std::min(wake, wire.front().arrive);
    if (!unacked.empty() && unacked_bytes >= g_opt.window)
      wake = std::min(wake, unacked.front().first);
    if (link_full) wake = std::min(wake, now + Nanos(200000));
    const int64_t wait_ns =
        std::max<int64_t>(0, std::chrono::duration_cast<Nanos>(wake - now).count());
    if (!can_read) {
      std::this_thread::sleep_until(wake);
      continue;
    }
    pollfd p{from, POLLIN, 0};
    timespec ts{static_cast<time_t>(wait_ns / 1000000000), static_cast<long>(wait_ns % 1000000000)};
    int r = ppoll(&p, 1, &ts, nullptr);
    if (r < 0 && errno != EINTR) return;
    if (r <= 0) continue;
    size_t room = std::min(kRead, g_opt.window - unacked_bytes);
    Block b;
    b.data.resize(room);
    ssize_t n = recv(from, b.data.data(), room, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    if (n == 0) {
      eof = true;
      continue;
    }
    b.data.resize(static_cast<size_t>(n));
    now = Clock::now();
    Clock::time_point sent;
    {
      std::lock_guard<std::mutex> l(link->mu);
      sent = std::max(now, link->free_at) + Nanos(static_cast<int64_t>(g_ns_per_byte * n));
      link->free_at = sent;
    }
    link->bytes += static_cast<uint64_t>(n);
    b.arrive = sent + g_delay;
    b.acked = sent + 2 * g_delay;
    unacked.emplace_back(b.acked, static_cast<size_t>(n));
    unacked_bytes += static_cast<size_t>(n);
    if (wire.empty()) link->Busy(+1);
    wire.push_back(std::move(b));
  }
}

void Pump(int from, int to, Link* link) {
  std::deque<Block> wire;  // read, not yet written out
  PumpLoop(from, to, link, wire);
  if (!wire.empty()) link->Busy(-1);  // a failed connection leaves the wire
}

void Serve(int client, sockaddr_in upstream_addr) {
  int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (server < 0 ||
      connect(server, reinterpret_cast<sockaddr*>(&upstream_addr), sizeof(upstream_addr)) != 0) {
    if (server >= 0) close(server);
    close(client);
    return;
  }
  g_up.connections++;
  std::this_thread::sleep_for(2 * g_delay);  // the handshake's round trip
  std::thread down(Pump, server, client, &g_down);
  Pump(client, server, &g_up);
  down.join();
  close(server);
  close(client);
}

void OnSignal(int) {
  // Read without the locks: the process ends here, and a torn int is not possible on this ABI.
  std::fprintf(stderr,
               "slowlink: connections %llu up_bytes %llu down_bytes %llu peak_busy_up %d "
               "peak_busy_down %d\n",
               static_cast<unsigned long long>(g_up.connections.load()),
               static_cast<unsigned long long>(g_up.bytes.load()),
               static_cast<unsigned long long>(g_down.bytes.load()), g_up.peak_busy,
               g_down.peak_busy);
  _exit(0);
}

int Usage() {
  std::fprintf(stderr,
               "usage: slowlink --listen HOST:PORT --connect HOST:PORT [--delay-ms 2.5] "
               "[--rate-mbit 1000] [--backlog-ms 12] [--window 4194304]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--listen") {
      g_opt.listen = v;
    } else if (k == "--connect") {
      g_opt.connect = v;
    } else if (k == "--delay-ms") {
      g_opt.delay_ms = std::atof(v.c_str());
    } else if (k == "--rate-mbit") {
      g_opt.rate_mbit = std::atof(v.c_str());
    } else if (k == "--backlog-ms") {
      g_opt.backlog_ms = std::atof(v.c_str());
    } else if (k == "--window") {
      g_opt.window = static_cast<size_t>(std::atoll(v.c_str()));
    } else {
      return Usage();
    }
  }
  if (argc % 2 != 1) return Usage();
  sockaddr_in listen_addr, upstream_addr;
  if (!ParseHostPort(g_opt.listen, &listen_addr) || !ParseHostPort(g_opt.connect, &upstream_addr) ||
      g_opt.rate_mbit <= 0 || g_opt.delay_ms < 0 || g_opt.window < (64 << 10)) {
    return Usage();
  }
  g_delay = Nanos(static_cast<int64_t>(g_opt.delay_ms * 1e6));
  g_backlog = Nanos(static_cast<int64_t>(g_opt.backlog_ms * 1e6));
  g_ns_per_byte = 8e3 / g_opt.rate_mbit;  // 8 bits at rate_mbit * 1e6 bit/s, in ns
  // The link's clock must not wait for a CPU behind a compiler on a loaded 2-core machine: run at a
  // real-time priority where allowed (root), else as an ordinary process.
  sched_param sp{};
  sp.sched_priority = 10;
  if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
    std::fprintf(stderr, "slowlink: no SCHED_FIFO\n");
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);

  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(ls, reinterpret_cast<sockaddr*>(&listen_addr), sizeof(listen_addr)) != 0 ||
      listen(ls, 128) != 0) {
    std::perror("slowlink: listen");
    return 1;
  }
  socklen_t len = sizeof(listen_addr);
  getsockname(ls, reinterpret_cast<sockaddr*>(&listen_addr), &len);
  char host[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &listen_addr.sin_addr, host, sizeof(host));
  std::printf("listening %s:%u\n", host, ntohs(listen_addr.sin_port));
  std::fflush(stdout);
  for (;;) {
    int c = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::perror("slowlink: accept");
      return 1;
    }
    std::thread(Serve, c, upstream_addr).detach();
  }
}
