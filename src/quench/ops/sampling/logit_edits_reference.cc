#include "quench/core/error.h"
#include "quench/ops/sampling/logit_edits.h"

namespace quench {

void apply_logit_edits_reference(std::span<float> row, const RowLogitEdits& e) {
  for (const LogitEdit& edit : e.edits) {
    QUENCH_REQUIRE(edit.token >= 0 && static_cast<size_t>(edit.token) < row.size(),
                   "logit edit of token ", edit.token, " outside the row's ", row.size(),
                   " logits");
    float& l = row[static_cast<size_t>(edit.token)];
    l = edited_logit(l, edit);
  }
  if (!e.has_allowed) return;
  const auto words = static_cast<int32_t>(e.allowed_bits.size());
  for (size_t t = 0; t < row.size(); ++t)
    if (!logit_allowed(e.allowed_bits.data(), words, static_cast<int32_t>(t)))
      row[t] = kMaskedLogit;
}

}  // namespace quench
