// Command-line flag parsing shared by the `quench` subcommands: splitting argv into flag ->
// value, parsing numbers, and checking a value against the allowed ones. Every failure throws
// UsageError naming the flag, the bad value and what is allowed.
#pragma once

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include "quench/core/error.h"

namespace quench {

// A bad command line (exit code 2), as opposed to a run that fails (exit code 1).
struct UsageError : Error {
  using Error::Error;
};

// Flag name ("--page-size") -> whether the flag takes a value.
using FlagTable = std::map<std::string_view, bool>;

// Splits argv[1, argc) into flag -> value ("" for a flag that takes none). A value is given as
// "--flag value" or "--flag=value"; a repeated flag keeps its last value. `usage` is appended to
// the errors for an unknown flag and a missing value.
std::map<std::string, std::string> split_flags(int argc, char** argv, const FlagTable& known,
                                               const char* usage);

// Parses all of `text` as a base-10 integer >= min_value.
template <typename Int>
Int parse_int_flag(const std::string& flag, const std::string& text, Int min_value) {
  Int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min_value) {
    throw UsageError(str_cat(flag, " '", text, "' must be an integer >= ", min_value));
  }
  return value;
}

// Parses all of `text` as a base-10 integer in [min_value, max_value].
template <typename Int>
Int parse_int_flag(const std::string& flag, const std::string& text, Int min_value, Int max_value) {
  Int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min_value ||
      value > max_value) {
    throw UsageError(
        str_cat(flag, " '", text, "' must be an integer in [", min_value, ", ", max_value, "]"));
  }
  return value;
}

// Parses all of `text` as a finite decimal number.
double parse_number_flag(const std::string& flag, const std::string& text);

// Throws "<flag> '<text>' is not supported; allowed: <allowed>" unless `value` (parsed from
// `text`) is one of `allowed`.
void require_allowed_flag_value(const std::string& flag, const std::string& text, int64_t value,
                                std::initializer_list<int64_t> allowed);
// The same for a flag whose value is one of a set of words.
void require_allowed_flag_value(const std::string& flag, const std::string& text,
                                std::initializer_list<std::string_view> allowed);

// Runs a quench parser on a flag's value (parse_kv_layout, ...), prefixing its error with the
// flag and turning it into a usage error.
template <typename Parse>
auto parse_flag_value(const std::string& flag, const Parse& parse) {
  try {
    return parse();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(str_cat(flag, ": ", e.what()));
  }
}

}  // namespace quench
