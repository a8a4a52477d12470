// Reasoning in generated chat text, split off as the message's reasoning_content, chosen by
// `quench serve --reasoning-parser NAME` with vLLM's names:
//   qwen3        Qwen3 (hybrid thinking): output that opens with <think> is reasoning up to
//                </think>; output that does not (enable_thinking false, whose template closes an
//                empty block in the prompt) is all content;
//   deepseek_r1  DeepSeek-R1 and its distills, Qwen3 thinking-only models: the template opens
//                <think> in the prompt, so output is reasoning from its start (a <think> the
//                model writes anyway is dropped) up to </think>.
// Output cut off before </think> is all reasoning (the model was still thinking). Content after
// </think> starts at its first non-blank character. Markers are text (both families' <think>
// tokens are not special: they show with skip_special_tokens).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "quench/engine/structured_output/reasoning_gate.h"

namespace quench {

// Where a text's reasoning and content lie: reasoning text[reasoning_begin, reasoning_end),
// content text[content_begin, end). content_begin is npos while the text (still growing) has
// not reached its content, or never will.
struct ReasoningSplit {
  bool has_reasoning = false;  // the text has a reasoning block (perhaps empty) where it is placed
  size_t reasoning_begin = 0;
  size_t reasoning_end = 0;
  size_t content_begin = std::string_view::npos;
};

class ReasoningParser {
 public:
  // reasoning_first: output starts inside the reasoning block (deepseek_r1), rather than only
  // after an opening marker (qwen3).
  explicit ReasoningParser(bool reasoning_first) : reasoning_first_(reasoning_first) {}

  // The split of `text`. With final = false the text may still grow: the split covers what more
  // text cannot change (a possible marker at the end is left out of the reasoning, and content
  // waits for its first non-blank character), and a longer text gives the same split, its ranges
  // possibly longer. With final = true everything is placed.
  ReasoningSplit split(std::string_view text, bool final) const;

  // Where structured output starts in such output: after the reasoning block, which the output
  // is inside from its start (reasoning_first) or which its first token may open.
  ReasoningGateSpec gate_spec() const;

 private:
  bool reasoning_first_;
};

// The parser `name` selects; throws quench::Error naming the allowed names.
const ReasoningParser& reasoning_parser(std::string_view name);
// "deepseek_r1, qwen3", for usage lines and errors.
const char* reasoning_parser_names();

struct ReasoningOutput {
  std::optional<std::string> reasoning;  // absent where the text has no reasoning
  std::string content;
};

// A finished choice's text as its reasoning and content.
ReasoningOutput extract_reasoning(const ReasoningParser& parser, std::string_view text);

}  // namespace quench
