#include "quench/core/env_switch.h"

#include <cstdlib>

#include "quench/core/error.h"

namespace quench {

std::string env_switch(const char* name, std::initializer_list<const char*> allowed) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return "";
  std::string options;
  for (const char* option : allowed) {
    if (std::string(value) == option) return value;
    options += std::string(options.empty() ? "" : ", ") + option;
  }
  fail(str_cat(name, "='", value, "' is not supported; allowed: ", options, " (or unset)"));
}

}  // namespace quench
