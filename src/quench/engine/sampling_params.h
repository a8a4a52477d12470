// How one request picks its tokens and when it stops (the OpenAI / vLLM parameters).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "quench/engine/structured_output/reasoning_gate.h"

namespace quench {

class JsonSchema;

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax; ties go to the lowest token id)
  int32_t top_k = 0;         // 0 = all tokens
  float top_p = 1.0f;        // nucleus: the smallest set of tokens whose probability >= top_p
  // Tokens less likely than min_p times the most likely one (after temperature) are dropped
  // before top-k and top-p, as vLLM applies it; 0 = off.
  float min_p = 0.0f;
  std::optional<uint64_t> seed;  // per-request generator; unset = derived from the engine seed
  int32_t max_tokens = 16;       // tokens to generate, >= 1
  bool ignore_eos = false;       // keep going past the end-of-sequence token
  // Special tokens (control tokens: a tool-call marker, an end of turn) are left out of the text
  // (vLLM's default); false shows them, all but a last one (the end-of-sequence or stop token
  // that ended the request). Token ids and logprobs are the same either way.
  bool skip_special_tokens = true;
  // Stop strings: the request ends when its text contains one; the text returned stops before it
  // (the tokens that spelled it stay in the output ids). Needs the model's tokenizer.
  std::vector<std::string> stop;
  // Log-probabilities to return with each generated token: -1 none; k >= 0 the sampled token's
  // and the k most likely tokens', from the model's distribution before temperature, top-k and
  // top-p (as vLLM returns them).
  int32_t logprobs = -1;
  // The same for the prompt's tokens (each under the tokens before it; the first has none): -1
  // none; k >= 0 with the k most likely. Such a request computes its whole prompt (no prefix
  // cache: cached pages have no logits).
  int32_t prompt_logprobs = -1;
  // Logit adjustments before sampling (engine/logits_processors.h), in vLLM's order and with
  // its definitions: min_tokens holds the end-of-sequence and stop_token_ids off until that many
  // tokens are out; logit_bias adds to a token's logit (OpenAI, -100 to 100); repetition_penalty
  // (> 0, 1 = off) divides the positive logits and multiplies the negative ones of every token in
  // the prompt or output; frequency_penalty subtracts per occurrence in the output and
  // presence_penalty once per token present there (each -2 to 2, 0 = off). Logprobs stay those
  // of the model's logits (vLLM's default).
  int32_t min_tokens = 0;
  std::vector<int32_t> stop_token_ids;  // also end the request (finish "stop"), even ignore_eos
  std::vector<std::pair<int32_t, float>> logit_bias;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // Structured output: only tokens that keep the output a prefix of a JSON text the schema
  // admits are taken, and the request ends (finish "stop") when that text closes
  // (engine/structured_output/). JSON mode (response_format {"type": "json_object"}) is the
  // schema of any object; json_schema (response_format {"type": "json_schema"}) a compiled
  // JsonSchema; text_pattern (guided_regex / guided_choice / guided_grammar) raw text that a
  // regular expression matches whole, or a sentence of a GBNF grammar (JsonSchema::text_pattern
  // / text_grammar: the request may end on its end-of-sequence token wherever the text is
  // complete, and ends where nothing may follow). At most one of them. Needs
  // the model's tokenizer.
  bool json_object = false;
  std::shared_ptr<const JsonSchema> json_schema;
  std::shared_ptr<const JsonSchema> text_pattern;
  // With structured output: the constraint holds only after the model's reasoning block (set by
  // the server's reasoning parser; engine/structured_output/reasoning_gate.h). Unset: from the
  // first token.
  std::optional<ReasoningGateSpec> reasoning_gate;

  // The schema the output follows: json_schema, text_pattern, JsonSchema::any_object() in JSON
  // mode, else null.
  std::shared_ptr<const JsonSchema> structured_output() const;

  // Throws quench::Error naming the bad field and its allowed range.
  void validate() const;
};

}  // namespace quench
