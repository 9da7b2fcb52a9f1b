#include "util/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace stoker {

void InitLogging(const std::string& path, const std::string& level) {
  std::shared_ptr<spdlog::logger> logger;
  if (path.empty()) {
    logger = spdlog::stderr_logger_mt("stoker");
  } else {
    logger = spdlog::basic_logger_mt("stoker", path);
  }
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l [%t] %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  spdlog::flush_every(std::chrono::seconds(2));
}

}  // namespace stoker
