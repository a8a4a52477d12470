#include "quench/server/chat_messages.h"

#include "quench/core/error.h"
#include "quench/core/json_file.h"
#include "quench/server/api_error.h"

namespace quench {
namespace {

using Json = nlohmann::ordered_json;

std::string content_text(const Json& m, const std::string& at, bool may_be_null) {
  if (!present(m, "content")) {
    if (may_be_null) return {};
    bad_request(str_cat(at,
                        ".content is required (a string or a list of text parts; null only for an "
                        "assistant message)"));
  }
  const Json& content = m.at("content");
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request(str_cat(at, ".content must be a string or a list of text parts"));
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part.at("text").is_string()) {
      bad_request(
          str_cat(at, ".content parts must be {\"type\": \"text\", \"text\": ...} (text only)"));
    }
    text += part.at("text").get<std::string>();
  }
  return text;
}

Json tool_call(const Json& call, const std::string& at) {
  if (!call.is_object())
    bad_request(str_cat(at, " must be {\"id\", \"type\": \"function\", \"function\": {...}}"));
  if (present(call, "type") &&
      (!call.at("type").is_string() || call.at("type").get<std::string>() != "function"))
    bad_request(str_cat(at, ".type must be \"function\", got ", call.at("type").dump()));
  if (present(call, "id") && !call.at("id").is_string())
    bad_request(str_cat(at, ".id must be a string"));
  if (!present(call, "function") || !call.at("function").is_object())
    bad_request(str_cat(at, ".function must be {\"name\", \"arguments\"}"));
  const Json& f = call.at("function");
  if (!present(f, "name") || !f.at("name").is_string())
    bad_request(str_cat(at, ".function.name must be a string"));
  Json out = call;
  out["type"] = "function";
  if (!present(f, "arguments")) {
    out["function"]["arguments"] = Json::object();
  } else if (f.at("arguments").is_string()) {
    Json args = Json::parse(f.at("arguments").get<std::string>(), nullptr, false);
    if (args.is_discarded()) {
      bad_request(str_cat(at, ".function.arguments must be a string of JSON (an object), got ",
                          f.at("arguments").dump()));
    }
    out["function"]["arguments"] = std::move(args);
  } else if (!f.at("arguments").is_object()) {
    bad_request(str_cat(at, ".function.arguments must be a string of JSON (an object)"));
  }
  return out;
}

}  // namespace

Json template_messages(const Json& messages) {
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string at = str_cat("messages[", i, "]");
    if (!m.is_object() || !m.contains("role") || !m.at("role").is_string())
      bad_request(str_cat(at, " needs a string 'role'"));
    const std::string role = m.at("role").get<std::string>();
    Json message = {{"role", role}, {"content", content_text(m, at, role == "assistant")}};
    for (const char* key : {"name", "tool_call_id", "reasoning_content"}) {
      if (!present(m, key)) continue;
      if (!m.at(key).is_string()) bad_request(str_cat(at, ".", key, " must be a string"));
      message[key] = m.at(key);
    }
    if (present(m, "tool_calls")) {
      if (role != "assistant")
        bad_request(
            str_cat(at, ".tool_calls is only allowed in an assistant message, not '", role, "'"));
      if (!m.at("tool_calls").is_array())
        bad_request(str_cat(at, ".tool_calls must be a list of tool calls"));
      Json calls = Json::array();
      for (size_t k = 0; k < m.at("tool_calls").size(); ++k)
        calls.push_back(tool_call(m.at("tool_calls")[k], str_cat(at, ".tool_calls[", k, "]")));
      if (!calls.empty()) message["tool_calls"] = std::move(calls);  // [] means none
    }
    out.push_back(std::move(message));
  }
  return out;
}

}  // namespace quench
