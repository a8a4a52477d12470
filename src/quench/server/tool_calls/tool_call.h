// One function call a model made, as the OpenAI API returns it in a chat message's tool_calls.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace quench {

struct FunctionCall {
  std::string name;
  std::string arguments;  // JSON text of an object, what the API's "arguments" string holds
};

struct ToolCall {
  std::string id;  // "chatcmpl-tool-<32 hex digits>", as vLLM's API names them
  FunctionCall function;
};

// A fresh, random call id (the client echoes it back as a tool message's tool_call_id).
std::string new_tool_call_id();
// Nine random letters and digits: the only call ids Mistral's chat templates accept.
std::string new_short_tool_call_id();

// {"id", "type": "function", "function": {"name", "arguments"}}.
nlohmann::json tool_call_json(const ToolCall& call);

}  // namespace quench
