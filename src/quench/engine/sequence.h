// One request as the engine tracks it: its tokens, how many of them are in the KV cache, and the
// cache pages that hold them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "quench/engine/penalty_token_sets.h"
#include "quench/engine/sampler.h"
#include "quench/engine/sampling_params.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/ops/logprobs/token_logprobs.h"
#include "quench/tokenizer/incremental_detokenizer.h"

namespace quench {

enum class SequenceStatus : uint8_t { kWaiting, kRunning, kFinished };
enum class FinishReason : uint8_t { kNone, kStop, kLength };

// Whether a finished request's last token ended it: finish "stop" that no stop string made (the
// end-of-sequence token or a stop token id; or a structured output's last token, never special).
inline bool ended_on_its_last_token(FinishReason reason, int64_t stop_text_offset) {
  return reason == FinishReason::kStop && stop_text_offset < 0;
}

const char* finish_reason_name(FinishReason reason);  // "stop", "length" (OpenAI's names)

struct Sequence {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::vector<TokenLogprobs> output_logprobs;  // one per output token when params.logprobs >= 0
  // One per prompt token when params.prompt_logprobs >= 0 (the first stays empty: nothing before).
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;
  SamplingParams params;
  std::mt19937_64 rng;

  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_computed = 0;    // leading tokens whose K/V are in the cache
  std::vector<int32_t> pages;  // cache pages in token order
  int32_t num_preemptions = 0;
  // Prefix caching: the leading full pages already indexed, and the hash of the last of them.
  int32_t num_hashed_pages = 0;
  uint64_t last_page_hash = 0;
  int32_t num_cached_prompt_tokens = 0;  // tokens of its last admission taken from the cache
  // Where the matched stop string starts in the decoded output text (bytes); -1 = none matched.
  int64_t stop_text_offset = -1;
  // The output's text so far, for stop strings (built a token at a time), and how much of it
  // has been searched.
  std::shared_ptr<IncrementalDetokenizer> output_text;
  // Structured output: the output so far as a prefix of a text its schema admits (created at
  // the first mask or token; the schema is params.structured_output(), which params keep alive).
  std::shared_ptr<JsonSchemaPrefix> json_prefix;
  // With params.reasoning_gate: where the output stands against the reasoning block (created with
  // json_prefix); the prefix reads only the answer's bytes.
  std::shared_ptr<ReasoningGate> reasoning_gate;
  // Penalized requests: the prompt's and output's tokens as the penalties read them (kept up to
  // date by the engine each step, instead of rebuilt: logits_processors.h).
  PenaltyTokenSets penalty_tokens;
  size_t stop_search_from = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(prompt.size() + output.size()); }
  int32_t token_at(int32_t i) const {
    const auto p = static_cast<int32_t>(prompt.size());
    return i < p ? prompt[static_cast<size_t>(i)] : output[static_cast<size_t>(i - p)];
  }
  // One token left to compute (the last sampled one): a decode row. A preempted sequence
  // recomputes its prompt and output as prefill chunks first.
  bool in_decode() const { return num_tokens() - num_computed == 1; }
  // Tokens [begin, begin + n) (prompt, then output).
  std::vector<int32_t> tokens(int32_t begin, int32_t n) const {
    std::vector<int32_t> out(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
      out[static_cast<size_t>(i)] = token_at(begin + i);
    return out;
  }
};

}  // namespace quench
