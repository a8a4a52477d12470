#include "quench/server/tool_calls/tool_request.h"

#include "quench/core/error.h"
#include "quench/core/json_file.h"
#include "quench/server/api_error.h"

namespace quench {
namespace {

using Json = nlohmann::ordered_json;

void check_tool(const Json& tool, size_t i) {
  const std::string at = str_cat("tools[", i, "]");
  if (!tool.is_object())
    bad_request(str_cat(at, " must be {\"type\": \"function\", \"function\": {\"name\": ...}}"));
  if (present(tool, "type") &&
      (!tool.at("type").is_string() || tool.at("type").get<std::string>() != "function")) {
    bad_request(str_cat(at, ".type must be \"function\" (the only tool type), got ",
                        tool.at("type").dump()));
  }
  if (!present(tool, "function") || !tool.at("function").is_object())
    bad_request(
        str_cat(at, ".function must be an object {\"name\", \"description\", \"parameters\"}"));
  const Json& f = tool.at("function");
  if (!present(f, "name") || !f.at("name").is_string() || f.at("name").get<std::string>().empty())
    bad_request(str_cat(at, ".function.name must be a non-empty string"));
  if (present(f, "description") && !f.at("description").is_string())
    bad_request(str_cat(at, ".function.description must be a string"));
  if (present(f, "parameters") && !f.at("parameters").is_object())
    bad_request(str_cat(at, ".function.parameters must be a JSON Schema object"));
}

constexpr const char* kChoices =
    "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
    "\"function\": {\"name\": ...}}";

// "none", "auto", "required" (which needs tools, of distinct names), or "=NAME" for a named
// function, which must be in `tools`.
std::string tool_choice(const Json& body, const Json& tools) {
  if (!present(body, "tool_choice")) return tools.is_null() ? "none" : "auto";
  const Json& choice = body.at("tool_choice");
  if (choice.is_string()) {
    const std::string c = choice.get<std::string>();
    if (c == "none" || c == "auto") return c;
    if (c == "required") {
      if (tools.is_null()) bad_request("'tool_choice' \"required\" needs 'tools'");
      for (size_t i = 0; i < tools.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (tools[i].at("function").at("name") == tools[j].at("function").at("name")) {
            bad_request(str_cat("'tool_choice' \"required\": tools[", j, "] and tools[", i,
                                "] are both named ", tools[i].at("function").at("name").dump(),
                                "; a call names its tool, so names must differ"));
          }
        }
      }
      return c;
    }
    bad_request(str_cat(kChoices, ", got \"", c, "\""));
  }
  if (choice.is_object() && choice.value("type", "") == "function" && choice.contains("function") &&
      choice.at("function").is_object() && choice.at("function").contains("name") &&
      choice.at("function").at("name").is_string()) {
    const std::string name = choice.at("function").at("name").get<std::string>();
    bool listed = false;
    for (const Json& tool : tools.is_null() ? Json::array() : tools)
      listed = listed || tool.at("function").at("name").get<std::string>() == name;
    if (!listed) {
      bad_request(str_cat("'tool_choice' names function \"", name, "\", which is not in 'tools'"));
    }
    return "=" + name;
  }
  bad_request(str_cat(kChoices, ", got ", choice.dump()));
}

}  // namespace

ToolRequest parse_tool_request(const Json& body, const ToolServing& serving) {
  ToolRequest r;
  if (present(body, "tools")) {
    const Json& tools = body.at("tools");
    if (!tools.is_array())
      bad_request("'tools' must be a list of {\"type\": \"function\", \"function\": {...}}");
    for (size_t i = 0; i < tools.size(); ++i)
      check_tool(tools[i], i);
    if (!tools.empty()) r.tools = tools;
  }
  if (present(body, "parallel_tool_calls")) {
    if (!body.at("parallel_tool_calls").is_boolean())
      bad_request("'parallel_tool_calls' must be true or false");
    r.parallel_tool_calls = body.at("parallel_tool_calls").get<bool>();
  }
  const std::string choice = tool_choice(body, r.tools);
  if (choice == "none") return r;
  if (choice == "required") {
    r.forced_required = true;
    return r;
  }
  if (choice[0] == '=') {
    r.forced_function = choice.substr(1);
    for (const Json& tool : r.tools) {
      const Json& f = tool.at("function");
      if (f.at("name").get<std::string>() == r.forced_function && present(f, "parameters"))
        r.forced_parameters = nlohmann::json(f.at("parameters"));
    }
    return r;
  }
  if (r.tools.is_null()) bad_request("'tool_choice' \"auto\" needs 'tools'");
  if (!serving.enable_auto_tool_choice || serving.parser == nullptr) {
    bad_request(
        "\"auto\" tool choice requires the server to be started with --enable-auto-tool-choice "
        "and --tool-call-parser (or send \"tool_choice\": \"none\")");
  }
  r.parser = serving.parser;
  return r;
}

}  // namespace quench
