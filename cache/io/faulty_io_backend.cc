// IoBackend that wraps another and injects the faults of a FaultSpec list:
// errors or a flipped byte on the Nth matching operation. Tests use it to
// make an origin or a cache file fail on demand.
#include <atomic>
#include <cerrno>
#include <cstring>

#include "cache/io/io_backend_impl.h"

namespace stoker {
namespace {

class FaultyIoBackend final : public IoBackend {
 public:
  FaultyIoBackend(std::unique_ptr<IoBackend> inner, std::vector<FaultSpec> faults)
      : inner_(std::move(inner)) {
    STOKER_CHECK(inner_ != nullptr, "faulty backend needs an inner backend");
    for (FaultSpec& f : faults) {
      if (f.every_nth < 1) f.every_nth = 1;
      rules_.push_back(std::make_unique<Rule>(std::move(f)));
    }
  }

  std::string Name() const override { return "faulty(" + inner_->Name() + ")"; }

  Result<size_t> Read(int fd, void* buf, size_t len, off_t off) override {
    const FaultSpec* f = Fire(FaultSpec::kRead, fd);
    if (f != nullptr && !Corrupts(*f)) return Injected(*f, "read", fd, off);
    Result<size_t> r = inner_->Read(fd, buf, len, off);
    if (f != nullptr && r.ok()) Flip(buf, *r);
    return r;
  }

  Status Write(int fd, const void* buf, size_t len, off_t off) override {
    const FaultSpec* f = Fire(FaultSpec::kWrite, fd);
    if (f == nullptr) return inner_->Write(fd, buf, len, off);
    if (!Corrupts(*f)) return Injected(*f, "write", fd, off);
    // A corrupting write lands a wrong byte on disk, as a torn write would.
    std::string copy(static_cast<const char*>(buf), len);
    Flip(copy.data(), copy.size());
    return inner_->Write(fd, copy.data(), copy.size(), off);
  }

  void ReadBatch(std::vector<ReadOp>& ops) override {
    std::vector<ReadOp> pass;   // ops the inner backend runs, by value
    std::vector<size_t> where;  // their index in ops
    std::vector<bool> corrupt;
    for (size_t i = 0; i < ops.size(); ++i) {
      const FaultSpec* f = Fire(FaultSpec::kRead, ops[i].fd);
      if (f != nullptr && !Corrupts(*f)) {
        ops[i].done = 0;
        ops[i].status = Injected(*f, "read", ops[i].fd, ops[i].off);
        continue;
      }
      pass.push_back(ops[i]);
      where.push_back(i);
      corrupt.push_back(f != nullptr);
    }
    inner_->ReadBatch(pass);
    for (size_t j = 0; j < pass.size(); ++j) {
      if (corrupt[j] && pass[j].status.ok()) Flip(pass[j].buf, pass[j].done);
      ops[where[j]] = std::move(pass[j]);
    }
  }

 private:
  struct Rule {
    explicit Rule(FaultSpec s) : spec(std::move(s)) {}
    FaultSpec spec;
    std::atomic<uint64_t> matches{0};
  };

  static bool Corrupts(const FaultSpec& f) { return f.corrupt || f.error == 0; }

  static void Flip(void* buf, size_t len) {
    if (len > 0) static_cast<unsigned char*>(buf)[len / 2] ^= 0xff;
  }

  static Status Injected(const FaultSpec& f, const char* op, int fd, off_t off) {
    Status s = IoErrorStatus(f.error, op, fd, off < 0 ? 0 : static_cast<uint64_t>(off));
    return Status::Error(s.code(), s.message() + " (injected)");
  }

  // Counts the op against every rule it matches; returns the first rule whose
  // count reached a multiple of its every_nth, or nullptr.
  const FaultSpec* Fire(FaultSpec::Op op, int fd) {
    const FaultSpec* fired = nullptr;
    std::string path;
    bool have_path = false;
    for (auto& rule : rules_) {
      if (rule->spec.op != op) continue;
      if (!rule->spec.path_substr.empty()) {
        if (!have_path) {
          path = DescribeFd(fd);
          have_path = true;
        }
        if (path.find(rule->spec.path_substr) == std::string::npos) continue;
      }
      uint64_t n = rule->matches.fetch_add(1, std::memory_order_relaxed) + 1;
      if (fired == nullptr && n % static_cast<uint64_t>(rule->spec.every_nth) == 0) {
        fired = &rule->spec;
      }
    }
    return fired;
  }

  std::unique_ptr<IoBackend> inner_;
  std::vector<std::unique_ptr<Rule>> rules_;  // fixed after construction
};

}  // namespace

std::unique_ptr<IoBackend> MakeFaultyIoBackend(std::unique_ptr<IoBackend> inner,
                                               std::vector<FaultSpec> faults) {
  return std::make_unique<FaultyIoBackend>(std::move(inner), std::move(faults));
}

}  // namespace stoker
