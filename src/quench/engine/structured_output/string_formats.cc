#include "quench/engine/structured_output/string_formats.h"

namespace quench {
namespace {

// RFC 3339 full-date: each month's days (February's 29 in any year: a leap-year rule is not a
// regular language worth its size).
constexpr const char* kDate =
    "\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|"
    "02-(?:0[1-9]|[12]\\d))";
// RFC 3339 full-time: a leap second allowed, a fraction of any length, the offset required.
constexpr const char* kTime =
    "(?:[01]\\d|2[0-3]):[0-5]\\d:(?:[0-5]\\d|60)(?:\\.\\d+)?(?:[Zz]|[+-](?:[01]\\d|2[0-3]):[0-5]"
    "\\d)";
constexpr const char* kOctet = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";

}  // namespace

std::string string_format_pattern(const std::string& format) {
  if (format == "date") return std::string("^") + kDate + "$";
  if (format == "time") return std::string("^") + kTime + "$";
  if (format == "date-time") return std::string("^") + kDate + "[Tt]" + kTime + "$";
  if (format == "uuid") {
    return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
  }
  if (format == "ipv4") return std::string("^(?:") + kOctet + "\\.){3}" + kOctet + "$";
  if (format == "email") return "^[^\\s@\"\\\\<>(),;:\\[\\]]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)+$";
  return "";
}

}  // namespace quench
