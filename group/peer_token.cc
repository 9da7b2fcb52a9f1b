#include "group/peer_token.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "util/log.h"

namespace stoker {
namespace {

std::string Trimmed(const std::string& text) {
  const size_t line_end = text.find('\n');
  std::string line = text.substr(0, line_end);
  const char* ws = " \t\r\v\f";
  const size_t first = line.find_first_not_of(ws);
  if (first == std::string::npos) return "";
  return line.substr(first, line.find_last_not_of(ws) - first + 1);
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

Result<std::unique_ptr<PeerToken>> PeerToken::Open(const std::string& path) {
  std::unique_ptr<PeerToken> t(new PeerToken(path));
  MutexLock l(t->mu_);
  STOKER_RETURN_IF_ERROR(t->ReloadLocked(/*force=*/true));
  return t;
}

Status PeerToken::ReloadLocked(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - looked_at_ < recheck_) return Status::OK();
  looked_at_ = now;
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) {
    return Status::FromErrno("--peer-token-file '" + path_ + "'");
  }
  const FileId id{st.st_dev, st.st_ino, st.st_size,
                  static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  if (!force && id == id_) return Status::OK();
  std::ifstream in(path_);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in) return Status::FromErrno("--peer-token-file '" + path_ + "'");
  id_ = id;  // judged once per change, whatever the verdict
  const std::string token = Trimmed(text.str());
  if (token.size() < kMinBytes || token.size() > kMaxBytes) {
    Status bad = Status::Invalid("--peer-token-file '" + path_ + "' must hold a token of " +
                                 std::to_string(kMinBytes) + " to " + std::to_string(kMaxBytes) +
                                 " bytes on its first line");
    if (!current_.empty()) LOG_WARN("{}; keeping the token read before", bad.message());
    return bad;
  }
  if (token != current_) {
    if (!current_.empty()) LOG_INFO("--peer-token-file changed; the old token stays valid a while");
    previous_ = std::move(current_);
    current_ = token;
    changed_at_ = now;
  }
  return Status::OK();
}

std::string PeerToken::Current() {
  MutexLock l(mu_);
  (void)ReloadLocked(false);
  return current_;
}

bool PeerToken::Matches(std::string_view presented) {
  MutexLock l(mu_);
  (void)ReloadLocked(false);
  const bool current = ConstantTimeEquals(presented, current_);
  const bool in_grace =
      !previous_.empty() && std::chrono::steady_clock::now() - changed_at_ < kGrace;
  const bool previous = ConstantTimeEquals(presented, previous_);
  return current || (in_grace && previous);
}

void PeerToken::set_recheck_interval(std::chrono::steady_clock::duration d) {
  MutexLock l(mu_);
  recheck_ = d;
}

}  // namespace stoker
