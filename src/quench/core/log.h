// Minimal levelled logging to stderr: "INFO quench: ...". Tests capture it through a sink.
#pragma once

#include <functional>
#include <string>

namespace quench {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

void log(LogLevel level, const std::string& message);
inline void log_info(const std::string& message) {
  log(LogLevel::kInfo, message);
}
inline void log_warning(const std::string& message) {
  log(LogLevel::kWarning, message);
}
inline void log_error(const std::string& message) {
  log(LogLevel::kError, message);
}

// Replaces the stderr writer (nullptr restores it). Returns the previous sink.
using LogSink = std::function<void(LogLevel, const std::string&)>;
LogSink set_log_sink(LogSink sink);

const char* log_level_name(LogLevel level);

}  // namespace quench
