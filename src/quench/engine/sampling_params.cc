#include "quench/engine/sampling_params.h"

#include <cmath>

#include "quench/core/error.h"
#include "quench/engine/structured_output/json_schema.h"
#include "quench/ops/logprobs/token_logprobs.h"

namespace quench {

namespace {

constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopTokenIds = 64;
constexpr size_t kMaxLogitBias = 300;  // OpenAI's limit

}  // namespace

void SamplingParams::validate() const {
  QUENCH_REQUIRE(std::isfinite(temperature) && temperature >= 0.0f, "temperature ", temperature,
                 " must be a finite number >= 0 (0 = greedy)");
  QUENCH_REQUIRE(top_k >= 0, "top_k ", top_k, " must be >= 0 (0 = all tokens)");
  QUENCH_REQUIRE(std::isfinite(min_p) && min_p >= 0.0f && min_p <= 1.0f, "min_p ", min_p,
                 " must be in [0, 1] (0 = off)");
  QUENCH_REQUIRE(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f, "top_p ", top_p,
                 " must be in (0, 1]");
  QUENCH_REQUIRE(max_tokens >= 1, "max_tokens ", max_tokens, " must be >= 1");
  QUENCH_REQUIRE(logprobs >= -1 && logprobs <= kMaxTopLogprobs, "logprobs ", logprobs,
                 " must be in [0, ", kMaxTopLogprobs, "] (or -1 for none)");
  QUENCH_REQUIRE(prompt_logprobs >= -1 && prompt_logprobs <= kMaxTopLogprobs, "prompt_logprobs ",
                 prompt_logprobs, " must be in [0, ", kMaxTopLogprobs, "] (or -1 for none)");
  QUENCH_REQUIRE(stop.size() <= kMaxStopStrings, "stop has ", stop.size(), " strings; at most ",
                 kMaxStopStrings);
  for (size_t i = 0; i < stop.size(); ++i) {
    QUENCH_REQUIRE(!stop[i].empty(), "stop[", i, "] is empty; stop strings must not be");
  }
  QUENCH_REQUIRE(min_tokens >= 0 && min_tokens <= max_tokens, "min_tokens ", min_tokens,
                 " must be in [0, max_tokens = ", max_tokens, "]");
  QUENCH_REQUIRE(stop_token_ids.size() <= kMaxStopTokenIds, "stop_token_ids has ",
                 stop_token_ids.size(), " ids; at most ", kMaxStopTokenIds);
  QUENCH_REQUIRE(logit_bias.size() <= kMaxLogitBias, "logit_bias has ", logit_bias.size(),
                 " entries; at most ", kMaxLogitBias);
  for (const auto& [token, bias] : logit_bias) {
    QUENCH_REQUIRE(std::isfinite(bias) && bias >= -100.0f && bias <= 100.0f, "logit_bias of token ",
                   token, " is ", bias, "; allowed: -100 to 100");
  }
  QUENCH_REQUIRE(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f,
                 "repetition_penalty ", repetition_penalty, " must be > 0 (1 = off)");
  QUENCH_REQUIRE(std::isfinite(frequency_penalty) && std::abs(frequency_penalty) <= 2.0f,
                 "frequency_penalty ", frequency_penalty, " must be in [-2, 2] (0 = off)");
  QUENCH_REQUIRE(std::isfinite(presence_penalty) && std::abs(presence_penalty) <= 2.0f,
                 "presence_penalty ", presence_penalty, " must be in [-2, 2] (0 = off)");
  QUENCH_REQUIRE((json_object ? 1 : 0) + (json_schema ? 1 : 0) + (text_pattern ? 1 : 0) <= 1,
                 "more than one structured output was asked for (JSON mode, a JSON schema, a "
                 "regex or choice); allowed: one");
  QUENCH_REQUIRE(!text_pattern || text_pattern->raw_text(),
                 "text_pattern must be a JsonSchema::text_pattern or text_grammar");
  QUENCH_REQUIRE(!reasoning_gate || structured_output() != nullptr,
                 "reasoning_gate needs structured output (it says where the constraint starts)");
  QUENCH_REQUIRE(
      !reasoning_gate || (!reasoning_gate->open.empty() && !reasoning_gate->close.empty()),
      "reasoning_gate's open and close markers must not be empty");
}

std::shared_ptr<const JsonSchema> SamplingParams::structured_output() const {
  if (json_schema) return json_schema;
  if (text_pattern) return text_pattern;
  return json_object ? JsonSchema::any_object() : nullptr;
}

}  // namespace quench
