#include "cache/origin/remote/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <thread>

#include "util/log.h"

namespace stoker {
namespace {

// Handles kept idle (each with its connection cache); more are closed.
constexpr size_t kMaxIdleHandles = 32;
// Of a failed answer's body, what is kept for its error code.
constexpr size_t kMaxErrorBody = 64 << 10;

std::once_flag g_curl_init;

struct Transfer {
  const HttpRequest* req;
  HttpResponse* resp;
  CURL* handle;
  bool overflow = false;
  bool ignored_range = false;
};

size_t OnHeader(char* data, size_t size, size_t n, void* arg) {
  auto* t = static_cast<Transfer*>(arg);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp->headers.clear();  // a new answer (after a redirect or a 100)
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t v = line.find_first_not_of(" \t", colon + 1);
  t->resp->headers[name] = v == std::string::npos ? "" : line.substr(v);
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* arg) {
  auto* t = static_cast<Transfer*>(arg);
  const size_t len = size * n;
  long status = 0;
  curl_easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    size_t keep = std::min(len, kMaxErrorBody - std::min(kMaxErrorBody, t->resp->body.size()));
    t->resp->body.append(data, keep);
    return len;
  }
  if (t->req->range && status != 206) {
    t->ignored_range = true;
    return 0;  // aborts the transfer
  }
  if (t->req->sink == nullptr) {
    t->resp->body.append(data, len);
    return len;
  }
  if (t->resp->sunk + len > t->req->sink_len) {
    t->overflow = true;
    return 0;
  }
  std::memcpy(t->req->sink + t->resp->sunk, data, len);
  t->resp->sunk += len;
  return len;
}

bool RetryableCurlCode(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

int ErrnoForCurlCode(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
      return EHOSTUNREACH;
    case CURLE_COULDNT_CONNECT:
      return ECONNREFUSED;
    default:
      return EIO;  // timeouts and resets: the reader sees EIO
  }
}

}  // namespace

bool RetryPolicy::RetryableStatus(long http_status) {
  return http_status >= 500 || http_status == 429 || http_status == 408;
}

uint64_t RetryPolicy::DelayMs(int retry, double u) const {
  uint64_t cap = base_delay_ms;
  for (int i = 0; i < retry && cap < max_delay_ms; ++i) cap *= 2;
  cap = std::min(cap, max_delay_ms);
  return static_cast<uint64_t>(u * static_cast<double>(cap));
}

std::string HttpResponse::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

int ErrnoForHttpStatus(long http_status) {
  switch (http_status) {
    case 404:
    case 410:
      return ENOENT;
    case 401:
    case 403:
      return EACCES;
    case 412:
      return ESTALE;
    case 416:
      return EINVAL;
    default:
      return EIO;
  }
}

std::string DescribeRequest(const HttpRequest& req) {
  const char* method = req.method == HttpRequest::Method::kHead   ? "HEAD "
                       : req.method == HttpRequest::Method::kPut  ? "PUT "
                       : req.method == HttpRequest::Method::kPost ? "POST "
                                                                  : "GET ";
  return method + req.url;
}

HttpClient::HttpClient(Options options)
    : options_(std::move(options)),
      backoff_(static_cast<int64_t>(options_.backoff_s) * 1000000000),
      rng_(std::random_device{}()) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::~HttpClient() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::Acquire() {
  {
    MutexLock l(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  CURL* h = curl_easy_init();
  STOKER_CHECK(h != nullptr, "curl_easy_init");
  return h;
}

void HttpClient::Release(void* handle) {
  {
    MutexLock l(mu_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(handle);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

Result<HttpResponse> HttpClient::Attempt(void* handle, const HttpRequest& req, bool* retry) {
  CURL* h = static_cast<CURL*>(handle);
  curl_easy_reset(h);  // keeps the handle's open connections
  HttpResponse resp;
  Transfer t{&req, &resp, h};
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_s);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, options_.stall_timeout_s);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  if (req.follow_redirects) {
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
  }
  if (req.method == HttpRequest::Method::kHead) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  if (req.method == HttpRequest::Method::kPut) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
  if (req.method == HttpRequest::Method::kPost) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
  }
  std::string range;
  if (req.range) {
    range = std::to_string(req.range->first) + "-" +
            std::to_string(req.range->first + req.range->second - 1);
    curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
  }
  curl_slist* headers = nullptr;
  for (const std::string& hdr : req.headers) headers = curl_slist_append(headers, hdr.c_str());
  if (headers != nullptr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  if (!req.aws_sigv4.empty()) {
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, req.aws_sigv4.c_str());
    curl_easy_setopt(h, CURLOPT_USERNAME, req.aws_key_id.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, req.aws_secret.c_str());
  }
  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  // Nothing of the request (its credentials) stays set on the idle handle.
  curl_easy_setopt(h, CURLOPT_USERNAME, nullptr);
  curl_easy_setopt(h, CURLOPT_PASSWORD, nullptr);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp.status);
  *retry = false;
  if (t.ignored_range) {
    return Status::Error(EIO, DescribeRequest(req) +
                                  ": the server ignores range requests (it answered " +
                                  std::to_string(resp.status) + " to a Range)");
  }
  if (t.overflow) {
    return Status::Error(EIO, DescribeRequest(req) + ": the answer is longer than asked for");
  }
  if (rc != CURLE_OK) {
    *retry = RetryableCurlCode(rc);
    std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
    while (!detail.empty() && detail.back() == '\n') detail.pop_back();
    if (rc == CURLE_OPERATION_TIMEDOUT) detail = "timed out (" + detail + ")";
    return Status::Error(ErrnoForCurlCode(rc), DescribeRequest(req) + ": " + detail);
  }
  *retry = RetryPolicy::RetryableStatus(resp.status);
  return resp;
}

void HttpClient::ProbeWith(std::function<std::optional<HttpRequest>()> make) {
  std::weak_ptr<HttpClient> weak = weak_from_this();
  backoff_.SetProbe([weak, make = std::move(make)] {
    // Detached: a probe is bounded by the request's timeouts, and the
    // thread holds what it uses.
    std::thread([weak, make] {
      std::shared_ptr<HttpClient> client = weak.lock();
      if (client == nullptr) return;
      if (std::optional<HttpRequest> req = make()) {
        req->max_retries = 0;
        (void)client->Perform(*req);
      }
      client->backoff_.ProbeDone();
    }).detach();
  });
}

Result<HttpResponse> HttpClient::Perform(const HttpRequest& req) {
  void* h = Acquire();
  const int retries =
      std::max(0, req.max_retries >= 0 ? req.max_retries : options_.retry.max_retries);
  for (int attempt = 0;; ++attempt) {
    bool retry = false;
    Result<HttpResponse> r = Attempt(h, req, &retry);
    if (!retry || attempt >= retries) {
      Release(h);
      if (!r.ok()) {
        backoff_.Record(r.status());
      } else if (RetryPolicy::RetryableStatus(r->status)) {
        backoff_.Record(Status::IOError("HTTP " + std::to_string(r->status)));
      } else {
        backoff_.Record(Status::OK());
      }
      if (!r.ok() && attempt > 0) {
        return Status::Error(r.status().code(), r.status().message() + " (after " +
                                                    std::to_string(attempt + 1) + " attempts)");
      }
      return r;
    }
    double u;
    {
      MutexLock l(mu_);
      u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    }
    uint64_t wait = options_.retry.DelayMs(attempt, u);
    LOG_DEBUG("{}: {}; retrying in {} ms", DescribeRequest(req),
              r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message(), wait);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
  }
}

}  // namespace stoker
