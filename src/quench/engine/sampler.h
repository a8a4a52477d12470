// How a request's next token is picked from its row of logits: greedy at temperature 0 (the
// row's argmax), else a draw from softmax(logits / temperature) without the tokens under min_p
// times the largest probability, restricted to the top_k largest and then to the top_p nucleus
// (ops/sampling/row_sampling.h), which the model runner makes where the logits are. Each draw
// takes one key from the request's own generator, so a seeded request repeats whatever it is
// batched with, and whether the CPU or the GPU draws.
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "quench/engine/sampling_params.h"
#include "quench/ops/sampling/row_sampling.h"

namespace quench {

// The draw of a request's next token: its parameters and a key from its generator.
RowSampler row_sampler(const SamplingParams& params, std::mt19937_64& rng);

// True when the token is the row's largest logit (temperature 0, no logit adjustments): drafted
// tokens can then be verified by each row's argmax, and logprobs, where asked, come from each
// verified row as from any other (the scheduler drafts for no other request).
bool greedy_by_argmax(const SamplingParams& params);

}  // namespace quench
