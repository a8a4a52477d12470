// quench::Error is the one exception type library code throws for bad input or a failed
// runtime call. Its message names the bad value and, where there is a finite set, the allowed
// ones. Library code never aborts and never clamps silently.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace quench {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates any streamable values into one string: str_cat("page_size=", 7).
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

[[noreturn]] inline void fail(const std::string& message) {
  throw Error(message);
}

}  // namespace quench

// QUENCH_REQUIRE(cond, parts...): throws quench::Error(str_cat(parts...)) when cond is false.
// The message parts are only evaluated on failure.
#define QUENCH_REQUIRE(cond, ...)                                \
  do {                                                           \
    if (!(cond)) ::quench::fail(::quench::str_cat(__VA_ARGS__)); \
  } while (false)
