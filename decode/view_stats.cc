#include "decode/view_stats.h"

namespace stoker {

bool ViewErrorList::Add(const std::string& file, uint64_t offset, const std::string& message) {
  std::string line = file + ": offset " + std::to_string(offset) + ": " + message;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  std::lock_guard<std::mutex> l(mu_);
  if (!seen_.insert(line).second) return false;
  lines_.push_back(std::move(line));
  if (lines_.size() > kMaxErrors) {
    seen_.erase(lines_.front());
    lines_.pop_front();
  }
  return true;
}

std::string ViewErrorList::Text() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  for (const std::string& line : lines_) {
    out += line;
    out += '\n';
  }
  return out;
}

size_t ViewErrorList::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return lines_.size();
}

}  // namespace stoker
