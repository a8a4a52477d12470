// Tool calls in generated text, one parser per model family's call format, chosen by
// `quench serve --tool-call-parser NAME` with vLLM's names:
//   hermes       Qwen2.5, Qwen3, Hermes: <tool_call>\n{"name": ..., "arguments":
//   {...}}\n</tool_call>
//                blocks anywhere in the text, any number of them;
//   llama3_json  Llama 3.1 / 3.2: the whole output is {"name": ..., "parameters": {...}}, possibly
//                after <|python_tag|>, several separated by ';';
//   mistral      Mistral-Nemo, Mistral Small, Magistral: [TOOL_CALLS] (a special token: such
//                requests decode with special tokens shown) then a JSON list of {"name",
//                "arguments"} objects, or name[ARGS]{...} (tokenizer v11 and later), after any
//                content;
//   pythonic     Llama 3.2 / 4: the whole output a Python list of calls with keyword arguments,
//                [f(a=1), g(b="x")].
// A parser only splits text into content and calls; the response (extract_tool_calls) and the
// stream (ToolCallStreamer) are built on that one split, so they agree on what a call is.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quench/server/tool_calls/tool_call.h"

namespace quench {

// A stretch of output text: a call, or plain content text[begin, end). Bytes between segments
// (markers, separators) belong to neither.
struct ToolCallSegment {
  size_t begin = 0;
  size_t end = 0;
  std::optional<FunctionCall> call;
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;

  // The segments of `text`, in order. With final = false the text may still grow: the segments
  // cover only what more text cannot change (a possible call marker at the end is held back, an
  // unfinished call left out), and a longer text gives the same segments again, the last content
  // one possibly longer. With final = true everything is covered; malformed call text makes the
  // whole text one content segment (a call that cannot be read is shown, never dropped).
  virtual std::vector<ToolCallSegment> scan(std::string_view text, bool final) const = 0;
  // Whether the call marker is a special token (the request's text then shows special tokens).
  virtual bool reads_special_tokens() const { return false; }
  // A fresh id for a call this parser found, in the form the model family's chat template takes
  // back in the next request's messages.
  virtual std::string new_call_id() const { return new_tool_call_id(); }
  // A call id from a request's messages as the family's template takes it (an id made
  // elsewhere, by another server or client, shortened where the template allows fewer letters).
  virtual std::string template_call_id(std::string_view id) const { return std::string(id); }
};

// The parser `name` selects; throws quench::Error naming the allowed names.
const ToolCallParser& tool_call_parser(std::string_view name);
// "hermes, llama3_json, mistral, pythonic", for usage lines and errors.
const char* tool_call_parser_names();

struct ToolCallOutput {
  // Without calls: the whole text. With calls: the text outside them, trimmed, blank stretches
  // between calls left out ("" is the API's null content).
  std::string content;
  std::vector<ToolCall> calls;  // each with a fresh id
};

// A finished choice's text as a chat message's content and tool_calls. With
// parallel_tool_calls = false only the first call is kept.
ToolCallOutput extract_tool_calls(const ToolCallParser& parser, std::string_view text,
                                  bool parallel_tool_calls);

}  // namespace quench
