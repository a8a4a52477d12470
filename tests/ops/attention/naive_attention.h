// A float64 attention written straight from the formulas of attention_params.h, over an
// AttentionProblem's dequantized values (which it keeps per sequence, independent of paging).
// It shares no code with attention_reference.cc, so the two can check each other.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/attention_problem.h"

namespace quench::testing_support {

struct NaiveRow {
  std::vector<double> o;  // [head_dim]
  double lse = 0.0;
};

inline NaiveRow naive_attention_row(const AttentionProblem& problem, int64_t token, int32_t head) {
  const AttentionProblemConfig& c = problem.config();
  const int32_t kv_head = head / (c.num_q_heads / c.num_kv_heads);
  const int32_t seq = problem.seq_of_token(token);
  const int32_t pos = problem.pos_of_token(token);
  std::vector<double> scores;
  std::vector<int32_t> keys;
  for (int32_t j = 0; j <= pos; ++j) {
    if (c.window_left >= 0 && j < pos - c.window_left) continue;
    double s = 0.0;
    for (int32_t d = 0; d < c.head_dim; ++d) {
      s += double{problem.q_value(token, head, d)} * problem.k_value(seq, j, kv_head, d);
    }
    s *= problem.sm_scale();
    if (c.logit_soft_cap > 0.0f) s = c.logit_soft_cap * std::tanh(s / c.logit_soft_cap);
    scores.push_back(s);
    keys.push_back(j);
  }
  double m = *std::max_element(scores.begin(), scores.end());
  if (c.sinks) m = std::max(m, double{problem.sinks()[head]});
  double denominator = c.sinks ? std::exp(problem.sinks()[head] - m) : 0.0;
  NaiveRow row;
  row.o.assign(static_cast<size_t>(c.head_dim), 0.0);
  for (size_t i = 0; i < keys.size(); ++i) {
    const double w = std::exp(scores[i] - m);
    denominator += w;
    for (int32_t d = 0; d < c.head_dim; ++d) {
      row.o[d] += w * problem.v_value(seq, keys[i], kv_head, d);
    }
  }
  for (double& x : row.o)
    x /= denominator;
  row.lse = std::log(denominator) + m;
  return row;
}

}  // namespace quench::testing_support
