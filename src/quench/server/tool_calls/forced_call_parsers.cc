#include "quench/server/tool_calls/forced_call_parsers.h"

#include <algorithm>

#include "quench/core/error.h"
#include "quench/server/tool_calls/call_text.h"

namespace quench {

using nlohmann::json;

std::vector<ToolCallSegment> ForcedFunctionParser::scan(std::string_view text, bool final) const {
  if (!final) return {};
  const std::string_view arguments = trim_blank(text);
  const auto value = parse_call_json(arguments);
  if (value.is_discarded() || !value.is_object()) return {{0, text.size(), std::nullopt}};
  return {{0, text.size(), FunctionCall{name_, std::string(arguments)}}};
}

std::vector<ToolCallSegment> RequiredCallsParser::scan(std::string_view text, bool final) const {
  if (!final) return {};
  const auto value = parse_call_json(trim_blank(text));
  const auto is_call = [](const nlohmann::ordered_json& call) {
    return call.is_object() && call.contains("name") && call.at("name").is_string() &&
           call.contains("parameters") && call.at("parameters").is_object();
  };
  if (value.is_discarded() || !value.is_array() || value.empty() ||
      !std::all_of(value.begin(), value.end(), is_call)) {
    return {{0, text.size(), std::nullopt}};
  }
  // The calls share the text: each segment is the whole of it (the segments only carry calls).
  std::vector<ToolCallSegment> segments;
  for (const auto& call : value) {
    segments.push_back(
        {0, text.size(),
         FunctionCall{call.at("name").get<std::string>(), call.at("parameters").dump()}});
  }
  return segments;
}

namespace {

// `schema` with its references into its own $defs / definitions renamed to `prefix` + NAME
// (and "#", itself, to `self`).
json rename_refs(const json& schema, const std::string& prefix, const std::string& self) {
  if (schema.is_array()) {
    json out = json::array();
    for (const json& item : schema)
      out.push_back(rename_refs(item, prefix, self));
    return out;
  }
  if (!schema.is_object()) return schema;
  json out = json::object();
  for (const auto& [key, value] : schema.items()) {
    if (key == "$defs" || key == "definitions") continue;
    if (key == "$ref" && value.is_string()) {
      const std::string ref = value.get<std::string>();
      std::string renamed = ref;
      if (ref == "#") renamed = self;
      for (const char* section : {"#/$defs/", "#/definitions/"}) {
        const std::string s = section;
        if (ref.rfind(s, 0) == 0) renamed = "#/$defs/" + prefix + ref.substr(s.size());
      }
      out[key] = renamed;
      continue;
    }
    out[key] = rename_refs(value, prefix, self);
  }
  return out;
}

}  // namespace

json required_calls_schema(const nlohmann::ordered_json& tools, bool parallel_tool_calls) {
  json defs = json::object();
  json calls = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::ordered_json& f = tools[i].at("function");
    const json parameters =
        f.contains("parameters") ? json(f.at("parameters")) : json{{"type", "object"}};
    const std::string prefix = str_cat(i, ".");
    const std::string self = str_cat("#/$defs/", i, ".#");
    for (const char* section : {"$defs", "definitions"}) {
      if (!parameters.contains(section) || !parameters.at(section).is_object()) continue;
      for (const auto& [name, def] : parameters.at(section).items())
        defs[prefix + name] = rename_refs(def, prefix, self);
    }
    const json body = rename_refs(parameters, prefix, self);
    defs[prefix + "#"] = body;
    calls.push_back({{"type", "object"},
                     {"properties",
                      {{"name", {{"const", f.at("name").get<std::string>()}}},
                       {"parameters", {{"$ref", self}}}}},
                     {"required", {"name", "parameters"}},
                     {"additionalProperties", false}});
  }
  json schema = {
      {"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", calls}}}, {"$defs", defs}};
  if (!parallel_tool_calls) schema["maxItems"] = 1;
  return schema;
}

}  // namespace quench
