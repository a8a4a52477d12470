#include "quench/ops/logprobs/row_logprobs_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "quench/core/error.h"

namespace quench {

TokenLogprobs row_logprobs_reference(std::span<const float> row, int32_t token, int32_t top) {
  QUENCH_REQUIRE(!row.empty(), "row logprobs: the row is empty");
  QUENCH_REQUIRE(token >= 0 && static_cast<size_t>(token) < row.size(), "row logprobs: token ",
                 token, " is outside the row's ", row.size(), " logits");
  QUENCH_REQUIRE(top >= 0 && top <= kMaxTopLogprobs, "row logprobs: top ", top, " must be in [0, ",
                 kMaxTopLogprobs, "]");
  TokenLogprobs out;
  if (!std::all_of(row.begin(), row.end(), [](float l) { return std::isfinite(l); })) {
    out.logprob = std::nanf("");
    return out;
  }
  const double max_logit = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float l : row)
    sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_z = max_logit + std::log(sum);
  out.logprob = static_cast<float>(row[static_cast<size_t>(token)] - log_z);
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  const auto k = std::min(static_cast<size_t>(top), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int32_t a, int32_t b) {
                      return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)] ||
                             (row[static_cast<size_t>(a)] == row[static_cast<size_t>(b)] && a < b);
                    });
  for (size_t i = 0; i < k; ++i)
    out.top.emplace_back(order[i], static_cast<float>(row[static_cast<size_t>(order[i])] - log_z));
  return out;
}

}  // namespace quench
