#include "quench/engine/sampler.h"

#include "quench/engine/logits_processors.h"

namespace quench {

RowSampler row_sampler(const SamplingParams& params, std::mt19937_64& rng) {
  return RowSampler{params.temperature, params.top_k, params.top_p, params.min_p, rng()};
}

bool greedy_by_argmax(const SamplingParams& params) {
  return params.temperature == 0.0f && !adjusts_logits(params);
}

}  // namespace quench
