#include "quench/server/tool_calls/call_text.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "quench/server/bounded_json.h"

namespace quench {
namespace {

constexpr std::string_view kBlank = " \t\r\n";

// Model output may hold invalid UTF-8; the arguments text must still be a valid JSON string.
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

size_t json_object_end(std::string_view text, size_t begin) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

nlohmann::ordered_json parse_call_json(std::string_view text) {
  BoundedJson call = parse_bounded_json(text, kMaxCallDepth);
  if (!call.error.empty())
    return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  return std::move(call.value);
}

std::optional<FunctionCall> parse_function_call(std::string_view text) {
  // Ordered, so that the arguments keep the model's key order.
  const auto j = parse_call_json(text);
  if (!j.is_object() || !j.contains("name") || !j.at("name").is_string()) return std::nullopt;
  FunctionCall call{j.at("name").get<std::string>(), "{}"};
  if (call.name.empty()) return std::nullopt;
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  if (!j.contains(key) || j.at(key).is_null()) return call;
  const nlohmann::ordered_json& args = j.at(key);
  if (args.is_object()) {
    call.arguments = dump(args);
  } else if (args.is_string()) {
    const auto inner = parse_call_json(args.get<std::string>());
    if (!inner.is_object()) return std::nullopt;
    call.arguments = dump(inner);
  } else {
    return std::nullopt;
  }
  return call;
}

size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

size_t skip_blank(std::string_view text, size_t pos) {
  const size_t next = text.find_first_not_of(kBlank, pos);
  return next == std::string_view::npos ? text.size() : next;
}

bool is_blank(std::string_view text) {
  return text.find_first_not_of(kBlank) == std::string_view::npos;
}

std::string_view trim_blank(std::string_view text) {
  const size_t first = text.find_first_not_of(kBlank);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kBlank) - first + 1);
}

}  // namespace quench
