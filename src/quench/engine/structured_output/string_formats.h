// Structured output: the JSON Schema string formats that quench enforces, as patterns
// (string_pattern.h). JSON Schema makes "format" an annotation unless a validator opts in; a
// structured-output client that writes "format": "date" wants a date, so these formats are
// enforced where a string schema has no "pattern" of its own (the pattern wins, and the format
// stays an annotation). Every other format name is an annotation, as before.
#pragma once

#include <string>

namespace quench {

// The pattern that admits exactly the strings of `format` (RFC 3339 date, time and date-time,
// RFC 4122 uuid, ipv4 dotted quads; email as local@domain.tld without spaces), or "" for a
// format that is not enforced.
std::string string_format_pattern(const std::string& format);

}  // namespace quench
