// A chat request's messages, checked and turned into what the chat template reads, as HF's
// apply_chat_template receives them from vLLM:
//   role          a string (the template decides which roles it accepts);
//   content       a string, or a list of {"type": "text", "text"} parts (joined); null or absent
//                 only for an assistant message, passed as "";
//   tool_calls    assistant only: [{"id", "type": "function", "function": {"name", "arguments"}}],
//                 the arguments' JSON string parsed into an object (HF templates print it with
//                 tojson);
//   tool_call_id  tool messages; name, reasoning_content: passed through when strings.
// Key order is kept (a template printing arguments or tools prints them as sent).
#pragma once

#include <nlohmann/json.hpp>

namespace quench {

// Throws ApiError (400) naming the message and field, e.g. messages[2].tool_calls[0].function.
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages);

}  // namespace quench
