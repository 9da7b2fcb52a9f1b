// Status and Result<T>: how stoker reports failures of the world.
//
// A Status is either OK or carries an errno-style code and a one-line message
// that names the problem ("origin 'x': Permission denied"). The code is what
// reaches FUSE callers; the message is what reaches logs and CLI users.
// A broken invariant is not a Status: it aborts (see STOKER_CHECK).
//
// Thread-safety: values; safe to copy and move between threads.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace stoker {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  static Status OK() { return Status(); }
  // code is a positive errno value (EIO, ENOENT, ENOSPC, ...).
  static Status Error(int code, std::string msg) { return Status(code, std::move(msg)); }
  // From the current errno, prefixing what was being done: "open 'x'".
  static Status FromErrno(const std::string& what) {
    int e = errno;
    return Status(e ? e : EIO, what + ": " + std::strerror(e ? e : EIO));
  }
  static Status FromErrno(int e, const std::string& what) {
    return Status(e ? e : EIO, what + ": " + std::strerror(e ? e : EIO));
  }
  static Status NotFound(std::string msg) { return Status(ENOENT, std::move(msg)); }
  static Status Invalid(std::string msg) { return Status(EINVAL, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(EIO, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(EBADMSG, std::move(msg)); }
  static Status NoSpace(std::string msg) { return Status(ENOSPC, std::move(msg)); }
  static Status Busy(std::string msg) { return Status(EBUSY, std::move(msg)); }

  bool ok() const { return code_ == 0; }
  int code() const { return code_; }
  const std::string& message() const { return msg_; }
  std::string ToString() const { return ok() ? "OK" : msg_; }

 private:
  Status(int code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  int code_ = 0;
  std::string msg_;
};

// Result<T>: a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) {
      std::fprintf(stderr, "stoker: Result constructed from OK status\n");
      std::abort();
    }
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace stoker

// A broken invariant: print where and why, then abort. Never used for
// failures of the world (I/O errors, bad input); those are Status.
#define STOKER_CHECK(cond, msg)                                                                \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "stoker: invariant failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, \
                   #cond, msg);                                                                \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

#define STOKER_RETURN_IF_ERROR(expr) \
  do {                               \
    ::stoker::Status _st = (expr);   \
    if (!_st.ok()) return _st;       \
  } while (0)

#define STOKER_CONCAT_INNER(a, b) a##b
#define STOKER_CONCAT(a, b) STOKER_CONCAT_INNER(a, b)
#define STOKER_ASSIGN_OR_RETURN(lhs, expr) \
  STOKER_ASSIGN_OR_RETURN_IMPL(STOKER_CONCAT(_res_, __LINE__), lhs, expr)
#define STOKER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
