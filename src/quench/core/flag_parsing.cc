#include "quench/core/flag_parsing.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

namespace quench {
namespace {

template <typename T>
[[noreturn]] void throw_not_allowed(const std::string& flag, const std::string& text,
                                    std::initializer_list<T> allowed) {
  std::string list;
  for (const T& value : allowed)
    list += str_cat(list.empty() ? "" : ", ", value);
  throw UsageError(str_cat(flag, " '", text, "' is not supported; allowed: ", list));
}

}  // namespace

std::map<std::string, std::string> split_flags(int argc, char** argv, const FlagTable& known,
                                               const char* usage) {
  std::map<std::string, std::string> values;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> value;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    const auto flag = known.find(arg);
    if (flag == known.end()) {
      throw UsageError(str_cat("unknown argument '", argv[i], "'. ", usage));
    }
    if (flag->second && !value) {
      if (i + 1 >= argc) throw UsageError(str_cat(arg, " needs a value. ", usage));
      value = argv[++i];
    }
    if (!flag->second && value) throw UsageError(str_cat(arg, " takes no value"));
    values[arg] = value.value_or("");
  }
  return values;
}

void require_allowed_flag_value(const std::string& flag, const std::string& text, int64_t value,
                                std::initializer_list<int64_t> allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    throw_not_allowed(flag, text, allowed);
  }
}

void require_allowed_flag_value(const std::string& flag, const std::string& text,
                                std::initializer_list<std::string_view> allowed) {
  if (std::find(allowed.begin(), allowed.end(), text) == allowed.end()) {
    throw_not_allowed(flag, text, allowed);
  }
}

double parse_number_flag(const std::string& flag, const std::string& text) {
  double value = NAN;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    throw UsageError(str_cat(flag, " '", text, "' must be a finite number"));
  }
  return value;
}

}  // namespace quench
