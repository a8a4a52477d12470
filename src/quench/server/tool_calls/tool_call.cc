#include "quench/server/tool_calls/tool_call.h"

#include <cstdio>
#include <random>
#include <string_view>

namespace quench {

std::string new_tool_call_id() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string("chatcmpl-tool-") + hex;
}

std::string new_short_tool_call_id() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id(9, ' ');
  for (char& c : id)
    c = kAlphabet[rng() % kAlphabet.size()];
  return id;
}

nlohmann::json tool_call_json(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.function.name}, {"arguments", call.function.arguments}}}};
}

}  // namespace quench
