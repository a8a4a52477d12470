// Captures quench log lines for the lifetime of the object (tests check warnings and info lines).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "quench/core/log.h"

namespace quench::testing_support {

class LogCapture {
 public:
  struct Line {
    LogLevel level;
    std::string message;
  };

  LogCapture()
      : previous_(set_log_sink([this](LogLevel level, const std::string& message) {
          lines_.push_back({level, message});
        })) {}
  ~LogCapture() { set_log_sink(std::move(previous_)); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  const std::vector<Line>& lines() const { return lines_; }
  int count(LogLevel level) const {
    int n = 0;
    for (const Line& line : lines_)
      n += line.level == level ? 1 : 0;
    return n;
  }
  // Every message of `level`, joined by newlines.
  std::string text(LogLevel level) const {
    std::string all;
    for (const Line& line : lines_) {
      if (line.level == level) all += line.message + "\n";
    }
    return all;
  }

 private:
  std::vector<Line> lines_;
  LogSink previous_;
};

}  // namespace quench::testing_support
