// ControlledOrigin: a real origin with two test controls on top: fail every
// call with an errno (an unreachable NAS), and hold reads (and, if asked,
// stats) at a gate (a slow or hung one). It is also the cache's
// DerivedSource, so a test can make its files derived ones (a decoded
// view's) and say which read as errors. Test-only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "cache/derived_source.h"
#include "cache/origin/origin.h"
#include "cache/origin/origin_backoff.h"

namespace stoker::testing {

class ControlledOrigin : public Origin, public DerivedSource {
 public:
  explicit ControlledOrigin(std::shared_ptr<Origin> inner) : inner_(std::move(inner)) {}

  void SetFailure(int code) { fail_ = code; }
  void CloseGate() {
    std::lock_guard<std::mutex> l(mu_);
    gate_closed_ = true;
  }
  void OpenGate() {
    std::lock_guard<std::mutex> l(mu_);
    gate_closed_ = false;
    cv_.notify_all();
  }
  int waiting() const { return waiting_.load(); }
  // Whether Stat waits at the gate too.
  void GateStats(bool on) { gate_stats_ = on; }
  // Gives the origin a back-off that its Stat calls report to, as a remote
  // origin's requests do.
  void UseBackoff(int64_t backoff_ns, OriginBackoff::Clock clock) {
    backoff_ = std::make_unique<OriginBackoff>(backoff_ns, std::move(clock));
  }
  int stat_calls() const { return stat_calls_.load(); }
  // Makes every path a derived one on device dev (kDerivedDevBit set), as a
  // decoded view's files are: Stat and Identity give that st_dev. 0: plain.
  void DeriveAs(uint64_t dev) { derived_dev_ = dev; }
  // Makes every derived file read as EIO from byte `from` on (a view's
  // record that did not decode); UINT64_MAX: none.
  void RefuseReadsFrom(uint64_t from) { refuse_from_ = from; }
  int check_reads() const { return check_reads_.load(); }
  bool IsDerived(const std::string& path) const override { return derived_dev_.load() != 0; }
  uint64_t DerivedDevice(const std::string& path) const override { return derived_dev_.load(); }
  Status CheckRead(const std::string& path, uint64_t off, uint64_t len) override {
    check_reads_++;
    if (off + len <= refuse_from_.load()) return Status::OK();
    return Status::Error(EIO, "'" + path + "' holds a record that did not decode");
  }
  bool HasUnreadableRanges(const std::string& path) override {
    return refuse_from_.load() != UINT64_MAX;
  }
  Result<struct stat> StatFor(const std::string& path, Urgency) override { return Stat(path); }
  Status ReadDirFor(const std::string& path, Urgency,
                    const std::function<bool(const OriginDirEntry&)>& fn) override {
    return ReadDir(path, fn);
  }
  void Expedite(const std::string& path, Urgency who) override {
    expedited_++;
    last_expedite_ = who;
  }
  // Expedite calls, and whom the last one was for.
  int expedited() const { return expedited_.load(); }
  Urgency last_expedite() const { return last_expedite_.load(); }
  // Whom the cache said its last run read was for (ReadAtAligned).
  Urgency last_read_for() const { return last_read_for_.load(); }
  OriginBackoff* backoff() override { return backoff_.get(); }

  std::string Describe() const override { return "controlled:" + inner_->Describe(); }
  Result<struct stat> Stat(const std::string& path) override {
    stat_calls_++;
    if (gate_stats_) PassGate();
    Result<struct stat> st =
        fail_.load() ? Result<struct stat>(Down(fail_.load())) : inner_->Stat(path);
    if (backoff_) backoff_->Record(st.ok() ? Status::OK() : st.status());
    if (st.ok() && derived_dev_.load() != 0) st->st_dev = static_cast<dev_t>(derived_dev_.load());
    return st;
  }
  Status ReadDir(const std::string& path,
                 const std::function<bool(const OriginDirEntry&)>& fn) override {
    if (int f = fail_.load()) return Down(f);
    return inner_->ReadDir(path, fn);
  }
  Result<std::string> ReadLink(const std::string& path) override {
    if (int f = fail_.load()) return Down(f);
    return inner_->ReadLink(path);
  }
  Result<std::unique_ptr<OriginFile>> Open(const std::string& path) override {
    if (int f = fail_.load()) return Down(f);
    STOKER_ASSIGN_OR_RETURN(auto file, inner_->Open(path));
    return std::unique_ptr<OriginFile>(new File(this, std::move(file)));
  }
  Result<std::string> GetXattr(const std::string& path, const std::string& name) override {
    return inner_->GetXattr(path, name);
  }
  Result<std::vector<std::string>> ListXattr(const std::string& path) override {
    return inner_->ListXattr(path);
  }

 private:
  static Status Down(int code) { return Status::Error(code, "origin is down (test)"); }

  class File : public OriginFile {
   public:
    File(ControlledOrigin* o, std::unique_ptr<OriginFile> f) : o_(o), f_(std::move(f)) {}
    Result<size_t> ReadAt(void* buf, size_t len, uint64_t off) override {
      o_->PassGate();
      if (int f = o_->fail_.load()) return Down(f);
      return f_->ReadAt(buf, len, off);
    }
    Result<size_t> ReadAtAligned(void* buf, size_t len, uint64_t off, Urgency who) override {
      o_->last_read_for_ = who;
      o_->PassGate();
      if (int f = o_->fail_.load()) return Down(f);
      return f_->ReadAtAligned(buf, len, off, who);
    }
    Result<OriginIdentity> Identity() override {
      if (int f = o_->fail_.load()) return Down(f);
      Result<OriginIdentity> id = f_->Identity();
      if (id.ok() && o_->derived_dev_.load() != 0) id->dev = o_->derived_dev_.load();
      return id;
    }

   private:
    ControlledOrigin* o_;
    std::unique_ptr<OriginFile> f_;
  };

  void PassGate() {
    std::unique_lock<std::mutex> l(mu_);
    if (!gate_closed_) return;
    waiting_++;
    cv_.wait(l, [&] { return !gate_closed_; });
    waiting_--;
  }

  std::shared_ptr<Origin> inner_;
  std::atomic<int> fail_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool gate_closed_ = false;
  std::atomic<bool> gate_stats_{false};
  std::atomic<int> waiting_{0};
  std::unique_ptr<OriginBackoff> backoff_;
  std::atomic<int> stat_calls_{0};
  std::atomic<uint64_t> derived_dev_{0};
  std::atomic<uint64_t> refuse_from_{UINT64_MAX};
  std::atomic<int> check_reads_{0};
  std::atomic<int> expedited_{0};
  std::atomic<Urgency> last_expedite_{Urgency::kReader};
  std::atomic<Urgency> last_read_for_{Urgency::kReader};
};

}  // namespace stoker::testing
