#include "quench/model/model_runner.h"

#include "quench/core/error.h"

namespace quench {

void check_forward_inputs(int32_t vocab_size, int32_t max_model_len, int32_t page_size,
                          std::span<const int32_t> token_ids, const AttentionMetadata& metadata,
                          std::span<const int32_t> logit_rows) {
  const int32_t t = metadata.num_tokens;
  QUENCH_REQUIRE(static_cast<int64_t>(token_ids.size()) == t, "forward: ", token_ids.size(),
                 " token ids for ", t, " metadata rows");
  QUENCH_REQUIRE(metadata.page_size == page_size, "forward: metadata page size ",
                 metadata.page_size, " != the cache's ", page_size);
  for (int32_t r = 0; r < t; ++r) {
    const int32_t id = token_ids[static_cast<size_t>(r)];
    QUENCH_REQUIRE(id >= 0 && id < vocab_size, "forward: token id ", id, " at row ", r,
                   " is outside the vocabulary [0, ", vocab_size, ")");
    QUENCH_REQUIRE(metadata.positions[static_cast<size_t>(r)] < max_model_len, "forward: position ",
                   metadata.positions[static_cast<size_t>(r)], " at row ", r,
                   " is >= max_model_len ", max_model_len);
  }
  for (int32_t row : logit_rows) {
    QUENCH_REQUIRE(row >= 0 && row < t, "forward: logit row ", row, " outside [0, ", t, ")");
  }
}

}  // namespace quench
