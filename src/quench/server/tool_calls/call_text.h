// Reading the text of tool calls in model output: where a JSON object ends, what a call object
// says, and the whitespace and partial-marker checks the parsers share.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "quench/server/tool_calls/tool_call.h"

namespace quench {

// One past the closing brace of the JSON object that starts at text[begin] ('{'), or npos when
// the text ends first. Braces inside strings do not count; whether the object is valid JSON is
// left to the parse.
size_t json_object_end(std::string_view text, size_t begin);

// The model's JSON text parsed, keys in its order; discarded (is_discarded()) where it is not
// JSON or nests deeper than kMaxCallDepth arrays and objects (the calls' arguments are dumped by
// a recursive serializer, so their depth is bounded first: a deeper text is not a call).
inline constexpr int kMaxCallDepth = 128;
nlohmann::ordered_json parse_call_json(std::string_view text);

// {"name": "...", "arguments" or "parameters": {...}} (other keys ignored, whitespace around
// allowed) to a call; nullopt when `text` is not such an object. Absent arguments are {}; a string
// holding a JSON object (double-encoded arguments) is taken as that object's text.
std::optional<FunctionCall> parse_function_call(std::string_view text);

// The length of the longest proper prefix of `marker` that `text` ends with: bytes that the next
// output may complete into the marker, so a stream holds them back.
size_t partial_marker_suffix(std::string_view text, std::string_view marker);

// The first position at or after `pos` that is not a blank (space, tab, CR, LF); text.size()
// where only blanks follow.
size_t skip_blank(std::string_view text, size_t pos);
bool is_blank(std::string_view text);
std::string_view trim_blank(std::string_view text);

}  // namespace quench
