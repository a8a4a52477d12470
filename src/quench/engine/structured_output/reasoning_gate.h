// Structured output after the model's reasoning (quench serve --reasoning-parser): a thinking
// model writes <think> ... </think> before its answer, and only the answer must follow the
// schema, as vLLM applies it. The gate reads the output token by token:
//   kMayOpen    the first token either opens a reasoning block (the open marker's own token,
//               which the engine allows beside the schema's tokens) or is the answer's first;
//   kReasoning  inside a block (opened by the model, or already in the prompt: the template
//               of a thinking-only model opens it): no constraint until the close marker;
//   kAnswer     the constrained answer: the bytes after the close marker (in the token that
//               closed the block too), and every later token.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace quench {

// The reasoning block's markers in the families quench's reasoning parsers read (Qwen3,
// DeepSeek-R1; server/reasoning/reasoning_parser.h).
inline constexpr std::string_view kReasoningOpen = "<think>";
inline constexpr std::string_view kReasoningClose = "</think>";

struct ReasoningGateSpec {
  bool starts_inside = false;  // the prompt opened the block (kReasoning), else kMayOpen
  std::string open{kReasoningOpen};
  std::string close{kReasoningClose};
};

class ReasoningGate {
 public:
  enum class State { kMayOpen, kReasoning, kAnswer };

  explicit ReasoningGate(ReasoningGateSpec spec)
      : spec_(std::move(spec)), state_(spec_.starts_inside ? State::kReasoning : State::kMayOpen) {}

  State state() const { return state_; }
  const ReasoningGateSpec& spec() const { return spec_; }

  // Takes one output token's bytes and returns the part of them that belongs to the answer
  // (empty while reasoning; a view into `token_bytes`).
  std::string_view feed(std::string_view token_bytes);

 private:
  ReasoningGateSpec spec_;
  State state_;
  std::string tail_;  // while reasoning: the last bytes that may begin the close marker
};

}  // namespace quench
