#include "quench/engine/logits_processors.h"

#include <limits>
#include <unordered_map>
#include <unordered_set>

namespace quench {

bool adjusts_logits(const SamplingParams& params) {
  return params.min_tokens > 0 || !params.logit_bias.empty() || params.repetition_penalty != 1.0f ||
         params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f || params.json_object;
}

void apply_logits_processors(std::span<float> logits, const SamplingParams& params,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             std::span<const int32_t> end_ids,
                             const std::vector<uint8_t>* allowed) {
  const auto at = [&](int32_t token) -> float& { return logits[static_cast<size_t>(token)]; };
  for (const auto& [token, bias] : params.logit_bias)
    at(token) += bias;
  if (params.repetition_penalty != 1.0f) {
    std::unordered_set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(output.begin(), output.end());
    for (int32_t token : seen) {
      float& l = at(token);
      l = l > 0.0f ? l / params.repetition_penalty : l * params.repetition_penalty;
    }
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t token : output)
      ++counts[token];
    for (const auto& [token, count] : counts)
      at(token) -= params.frequency_penalty * static_cast<float>(count) + params.presence_penalty;
  }
  // The masks last, so that no penalty scales the lowest float past them.
  if (allowed != nullptr) {
    for (size_t token = 0; token < logits.size(); ++token)
      if (token >= allowed->size() || (*allowed)[token] == 0)
        logits[token] = std::numeric_limits<float>::lowest();
  }
  if (static_cast<int32_t>(output.size()) < params.min_tokens) {
    constexpr float kMasked = std::numeric_limits<float>::lowest();
    for (int32_t token : end_ids)
      at(token) = kMasked;
    for (int32_t token : params.stop_token_ids)
      at(token) = kMasked;
  }
}

}  // namespace quench
