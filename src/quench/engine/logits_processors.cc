#include "quench/engine/logits_processors.h"

#include <algorithm>
#include <climits>
#include <utility>

namespace quench {

bool adjusts_logits(const SamplingParams& params) {
  return params.min_tokens > 0 || !params.logit_bias.empty() || params.repetition_penalty != 1.0f ||
         params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f || params.json_object;
}

RowLogitEdits logit_edits(const SamplingParams& params, const PenaltyTokenSets& tokens,
                          std::span<const int32_t> end_ids, const std::vector<uint8_t>* allowed) {
  // Four sorted sources, merged by token: the biases (stable-sorted, so that a token's repeated
  // biases add in the order given), the prompt's tokens and the output's counts (where a penalty
  // reads them), and the masked ids.
  std::vector<std::pair<int32_t, float>> biases = params.logit_bias;
  std::ranges::stable_sort(biases, {}, &std::pair<int32_t, float>::first);
  const bool repetition = params.repetition_penalty != 1.0f;
  const bool counted = params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f;
  const std::span<const int32_t> prompt =
      repetition ? tokens.prompt_tokens() : std::span<const int32_t>{};
  const std::span<const TokenCount> output =
      repetition || counted ? tokens.output_counts() : std::span<const TokenCount>{};
  std::vector<int32_t> masked;
  if (static_cast<int64_t>(tokens.output_size()) < params.min_tokens) {
    masked.assign(end_ids.begin(), end_ids.end());
    masked.insert(masked.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
    std::ranges::sort(masked);
    masked.erase(std::unique(masked.begin(), masked.end()), masked.end());
  }
  size_t b = 0, pr = 0, o = 0, m = 0;
  const auto head = [](auto& list, size_t i, auto token_of) {
    return i < list.size() ? token_of(list[i]) : INT_MAX;
  };
  const auto bias_token = [](const std::pair<int32_t, float>& x) { return x.first; };
  const auto self = [](int32_t x) { return x; };
  const auto count_token = [](const TokenCount& x) { return x.token; };
  RowLogitEdits e;
  e.edits.reserve(biases.size() + prompt.size() + output.size() + masked.size());
  while (b < biases.size() || pr < prompt.size() || o < output.size() || m < masked.size()) {
    const int32_t token = std::min({head(biases, b, bias_token), head(prompt, pr, self),
                                    head(output, o, count_token), head(masked, m, self)});
    LogitEdit edit;
    edit.token = token;
    for (; b < biases.size() && biases[b].first == token; ++b)
      edit.bias += biases[b].second;
    bool seen = false;
    if (pr < prompt.size() && prompt[pr] == token) {
      seen = true;
      ++pr;
    }
    if (o < output.size() && output[o].token == token) {
      seen = true;
      if (counted) {
        edit.subtract = params.frequency_penalty * static_cast<float>(output[o].count) +
                        params.presence_penalty;
      }
      ++o;
    }
    if (repetition && seen) edit.repetition = params.repetition_penalty;
    if (m < masked.size() && masked[m] == token) {
      edit.masked = 1;
      ++m;
    }
    e.edits.push_back(edit);
  }
  if (allowed != nullptr) {
    e.has_allowed = true;
    e.allowed_bits.assign((allowed->size() + 31) / 32, 0u);
    for (size_t t = 0; t < allowed->size(); ++t)
      if ((*allowed)[t] != 0) e.allowed_bits[t / 32] |= 1u << (t % 32);
  }
  return e;
}

RowLogitEdits logit_edits(const SamplingParams& params, std::span<const int32_t> prompt,
                          std::span<const int32_t> output, std::span<const int32_t> end_ids,
                          const std::vector<uint8_t>* allowed) {
  PenaltyTokenSets tokens;
  tokens.sync(prompt, output);
  return logit_edits(params, tokens, end_ids, allowed);
}

}  // namespace quench
