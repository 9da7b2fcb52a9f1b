// In-process servers for the origin conformance suite (origin_conformance_test.cc):
// a directory served over HTTP the way nginx serves it with `autoindex_format
// json` (HEAD, ranged GET, a 301 from a directory's name to its listing), or
// as an S3 bucket answering path-style requests (ListObjectsV2 with
// delimiter, pages and encoding-type=url; HEAD and ranged GET of a key).
// Both run on libmicrohttpd's own thread, on 127.0.0.1 and a free port, and
// read the directory afresh for every request, so a test changes the origin
// by changing files. Header-only: test code, kept out of stoker_origin.
//
// Thread-safety: Start and the destructor from one thread; the server's
// thread only reads the directory.
#pragma once

#include <dirent.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cache/origin/remote/url.h"
#include "util/status.h"

namespace stoker::testing {

class TreeServer {
 public:
  enum class Kind { kHttp, kS3 };
  static constexpr const char* kBucket = "conformance";

  TreeServer(Kind kind, std::string root) : kind_(kind), root_(std::move(root)) {}
  ~TreeServer() { Stop(); }
  TreeServer(const TreeServer&) = delete;
  TreeServer& operator=(const TreeServer&) = delete;

  // Listens on 127.0.0.1 (port 0 = any free one).
  void Start(uint16_t port = 0) {
    daemon_ = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, port, nullptr, nullptr, &Answer,
                               this, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    STOKER_CHECK(daemon_ != nullptr, "start the test server");
    port_ = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT)->port;
  }
  void Stop() {
    if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
  }
  uint16_t port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Requests answered so far.
  int requests() const { return requests_.load(); }

 private:
  struct Reply {
    unsigned code = MHD_HTTP_OK;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
  };

  // t (seconds since the epoch) in UTC, as strftime's format says.
  static std::string Utc(int64_t t, const char* format) {
    char buf[64];
    const time_t tt = static_cast<time_t>(t);
    struct tm tm;
    gmtime_r(&tt, &tm);
    std::strftime(buf, sizeof(buf), format, &tm);
    return buf;
  }
  static std::string HttpDate(int64_t t) { return Utc(t, "%a, %d %b %Y %H:%M:%S GMT"); }
  static std::string IsoDate(int64_t t) { return Utc(t, "%Y-%m-%dT%H:%M:%S.000Z"); }
  static std::string Etag(const struct stat& st) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "\"%llx-%llx\"", static_cast<long long>(st.st_mtime),
                  static_cast<long long>(st.st_size));
    return buf;
  }
  static std::string XmlEscape(const std::string& s) {
    std::string out;
    for (char c : s) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        default:
          out += c;
      }
    }
    return out;
  }
  static std::string JsonEscape(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }

  // Sorted names of dir (no . and ..); empty if it cannot be read.
  static std::vector<std::string> Names(const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
      while (struct dirent* de = readdir(d)) {
        if (std::strcmp(de->d_name, ".") != 0 && std::strcmp(de->d_name, "..") != 0) {
          names.push_back(de->d_name);
        }
      }
      closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // The file's bytes, whole or the range "bytes=A-B" asks for.
  static Reply FileReply(const std::string& path, const struct stat& st, const char* range) {
    Reply r;
    std::ifstream in(path, std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    r.body = all.str();
    r.headers = {
        {"Last-Modified", HttpDate(st.st_mtime)}, {"ETag", Etag(st)}, {"Accept-Ranges", "bytes"}};
    unsigned long long a = 0, b = 0;
    if (range != nullptr && std::sscanf(range, "bytes=%llu-%llu", &a, &b) == 2) {
      if (a >= r.body.size()) {
        r.code = MHD_HTTP_RANGE_NOT_SATISFIABLE;
        r.body.clear();
        return r;
      }
      b = std::min<unsigned long long>(b, r.body.size() - 1);
      r.headers.emplace_back("Content-Range", "bytes " + std::to_string(a) + "-" +
                                                  std::to_string(b) + "/" +
                                                  std::to_string(r.body.size()));
      r.body = r.body.substr(a, b - a + 1);
      r.code = MHD_HTTP_PARTIAL_CONTENT;
    }
    return r;
  }

  Reply ServeHttp(const std::string& url, const char* range) const {
    // libmicrohttpd hands the path percent-decoded.
    const std::string path = root_ + url;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) return Reply{MHD_HTTP_NOT_FOUND, "", {}};
    if (S_ISDIR(st.st_mode)) {
      if (url.back() != '/')
        return Reply{MHD_HTTP_MOVED_PERMANENTLY, "", {{"Location", url + "/"}}};
      std::string json = "[";
      for (const std::string& n : Names(path)) {
        struct stat es;
        if (lstat((path + "/" + n).c_str(), &es) != 0) continue;
        if (json.size() > 1) json += ",";
        json += "{\"name\":\"" + JsonEscape(n) + "\",\"type\":\"" +
                (S_ISDIR(es.st_mode) ? "directory" : "file") + "\",\"mtime\":\"" +
                HttpDate(es.st_mtime) + "\"";
        if (!S_ISDIR(es.st_mode)) json += ",\"size\":" + std::to_string(es.st_size);
        json += "}";
      }
      return Reply{MHD_HTTP_OK, json + "]", {{"Content-Type", "application/json"}}};
    }
    return FileReply(path, st, range);
  }

  // Every key under dir ("" or ending in '/'), as "dir/name", files only.
  void Keys(const std::string& dir, std::vector<std::string>* out) const {
    for (const std::string& n : Names(root_ + "/" + dir)) {
      struct stat st;
      if (lstat((root_ + "/" + dir + n).c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        Keys(dir + n + "/", out);
      } else {
        out->push_back(dir + n);
      }
    }
  }

  Reply ServeS3(MHD_Connection* c, const std::string& url, const char* range) const {
    const std::string bucket_path = std::string("/") + kBucket;
    if (url.compare(0, bucket_path.size(), bucket_path) != 0) {
      return Reply{MHD_HTTP_NOT_FOUND, "<Error><Code>NoSuchBucket</Code></Error>", {}};
    }
    std::string key = url.size() > bucket_path.size() + 1 ? url.substr(bucket_path.size() + 1) : "";
    if (!key.empty()) {  // percent-decoded by libmicrohttpd
      struct stat st;
      const std::string path = root_ + "/" + key;
      if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return Reply{MHD_HTTP_NOT_FOUND, "<Error><Code>NoSuchKey</Code></Error>", {}};
      }
      return FileReply(path, st, range);
    }
    // ListObjectsV2: the keys after the continuation token (the last key or
    // prefix of the page before), rolled up at the delimiter.
    auto arg = [c](const char* name) {
      const char* v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
      return std::string(v == nullptr ? "" : v);
    };
    const std::string prefix = arg("prefix"), delimiter = arg("delimiter"),
                      token = arg("continuation-token");
    const bool url_encoded = arg("encoding-type") == "url";
    const size_t max_keys = arg("max-keys").empty() ? 1000 : std::stoul(arg("max-keys"));
    std::vector<std::string> keys;
    Keys("", &keys);
    std::vector<std::pair<std::string, bool>> entries;  // (key or prefix, is prefix)
    for (const std::string& k : keys) {
      if (k.compare(0, prefix.size(), prefix) != 0) continue;
      const size_t d = delimiter.empty() ? std::string::npos : k.find(delimiter, prefix.size());
      std::pair<std::string, bool> e{k, false};
      if (d != std::string::npos) e = {k.substr(0, d + 1), true};
      if (entries.empty() || entries.back() != e) entries.push_back(e);
    }
    auto enc = [&](const std::string& s) {
      return XmlEscape(url_encoded ? PercentEncode(s, true) : s);
    };
    std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult>";
    xml += std::string("<Name>") + kBucket + "</Name><Prefix>" + enc(prefix) + "</Prefix>";
    if (url_encoded) xml += "<EncodingType>url</EncodingType>";
    size_t shown = 0;
    std::string last;
    bool truncated = false;
    for (const auto& [name, is_prefix] : entries) {
      if (!token.empty() && name <= token) continue;
      if (shown == max_keys) {
        truncated = true;
        break;
      }
      ++shown;
      last = name;
      if (is_prefix) {
        xml += "<CommonPrefixes><Prefix>" + enc(name) + "</Prefix></CommonPrefixes>";
        continue;
      }
      struct stat st;
      if (lstat((root_ + "/" + name).c_str(), &st) != 0) continue;
      xml += "<Contents><Key>" + enc(name) + "</Key><LastModified>" + IsoDate(st.st_mtime) +
             "</LastModified><ETag>" + XmlEscape(Etag(st)) + "</ETag><Size>" +
             std::to_string(st.st_size) + "</Size></Contents>";
    }
    xml += "<KeyCount>" + std::to_string(shown) + "</KeyCount><IsTruncated>" +
           (truncated ? "true" : "false") + "</IsTruncated>";
    if (truncated) xml += "<NextContinuationToken>" + XmlEscape(last) + "</NextContinuationToken>";
    xml += "</ListBucketResult>";
    return Reply{MHD_HTTP_OK, xml, {{"Content-Type", "application/xml"}}};
  }

  static MHD_Result Answer(void* cls, MHD_Connection* c, const char* url, const char* method,
                           const char*, const char*, size_t*, void**) {
    auto* self = static_cast<TreeServer*>(cls);
    self->requests_++;
    const char* range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    Reply r;
    if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0) {
      r.code = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (self->kind_ == Kind::kHttp) {
      r = self->ServeHttp(url, range);
    } else {
      r = self->ServeS3(c, url, range);
    }
    MHD_Response* resp =
        MHD_create_response_from_buffer(r.body.size(), r.body.data(), MHD_RESPMEM_MUST_COPY);
    if (resp == nullptr) return MHD_NO;
    for (const auto& [name, value] : r.headers) {
      MHD_add_response_header(resp, name.c_str(), value.c_str());
    }
    const MHD_Result ret = MHD_queue_response(c, r.code, resp);
    MHD_destroy_response(resp);
    return ret;
  }

  const Kind kind_;
  const std::string root_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
  std::atomic<int> requests_{0};
};

}  // namespace stoker::testing
