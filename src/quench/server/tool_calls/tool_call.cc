#include "quench/server/tool_calls/tool_call.h"

#include <cstdio>
#include <random>

namespace quench {

std::string new_tool_call_id() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string("chatcmpl-tool-") + hex;
}

nlohmann::json tool_call_json(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.function.name}, {"arguments", call.function.arguments}}}};
}

}  // namespace quench
