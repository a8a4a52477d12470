#include "quench/kv_cache/block_table.h"

#include <gtest/gtest.h>

#include "harness/expect_error.h"

namespace quench {
namespace {

TEST(BlockTable, PagesForTokens) {
  EXPECT_EQ(pages_for_tokens(0, 16), 0);
  EXPECT_EQ(pages_for_tokens(1, 16), 1);
  EXPECT_EQ(pages_for_tokens(16, 16), 1);
  EXPECT_EQ(pages_for_tokens(17, 16), 2);
  EXPECT_QUENCH_ERROR(pages_for_tokens(5, 0), {"page_size 0", ">= 1"});
  EXPECT_QUENCH_ERROR(pages_for_tokens(-1, 16), {"token count -1", ">= 0"});
}

TEST(BlockTable, RowsArePaddedWithTheNullPage) {
  const BlockTable table = build_block_table({{7, 3}, {}, {5, 6, 2}}, 4, 8);
  EXPECT_EQ(table.num_seqs, 3);
  EXPECT_EQ(table.max_pages, 4);
  EXPECT_EQ(table.pages, (std::vector<int32_t>{7, 3, 0, 0, 0, 0, 0, 0, 5, 6, 2, 0}));
  EXPECT_EQ(table.row(2)[1], 6);
  const std::vector<int32_t> seq_lens = {17, 0, 48};
  EXPECT_NO_THROW(validate_block_table(table, seq_lens, 16, 8));
}

TEST(BlockTable, BuildRejectsBadPages) {
  EXPECT_QUENCH_ERROR(build_block_table({{1, 2, 3}}, 2, 8),
                      {"sequence 0", "3 pages", "max_pages is 2"});
  EXPECT_QUENCH_ERROR(build_block_table({{1}, {4, 0}}, 4, 8),
                      {"sequence 1 page 1 is 0", "[1, 8)", "null page"});
  EXPECT_QUENCH_ERROR(build_block_table({{8}}, 4, 8), {"sequence 0 page 0 is 8", "[1, 8)"});
  EXPECT_QUENCH_ERROR(build_block_table({{1}}, 0, 8), {"max_pages 0", ">= 1"});
}

TEST(BlockTable, ValidateChecksPagesAgainstSeqLens) {
  const BlockTable table = build_block_table({{7, 3}, {5}}, 3, 8);
  // Sequence 1 needs a second page for 17 tokens, but column 1 is the null page.
  std::vector<int32_t> seq_lens = {20, 17};
  EXPECT_QUENCH_ERROR(validate_block_table(table, seq_lens, 16, 8),
                      {"sequence 1 column 1 is page 0", "seq_len 17", "[1, 8)"});
  // 49 tokens need 4 pages of 16; the table has 3 columns.
  seq_lens = {49, 1};
  EXPECT_QUENCH_ERROR(validate_block_table(table, seq_lens, 16, 8),
                      {"sequence 0", "seq_len 49", "4 pages", "only 3 columns"});
  seq_lens = {-3, 1};
  EXPECT_QUENCH_ERROR(validate_block_table(table, seq_lens, 16, 8),
                      {"sequence 0", "seq_len -3", ">= 0"});
  seq_lens = {20};
  EXPECT_QUENCH_ERROR(validate_block_table(table, seq_lens, 16, 8),
                      {"seq_lens has 1 entries", "2 sequences"});
  // Page ids beyond num_pages, in used and in unused columns.
  seq_lens = {20, 1};
  EXPECT_QUENCH_ERROR(validate_block_table(table, seq_lens, 16, 6),
                      {"sequence 0 column 0 is page 7", "[1, 6)"});
  BlockTable garbage = table;
  garbage.pages[5] = -4;  // sequence 1, column 2: unused for seq_len 1
  EXPECT_QUENCH_ERROR(validate_block_table(garbage, seq_lens, 16, 8),
                      {"sequence 1 column 2 is page -4", "[0, 8)"});
  garbage.pages.pop_back();
  EXPECT_QUENCH_ERROR(validate_block_table(garbage, seq_lens, 16, 8),
                      {"holds 5 entries", "[2, 3]", "needs 6"});
}

}  // namespace
}  // namespace quench
