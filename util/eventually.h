// Eventually: waits in a unit test for something other threads do. The
// bound only keeps a broken build from hanging the run; it is not a speed
// requirement. Test code only.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace stoker::testing {

// Polls pred every millisecond until it holds; false after a minute.
inline bool Eventually(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace stoker::testing
