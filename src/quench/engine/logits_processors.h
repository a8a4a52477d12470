// A request's logit adjustments before its token is picked (SamplingParams: min_tokens,
// logit_bias, repetition / frequency / presence penalties, JSON mode's mask), as vLLM applies
// them: logit_bias, then the penalties, then temperature, top-k and top-p in the sampler; the
// masks exclude their tokens whatever comes before them. They compile to a row's edits
// (ops/sampling/logit_edits.h), which the runner applies where the logits are.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quench/engine/penalty_token_sets.h"
#include "quench/engine/sampling_params.h"
#include "quench/ops/sampling/logit_edits.h"

namespace quench {

// True when the request's logits change before sampling (its argmax may not be the model's).
bool adjusts_logits(const SamplingParams& params);

// The adjustments for a request with `prompt` and `output` tokens so far, as edits of its row of
// logits (apply_logit_edits_reference / apply_logit_edits_cuda apply them). end_ids are the
// model's end-of-sequence ids (masked with the stop ids while output is shorter than
// min_tokens); a masked token's logit becomes the lowest float: never the argmax, probability 0.
// Ids outside the vocabulary are the caller's to reject (LlmEngine::add_request does).
// `allowed_bits` (packed as RowLogitEdits::allowed_bits, JSON mode's
// JsonTokenMasks::allowed_bits) masks every other token, ids past its words included.
// Edits come in token order. `tokens` are the request's prompt and output so far
// (PenaltyTokenSets::sync), which the engine keeps per sequence: the edits are one merge of their
// sorted sets, linear in the edits made.
RowLogitEdits logit_edits(const SamplingParams& params, const PenaltyTokenSets& tokens,
                          std::span<const int32_t> end_ids,
                          const std::vector<uint32_t>* allowed_bits = nullptr);

// The same from the tokens themselves (the sets built afresh, for a one-off row).
RowLogitEdits logit_edits(const SamplingParams& params, std::span<const int32_t> prompt,
                          std::span<const int32_t> output, std::span<const int32_t> end_ids,
                          const std::vector<uint32_t>* allowed_bits = nullptr);

}  // namespace quench
