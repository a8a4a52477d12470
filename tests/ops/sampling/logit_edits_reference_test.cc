// The logit-edits reference on hand-computed rows: vLLM's order (bias, then the repetition
// penalty by sign, then the subtraction), masks that win over every edit, an allowed mask shorter
// than the row, and an edit outside the row refused.
#include "quench/ops/sampling/logit_edits.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "harness/expect_error.h"

namespace quench {
namespace {

constexpr float kLowest = std::numeric_limits<float>::lowest();

TEST(LogitEditsReference, BiasThenRepetitionBySignThenSubtraction) {
  std::vector<float> row = {1.0f, -2.0f, 3.0f, 0.5f, 4.0f};
  RowLogitEdits e;
  e.edits = {{0, 1.0f, 2.0f, 0.0f, 0u},    // (1 + 1) / 2 = 1
             {1, 0.0f, 2.0f, 0.5f, 0u},    // -2 * 2 - 0.5 = -4.5
             {2, -4.0f, 2.0f, 0.0f, 0u},   // (3 - 4) = -1, negative: * 2 = -2
             {3, 0.0f, 1.0f, 0.25f, 1u}};  // masked whatever came before
  apply_logit_edits_reference(row, e);
  EXPECT_EQ(row, (std::vector<float>{1.0f, -4.5f, -2.0f, kLowest, 4.0f}));
}

TEST(LogitEditsReference, AllowedMaskWinsAndIdsPastItAreMasked) {
  std::vector<float> row(40, 1.0f);
  RowLogitEdits e;
  e.edits = {{5, 3.0f, 1.0f, 0.0f, 0u}};  // allowed: 2 and 33 only; 5's edit is masked anyway
  e.has_allowed = true;
  e.allowed_bits = {1u << 2};  // one word: ids 32.. are past the mask
  apply_logit_edits_reference(row, e);
  for (size_t t = 0; t < row.size(); ++t)
    EXPECT_EQ(row[t], t == 2 ? 1.0f : kLowest) << t;
}

TEST(LogitEditsReference, AnEditOutsideTheRowIsAnError) {
  std::vector<float> row(4, 0.0f);
  RowLogitEdits e;
  e.edits = {{4, 1.0f, 1.0f, 0.0f, 0u}};
  EXPECT_QUENCH_ERROR(apply_logit_edits_reference(row, e), {"token 4", "4 logits"});
}

}  // namespace
}  // namespace quench
