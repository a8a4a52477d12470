#include "quench/engine/logits_processors.h"

#include <map>
#include <unordered_map>

namespace quench {

bool adjusts_logits(const SamplingParams& params) {
  return params.min_tokens > 0 || !params.logit_bias.empty() || params.repetition_penalty != 1.0f ||
         params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f || params.json_object;
}

RowLogitEdits logit_edits(const SamplingParams& params, std::span<const int32_t> prompt,
                          std::span<const int32_t> output, std::span<const int32_t> end_ids,
                          const std::vector<uint8_t>* allowed) {
  // One edit per token, in token order (deterministic uploads).
  std::map<int32_t, LogitEdit> by_token;
  const auto edit = [&](int32_t token) -> LogitEdit& {
    LogitEdit& e = by_token[token];
    e.token = token;
    return e;
  };
  for (const auto& [token, bias] : params.logit_bias)
    edit(token).bias += bias;
  if (params.repetition_penalty != 1.0f) {
    for (int32_t token : prompt)
      edit(token).repetition = params.repetition_penalty;
    for (int32_t token : output)
      edit(token).repetition = params.repetition_penalty;
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t token : output)
      ++counts[token];
    for (const auto& [token, count] : counts)
      edit(token).subtract =
          params.frequency_penalty * static_cast<float>(count) + params.presence_penalty;
  }
  if (static_cast<int32_t>(output.size()) < params.min_tokens) {
    for (int32_t token : end_ids)
      edit(token).masked = 1;
    for (int32_t token : params.stop_token_ids)
      edit(token).masked = 1;
  }
  RowLogitEdits e;
  e.edits.reserve(by_token.size());
  for (const auto& [token, one] : by_token)
    e.edits.push_back(one);
  if (allowed != nullptr) {
    e.has_allowed = true;
    e.allowed_bits.assign((allowed->size() + 31) / 32, 0u);
    for (size_t t = 0; t < allowed->size(); ++t)
      if ((*allowed)[t] != 0) e.allowed_bits[t / 32] |= 1u << (t % 32);
  }
  return e;
}

}  // namespace quench
