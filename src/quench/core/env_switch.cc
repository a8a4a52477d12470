#include "quench/core/env_switch.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "quench/core/error.h"

namespace quench {

std::string env_switch(const char* name, std::initializer_list<const char*> allowed) {
  QUENCH_REQUIRE(allowed.size() > 0, "env_switch ", name, ": no allowed values");
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return *allowed.begin();
  std::string options;
  for (const char* option : allowed) {
    if (std::string(value) == option) return value;
    options += std::string(options.empty() ? "" : ", ") + option;
  }
  fail(str_cat(name, "='", value, "' is not supported; allowed: ", options, " (or unset)"));
}

int env_switch_int(const char* name, int min, int max, int unset) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return unset;
  // Digits only: strtol alone would also take leading blanks and signs.
  const bool digits = std::all_of(value, value + std::strlen(value), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  const long parsed = digits && std::strlen(value) <= 9 ? std::strtol(value, nullptr, 10) : -1;
  if (!digits || parsed < min || parsed > max) {
    fail(
        str_cat(name, "='", value, "' is not supported; allowed: ", min, "..", max, " (or unset)"));
  }
  return static_cast<int>(parsed);
}

}  // namespace quench
