// Origin: the slow storage stoker overlays (a local directory on HDD/NAS, an
// S3 bucket, an HTTP(S) server). Everything above cache/ sees the origin only through
// this interface, so every backend serves the same mount, cache, eviction,
// revalidation and fsck.
//
// Paths are relative to the origin root, '/'-separated, without a leading
// '/': "" is the root, "train/shard-00001" a file. Callers never pass '..'
// or empty components; backends refuse them (EINVAL) anyway.
//
// Errors: ENOENT = the entry does not exist at the origin (it was deleted);
// EACCES/EPERM = the origin refuses us; EIO, ETIMEDOUT, ENOTCONN,
// EHOSTUNREACH = the origin could not be reached, which is NOT the same as
// deleted: cached data for the path stays valid and keeps being served.
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <errno.h>
#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache/io/io_backend.h"
#include "util/status.h"

namespace stoker {

// What says "this is still the same content". Two identities compare equal
// only if every field matches; a changed file gets a new cached version.
struct OriginIdentity {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t ino = 0;
  uint64_t dev = 0;
  // Empty: remote origins carry their ETag in st_ctim, so that the identity
  // of every backend is IdentityFromStat's (cache/origin/remote/remote_entry.h).
  std::string etag;

  bool operator==(const OriginIdentity&) const = default;
  // "size S mtime M ctime C dev D ino I" (for logs).
  std::string ToString() const;
};

// The st_dev of a derived file (a decoded view's): this bit set, the rest a
// hash of the view's options and decoder (decode/view/view_origin.cc). No real
// device number has it. Two derived files on different such devices hold
// different bytes, whatever their sizes and times.
inline constexpr uint64_t kDerivedDevBit = uint64_t{1} << 63;

// Whether now (what the origin has at a path) is the content that was was's,
// judged by attributes alone: the same size, mtime and ETag, and the same
// inode, or another filesystem (st_dev differs: the origin was remounted, or
// copied with its times kept, by cp -a or rsync -a, and mounted in its
// place; inode numbers do not carry over). ctime is not compared for files
// on a device: a chmod, a new hard link or a copy that keeps times changes
// it, the bytes do not. (Remote origins have st_dev 0 and carry their ETag
// in ctime: for them it is compared.)
// On one filesystem another inode is another file even with the same size
// and mtime: a rewrite and rename within one timestamp tick keeps both (the
// cache checks such a file's bytes before it takes it for the same).
// A derived file (kDerivedDevBit) is the same content only on the same
// device and inode: its times are its raw file's, and a view remounted with
// other options (dct, channels, decoder=gpu) keeps them.
bool SameContent(const OriginIdentity& was, const OriginIdentity& now);
// The same size, mtime and ETag (and ctime where it is the ETag): what every
// copy that keeps times keeps.
bool SameSizeAndTimes(const OriginIdentity& a, const OriginIdentity& b);

// True if the error code means "could not reach the origin" rather than
// "the origin says no / not there".
bool IsOriginUnavailable(int code);

struct OriginDirEntry {
  std::string name;
  struct stat st;  // lstat-style attributes of the entry
  // False: st holds only the type and inode number (a decoded view file
  // whose size is not known without scanning its raw file); a readdirplus
  // must not hand these attributes to the kernel.
  bool attrs_complete = true;
};

// Who waits on a read of an origin file: a reader (a request the kernel
// made), the cache's prefetch for one, or a warm. An origin whose files queue
// work of their own (a decoded view's decode jobs) orders that work by it;
// the others ignore it.
enum class Urgency { kReader, kPrefetch, kWarm };

// Where an open may read a version's bytes from (Origin::OpenVersion).
enum class Via {
  kAnywhere,    // the origin, or whoever else holds that version (a cache group's member)
  kOriginOnly,  // the origin itself: a group member serving another must not ask a third
};

// An open origin file. Reads are positional and thread-safe.
class OriginFile {
 public:
  virtual ~OriginFile() = default;
  // Reads up to len bytes at off. Short only at end of file.
  virtual Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) = 0;
  // As ReadAt, from a caller whose buffer suits direct I/O: buf is aligned
  // to kDirectIoAlign (cache/io/direct_io.h) and holds len rounded up to it
  // (AllocAligned's buffers do), which a backend may fill past len. It may
  // then read around the page cache (a cold origin read costs no copy).
  // who: whom the cache reads for. Default: ReadAt.
  virtual Result<size_t> ReadAtAligned(void* buf, size_t len, uint64_t off, Urgency who) {
    (void)who;
    return ReadAt(buf, len, off);
  }
  // The identity of what this open file reads now (fstat for local files).
  virtual Result<OriginIdentity> Identity() = 0;
};

class OriginBackoff;

class Origin {
 public:
  virtual ~Origin() = default;
  // A short human description for logs and stat: "local:/nas/imagenet".
  virtual std::string Describe() const = 0;
  // What the origin is, as a cache records it (CacheOptions::origin_location):
  // a local directory's resolved path ("local:/nas/x"), a bucket and prefix
  // ("s3://bucket/prefix", whatever the endpoint), a base URL
  // ("https://host/base/"). Default: Describe().
  virtual std::string Location() const { return Describe(); }
  // lstat semantics: a symlink is reported as a symlink, never followed.
  virtual Result<struct stat> Stat(const std::string& path) = 0;
  // Calls fn for each entry except "." and "..", in the origin's order;
  // stops early when fn returns false.
  virtual Status ReadDir(const std::string& path,
                         const std::function<bool(const OriginDirEntry&)>& fn) = 0;
  virtual Result<std::string> ReadLink(const std::string& path) = 0;
  // Opens a regular file for reading. Never follows a symlink, at any
  // component (a symlink gives ELOOP).
  virtual Result<std::unique_ptr<OriginFile>> Open(const std::string& path) = 0;
  // Opens path to read the version whose identity is `version` (what the
  // cache holds of it). A wrapper that can get a version's bytes elsewhere
  // (a cache group's member, group/peer_origin.h) reads them there by that
  // identity, and opens the origin only for what it cannot get; what it
  // reads from the origin is checked against the origin's identity as
  // always. Default: Open(path).
  virtual Result<std::unique_ptr<OriginFile>> OpenVersion(const std::string& path,
                                                          const OriginIdentity& version, Via via) {
    (void)version;
    (void)via;
    return Open(path);
  }
  // Whether a read of [off, off + len) of that version, opened with
  // Via::kAnywhere, may wait on another member of a cache group
  // (group/peer_origin.h): the cache keeps fetches that must not wait on
  // members from waiting on one that may (cache/fetcher.h). Default: no.
  virtual bool AsksMembers(const std::string& path, const OriginIdentity& version, uint64_t off,
                           uint64_t len) {
    (void)path;
    (void)version;
    (void)off;
    (void)len;
    return false;
  }
  // Extended attributes, passed through. ENOTSUP/ENODATA where none.
  virtual Result<std::string> GetXattr(const std::string& path, const std::string& name) = 0;
  virtual Result<std::vector<std::string>> ListXattr(const std::string& path) = 0;
  // Whether the origin answers now, for callers that hold an answer of
  // their own (a cached file's version, a listed directory) and should give
  // it, not wait for an unreachable server (cache/origin/origin_backoff.h).
  // Default: nullptr = always ask (a local origin fails fast).
  virtual OriginBackoff* backoff() { return nullptr; }
  // Asks the origin whether it can be read now (reachable, the credentials
  // good, the prefix or base there): what MakeOrigin asks unless
  // OriginOptions::check_at_mount is false. Default: OK, nothing to ask.
  virtual Status CheckAtMount() { return Status::OK(); }
  // What is held of path's attributes is known to be stale (a read found
  // the file changed): a wrapper that keeps them (cache/kept_listings.h)
  // asks the origin again. Default: nothing held, nothing to do.
  virtual void Stale(const std::string& path) { (void)path; }
  // `stoker refresh`: whatever is held of the tree at or below prefix ("" is
  // the root), and of prefix's own entry in its directory, is asked of the
  // origin again. Default: nothing held, nothing to do.
  virtual void Refresh(const std::string& prefix) { (void)prefix; }
  // How a local origin reads file data ("io_uring", "syscall"), for stats;
  // "" where no I/O backend is involved (remote origins). Default: "".
  virtual std::string IoBackendName() const { return ""; }
};

// An origin that passes every call on to another: the base of wrappers
// that change a few (cache/kept_listings.h).
class ForwardingOrigin : public Origin {
 public:
  explicit ForwardingOrigin(std::shared_ptr<Origin> inner) : inner_(std::move(inner)) {}
  std::string Describe() const override { return inner_->Describe(); }
  std::string Location() const override { return inner_->Location(); }
  Result<struct stat> Stat(const std::string& path) override { return inner_->Stat(path); }
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override {
    return inner_->ReadDir(path, fn);
  }
  Result<std::string> ReadLink(const std::string& path) override { return inner_->ReadLink(path); }
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override {
    return inner_->Open(path);
  }
  Result<std::unique_ptr<OriginFile>> OpenVersion(const std::string& path,
                                                  const OriginIdentity& version, Via via) override {
    return inner_->OpenVersion(path, version, via);
  }
  Result<std::string> GetXattr(const std::string& path, const std::string& name) override {
    return inner_->GetXattr(path, name);
  }
  Result<std::vector<std::string>> ListXattr(const std::string& path) override {
    return inner_->ListXattr(path);
  }
  bool AsksMembers(const std::string& path, const OriginIdentity& version, uint64_t off,
                   uint64_t len) override {
    return inner_->AsksMembers(path, version, off, len);
  }
  OriginBackoff* backoff() override { return inner_->backoff(); }
  std::string IoBackendName() const override { return inner_->IoBackendName(); }
  void Stale(const std::string& path) override { inner_->Stale(path); }
  void Refresh(const std::string& prefix) override { inner_->Refresh(prefix); }
  Status CheckAtMount() override { return inner_->CheckAtMount(); }

 protected:
  const std::shared_ptr<Origin> inner_;
};

OriginIdentity IdentityFromStat(const struct stat& st);

// The code of an origin's refusal of what the options ask of it (an HTTP
// server that sends no validators, with --revalidate never): a mount
// refuses with exit 2, as for a bad argument.
inline constexpr int kOriginRefusesOptions = EMEDIUMTYPE;

// The paths every backend takes: relative, '/'-separated, no "", "." or ".."
// component, no NUL ("" is the root).
bool IsPlainRelativePath(const std::string& path);
// EINVAL naming such a path (a NUL shown as \0).
Status NotPlainRelativePath(const std::string& path);

}  // namespace stoker

namespace stoker {

// What configures the remote origins; a local origin takes only
// stall_timeout_s (a call that has not returned after that long means the
// origin hangs: cache/origin/stall_watch.h) and backoff_seconds.
// Nothing here survives a restart: each mount gives it again.
struct OriginOptions {
  // S3: the server's base URL ("http://127.0.0.1:9000"). Default: "" = AWS,
  // https://s3.REGION.amazonaws.com.
  std::string s3_endpoint;
  // S3: BUCKET in the path (ENDPOINT/BUCKET/KEY) instead of the host name.
  // Default: false, but true where the endpoint's host is an IP address or
  // localhost (no virtual host can be named there).
  bool s3_path_style = false;
  // S3: keys per ListObjectsV2 page (1..1000; a test seam). Default: 1000.
  int s3_page_size = 1000;
  // HTTP(S): a manifest file ("PATH SIZE" lines) listing the tree. Default:
  // "" = directory listings from the server (nginx autoindex).
  std::string manifest;
  // Remote origins: whether MakeOrigin asks the origin whether it can be
  // read (Origin::CheckAtMount). false: nothing is asked until a request or
  // a CheckAtMount call needs it (a mount with --revalidate never whose root
  // listing the cache keeps asks nothing). Default: true.
  bool check_at_mount = true;
  // Seconds a directory listing is kept in memory; the mount passes its
  // revalidation interval. 0 = every lookup asks the server; kNeverSeconds
  // (util/duration.h) = kept for the mount's life, and an HTTP server must
  // send ETag or Last-Modified. Default: 60.
  uint64_t listing_ttl_seconds = 60;
  // Seconds to connect; seconds a transfer may stall; retries of a failed
  // request (with exponential backoff). Default: 10, 30, 5.
  long connect_timeout_s = 10;
  long stall_timeout_s = 30;
  int retries = 5;
  // Seconds after a request failed to reach the server during which
  // lookups, opens and listings the cache can answer (cached files,
  // directories listed before) are answered without asking it, once per
  // such period one of them asks (OriginBackoff). 0 = always ask. Default: 5.
  long backoff_seconds = 5;
  // Local origins: how file data is read (--io-backend). Default: auto.
  IoBackendKind io_backend = IoBackendKind::kAuto;
};

// Makes the origin named by spec: an absolute or relative directory path
// (local), s3://BUCKET[/PREFIX] or http(s)://HOST[/PATH]. Checks that the
// origin can be read now, and says why not in one line ("origin '/x': No
// such file or directory", "s3 bucket 'b' does not exist").
Result<std::shared_ptr<Origin>> MakeOrigin(const std::string& spec,
                                           const OriginOptions& options = OriginOptions());

class IoBackend;
// As above, but a local origin reads file data through io (tests inject a
// faulty backend). REQUIRES: io != nullptr.
Result<std::shared_ptr<Origin>> MakeOrigin(const std::string& spec, std::shared_ptr<IoBackend> io,
                                           const OriginOptions& options = OriginOptions());

}  // namespace stoker
