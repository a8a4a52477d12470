#include "quench/core/log.h"

#include <cstdio>
#include <mutex>
#include <utility>

namespace quench {
namespace {

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}

LogSink& current_sink() {
  static LogSink sink;
  return sink;
}

}  // namespace

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

void log(LogLevel level, const std::string& message) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (current_sink()) {
    current_sink()(level, message);
    return;
  }
  std::fprintf(stderr, "%s quench: %s\n", log_level_name(level), message.c_str());
}

LogSink set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  return std::exchange(current_sink(), std::move(sink));
}

}  // namespace quench
