// Logging: one place. Every component logs through spdlog's default logger,
// which the daemon points at stderr (foreground) or CACHE_DIR/stoker.log
// (daemonized). Levels: error = something a user must see; warn = a failure
// of the world that was handled (origin error, corrupt chunk re-fetched);
// info = lifecycle (mount, unmount, eviction rounds); debug = per request.
// Never log credentials or file contents.
// Thread-safety: spdlog's loggers are thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace stoker {

// Sets the default logger. path empty = stderr. level: "error", "warn",
// "info", "debug".
void InitLogging(const std::string& path, const std::string& level);

}  // namespace stoker

#define LOG_ERROR(...) spdlog::error(__VA_ARGS__)
#define LOG_WARN(...) spdlog::warn(__VA_ARGS__)
#define LOG_INFO(...) spdlog::info(__VA_ARGS__)
#define LOG_DEBUG(...) spdlog::debug(__VA_ARGS__)
