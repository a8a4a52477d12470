#include "quench/kv_cache/slot_mapping.h"

#include <gtest/gtest.h>

#include "harness/expect_error.h"

namespace quench {
namespace {

TEST(SlotMapping, MixedPrefillDecodeAndPaddingByHand) {
  // page_size 4. Sequence 0: a decode step at position 5 (page 3, offset 1).
  // Sequence 1: a prefill chunk of 3 tokens at positions 3, 4, 5 over pages {6, 2}.
  // Sequence 2: a padded request (seq_len 0). Two padding tokens at the end.
  const BlockTable table = build_block_table({{7, 3}, {6, 2}, {}}, 2, 8);
  const std::vector<int32_t> seq_lens = {6, 6, 0};
  const std::vector<int32_t> new_tokens = {1, 3, 0};
  const std::vector<int64_t> slots = build_slot_mapping(table, seq_lens, new_tokens, 4, 8, 6);
  EXPECT_EQ(slots, (std::vector<int64_t>{3 * 4 + 1, 6 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1, -1, -1}));
  EXPECT_NO_THROW(validate_slot_mapping(slots, 4, 8));
}

TEST(SlotMapping, BuildRejectsInconsistentInput) {
  const BlockTable table = build_block_table({{7, 3}, {6}}, 2, 8);
  std::vector<int32_t> seq_lens = {6, 2};
  std::vector<int32_t> new_tokens = {3, 4};
  EXPECT_QUENCH_ERROR(build_slot_mapping(table, seq_lens, new_tokens, 4, 8, 16),
                      {"sequence 1 has 4 new tokens", "[0, seq_len = 2]"});
  new_tokens = {-1, 1};
  EXPECT_QUENCH_ERROR(build_slot_mapping(table, seq_lens, new_tokens, 4, 8, 16),
                      {"sequence 0 has -1 new tokens"});
  new_tokens = {3, 2};
  EXPECT_QUENCH_ERROR(build_slot_mapping(table, seq_lens, new_tokens, 4, 8, 4),
                      {"5 new tokens", "num_tokens is 4", ">= 5"});
  new_tokens = {1};
  EXPECT_QUENCH_ERROR(build_slot_mapping(table, seq_lens, new_tokens, 4, 8, 4),
                      {"new_tokens has 1 entries", "seq_lens has 2"});
  // The block table is validated first: 9 tokens need 3 pages of 4.
  seq_lens = {9, 2};
  new_tokens = {1, 1};
  EXPECT_QUENCH_ERROR(build_slot_mapping(table, seq_lens, new_tokens, 4, 8, 4),
                      {"sequence 0", "seq_len 9", "3 pages", "only 2 columns"});
}

TEST(SlotMapping, ValidateRejectsNullPageOutOfRangeAndDuplicates) {
  EXPECT_QUENCH_ERROR(validate_slot_mapping(std::vector<int64_t>{17, 2}, 4, 8),
                      {"token 1 has slot 2", "-1 (padding) or [4, 32)", "null page"});
  EXPECT_QUENCH_ERROR(validate_slot_mapping(std::vector<int64_t>{-1, 32}, 4, 8),
                      {"token 1 has slot 32", "[4, 32)"});
  EXPECT_QUENCH_ERROR(validate_slot_mapping(std::vector<int64_t>{-2}, 4, 8),
                      {"token 0 has slot -2"});
  EXPECT_QUENCH_ERROR(validate_slot_mapping(std::vector<int64_t>{9, -1, 9}, 4, 8),
                      {"tokens 0 and 2 both write slot 9"});
  EXPECT_QUENCH_ERROR(validate_slot_mapping(std::vector<int64_t>{9}, 0, 8),
                      {"page_size 0", ">= 1"});
}

}  // namespace
}  // namespace quench
