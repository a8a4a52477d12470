// A request's logit adjustments before its token is picked (SamplingParams: min_tokens,
// logit_bias, repetition / frequency / presence penalties), as vLLM applies them: logit_bias, then
// the penalties, then temperature, top-k and top-p in the sampler; the min_tokens mask excludes
// its tokens whatever comes before it. Host code on one
// row of fp32 logits; a request that asks for none keeps the runner's argmax path.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quench/engine/sampling_params.h"

namespace quench {

// True when the request's logits change before sampling (its argmax may not be the model's).
bool adjusts_logits(const SamplingParams& params);

// Applies the adjustments to `logits` ([vocab] fp32) for a request with `prompt` and `output`
// tokens so far; end_ids are the model's end-of-sequence ids (masked with the stop ids while
// output is shorter than min_tokens). A masked token's logit becomes the lowest float: never the
// argmax, probability 0. Ids outside the vocabulary are the caller's to reject
// (LlmEngine::add_request does).
// `allowed` ([tokenizer vocab] 1 = allowed, JSON mode's JsonTokenMasks) masks every other token,
// ids past its end included.
void apply_logits_processors(std::span<float> logits, const SamplingParams& params,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             std::span<const int32_t> end_ids,
                             const std::vector<uint8_t>* allowed = nullptr);

}  // namespace quench
