// HttpClient: the one place remote origins (HTTP and S3) talk HTTP, through
// libcurl. It owns a pool of easy handles; a handle goes back to the pool
// after each request with its connections kept open, so requests from any
// thread reuse kept-alive connections, and the cache's fetch threads (which
// prefetch ahead of a sequential reader) each have one ranged GET in flight
// at once. That is how several GETs run ahead of one reader, rather than a
// libcurl multi loop: over a 5 ms RTT, 1 Gbit/s link (bench/remote) the pool
// keeps 3-4 GETs in flight and a stream reads at 123 of 125 MB/s, and at
// 4 Gbit/s a 4x larger window did not go faster (CPU-bound on 2 cores): a
// multi loop would save threads, not time.
//
// Faults: a connect that takes longer than connect_timeout_s, or a transfer
// that moves no byte for stall_timeout_s (libcurl averages its speed over a
// few seconds, so a trickle takes a few seconds more), fails the attempt. Failed
// attempts (no connection, reset, timeout, 5xx, 429) are retried up to
// max_retries times with exponential backoff and full jitter; 4xx answers
// are returned at once. After the last attempt Perform returns an error
// whose code IsOriginUnavailable() accepts: ECONNREFUSED, EHOSTUNREACH or
// EIO. Perform never blocks longer than the attempts' timeouts allow.
//
// Secrets: S3 credentials travel only in the signer (libcurl's SigV4) and
// request headers; neither ever reaches a message, which names the method
// and URL only.
//
// Thread-safety: Perform may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cache/origin/origin_backoff.h"
#include "util/mutex.h"
#include "util/status.h"

namespace stoker {

// When to try again and how long to wait first.
struct RetryPolicy {
  int max_retries = 5;           // attempts = max_retries + 1
  uint64_t base_delay_ms = 100;  // the first wait's upper bound
  uint64_t max_delay_ms = 5000;  // no wait is longer

  // Whether an HTTP status deserves another attempt (5xx, 429, 408).
  static bool RetryableStatus(long http_status);
  // The wait before retry number `retry` (0-based): uniform in
  // [0, min(max, base * 2^retry)], drawn from u in [0, 1).
  uint64_t DelayMs(int retry, double u) const;
};

struct HttpRequest {
  // kPut: without a body (IMDSv2's token); kPost: with body (STS's form).
  enum class Method { kGet, kHead, kPut, kPost };
  Method method = Method::kGet;
  std::string url;                   // fully encoded
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // kPost's
  // Bytes [offset, offset + length) only; the answer must be 206.
  std::optional<std::pair<uint64_t, uint64_t>> range;
  bool follow_redirects = false;
  // Retries of this request; -1 = the client's policy. Checks at mount time
  // ask for fewer, so that a server that does not answer fails fast.
  int max_retries = -1;
  // AWS SigV4 through libcurl (CURLOPT_AWS_SIGV4): "aws:amz:REGION:s3".
  std::string aws_sigv4;
  std::string aws_key_id;
  std::string aws_secret;
  // Where a 2xx body goes: sink (at most sink_len bytes; more fails the
  // attempt), or HttpResponse::body when sink is null.
  char* sink = nullptr;
  size_t sink_len = 0;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names in lower case; the last of each
  std::string body;  // a 2xx body without a sink, or the start of an error body
  size_t sunk = 0;   // bytes written to the sink

  // The header's value, or "".
  std::string Header(const std::string& lower_name) const;
};

class HttpClient : public std::enable_shared_from_this<HttpClient> {
 public:
  struct Options {
    // Seconds to wait for a TCP (and TLS) connect. Default: 10.
    long connect_timeout_s = 10;
    // Seconds a transfer may move no byte before it counts as stalled.
    // Default: 30.
    long stall_timeout_s = 30;
    RetryPolicy retry;
    // Seconds after a request failed to reach the server during which
    // callers holding an answer give it instead of asking (OriginBackoff).
    // 0 = never. Default: 5.
    long backoff_s = 5;
  };

  explicit HttpClient(Options options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Performs req, retrying as above. An HTTP answer that is not retried (or
  // the last one) is returned as a response, whatever its status; errors are
  // transport failures (and a server that ignores Range, or sends more than
  // asked), named by DescribeRequest ("GET http://h/x: ...").
  Result<HttpResponse> Perform(const HttpRequest& req);

  const Options& options() const { return options_; }
  // Whether the server answers, told by every Perform's outcome: a
  // transport failure or a retryable status (5xx, 429) after the last
  // attempt is no answer; any other response is one.
  OriginBackoff& backoff() { return backoff_; }
  // While the server is unreachable, asks it again with make()'s request
  // in a thread of its own, once per back-off, instead of letting a
  // caller's request wait out the timeouts (OriginBackoff::SetProbe).
  // make() gives nothing once what it builds the request from is gone.
  // REQUIRES: owned by a shared_ptr; called before the client is used.
  void ProbeWith(std::function<std::optional<HttpRequest>()> make);

 private:
  void* Acquire();
  void Release(void* handle);
  // One attempt; sets *retry when another attempt could succeed.
  Result<HttpResponse> Attempt(void* handle, const HttpRequest& req, bool* retry);

  const Options options_;
  OriginBackoff backoff_;
  Mutex mu_;
  std::vector<void*> idle_ GUARDED_BY(mu_);  // CURL* kept with their connections
  std::mt19937_64 rng_ GUARDED_BY(mu_);
};

// The errno for an HTTP answer that is not a success: 404/410 ENOENT,
// 401/403 EACCES, 412 ESTALE (the object changed), 416 EINVAL, the rest EIO.
int ErrnoForHttpStatus(long http_status);

// "GET http://h/x" for messages.
std::string DescribeRequest(const HttpRequest& req);

}  // namespace stoker
