#include "quench/attention/attention_metadata.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "harness/expect_error.h"
#include "quench/core/error.h"

namespace quench {
namespace {

// Two decode steps, then two prefill chunks (one after a cached prefix), page_size 16.
AttentionMetadata hand_checked_batch() {
  const std::vector<ScheduledSequence> decodes = {{{3, 7}, 20, 1}, {{5}, 15, 1}};
  const std::vector<ScheduledSequence> prefills = {{{2, 9, 4}, 16, 20}, {{6}, 0, 5}};
  return build_attention_metadata(decodes, prefills, 16, 10);
}

TEST(AttentionMetadata, HandCheckedMixedBatch) {
  const AttentionMetadata m = hand_checked_batch();
  EXPECT_EQ(m.num_seqs, 4);
  EXPECT_EQ(m.num_tokens, 27);
  EXPECT_EQ(m.num_decode_seqs, 2);
  EXPECT_EQ(m.num_decode_tokens, 2);
  EXPECT_EQ(m.num_prefill_seqs, 2);
  EXPECT_EQ(m.num_prefill_tokens, 25);
  EXPECT_EQ(m.num_padding_seqs, 0);
  EXPECT_EQ(m.max_q_len, 20);
  EXPECT_EQ(m.max_seq_len, 36);
  EXPECT_EQ(m.max_decode_q_len, 1);
  EXPECT_EQ(m.max_decode_seq_len, 21);
  EXPECT_EQ(m.max_prefill_q_len, 20);
  EXPECT_EQ(m.max_prefill_seq_len, 36);
  EXPECT_EQ(m.max_pages, 3);
  EXPECT_EQ(m.q_offsets, (std::vector<int32_t>{0, 1, 2, 22, 27}));
  EXPECT_EQ(m.prefill_q_offsets, (std::vector<int32_t>{0, 20, 25}));
  EXPECT_EQ(m.seq_lens, (std::vector<int32_t>{21, 16, 36, 5}));
  EXPECT_EQ(m.block_table, (std::vector<int32_t>{3, 7, 0, 5, 0, 0, 2, 9, 4, 6, 0, 0}));
  std::vector<int64_t> slots = {7 * 16 + 4, 5 * 16 + 15};
  std::vector<int32_t> positions = {20, 15};
  for (int32_t p = 16; p < 36; ++p) {
    slots.push_back((p < 32 ? 9 : 4) * 16 + p % 16);
    positions.push_back(p);
  }
  for (int32_t p = 0; p < 5; ++p) {
    slots.push_back(6 * 16 + p);
    positions.push_back(p);
  }
  EXPECT_EQ(m.slot_mapping, slots);
  EXPECT_EQ(m.positions, positions);
}

TEST(AttentionMetadata, FixedBlockTableStride) {
  const std::vector<ScheduledSequence> decodes = {{{3, 7}, 20, 1}};
  const AttentionMetadata m = build_attention_metadata(decodes, {}, 16, 10, 8);
  EXPECT_EQ(m.max_pages, 8);
  EXPECT_EQ(m.block_table, (std::vector<int32_t>{3, 7, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(m.prefill_q_offsets, (std::vector<int32_t>{0}));
  EXPECT_THROW(build_attention_metadata(decodes, {}, 16, 10, 1), Error);
}

TEST(AttentionMetadata, PaddingAppendsNullSequencesAndLeavesRealRowsAlone) {
  const std::vector<ScheduledSequence> decodes = {{{3, 7}, 20, 1}, {{5}, 15, 1}, {{8}, 3, 1}};
  const AttentionMetadata real = build_attention_metadata(decodes, {}, 16, 10);
  const AttentionMetadata m = pad_attention_metadata(real, 8, 8);
  EXPECT_EQ(m.num_seqs, 8);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(m.num_decode_seqs, 8);  // a decode-only batch stays decode-only
  EXPECT_EQ(m.num_decode_tokens, 3);
  EXPECT_EQ(m.num_prefill_seqs, 0);
  EXPECT_EQ(m.num_padding_seqs, 5);
  EXPECT_EQ(m.q_offsets, (std::vector<int32_t>{0, 1, 2, 3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(m.seq_lens, (std::vector<int32_t>{21, 16, 4, 0, 0, 0, 0, 0}));
  ASSERT_EQ(m.block_table.size(), 16u);
  EXPECT_TRUE(std::equal(real.block_table.begin(), real.block_table.end(), m.block_table.begin()));
  for (size_t i = real.block_table.size(); i < m.block_table.size(); ++i) {
    EXPECT_EQ(m.block_table[i], 0) << i;
  }
  EXPECT_EQ(m.slot_mapping, (std::vector<int64_t>{116, 95, 131, -1, -1, -1, -1, -1}));
  EXPECT_EQ(m.max_seq_len, real.max_seq_len);
  EXPECT_THROW(pad_attention_metadata(real, 2, 8), Error);
  EXPECT_THROW(pad_attention_metadata(real, 8, 2), Error);
}

TEST(AttentionMetadata, PaddingAMixedBatchJoinsThePrefillGroup) {
  const AttentionMetadata m = pad_attention_metadata(hand_checked_batch(), 6, 32);
  EXPECT_EQ(m.num_decode_seqs, 2);
  EXPECT_EQ(m.num_prefill_seqs, 4);
  EXPECT_EQ(m.prefill_q_offsets, (std::vector<int32_t>{0, 20, 25, 25, 25}));
  EXPECT_EQ(m.slot_mapping.size(), 32u);
  EXPECT_EQ(m.slot_mapping[27], -1);
}

TEST(AttentionMetadata, RejectsInconsistentSequences) {
  auto build = [](std::vector<ScheduledSequence> decodes, std::vector<ScheduledSequence> prefills) {
    return build_attention_metadata(decodes, prefills, 16, 10);
  };
  try {
    build({}, {{{2}, 10, 10}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prefill sequence 0: 1 pages cannot hold 20 tokens"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(build({{{0}, 3, 1}}, {}), Error);  // null page
  // A decode row takes its next token and up to 7 speculative drafts: 8 query tokens, not 9.
  const AttentionMetadata drafts = build({{{2}, 3, 8}}, {});
  EXPECT_EQ(drafts.max_decode_q_len, 8);
  EXPECT_EQ(drafts.num_decode_tokens, 8);
  EXPECT_EQ(drafts.seq_lens[0], 11);
  EXPECT_THROW(build({{{2}, 3, 9}}, {}), Error);
  EXPECT_THROW(build({}, {{{2}, 3, 0}}), Error);                  // no new tokens
  EXPECT_THROW(build({}, {{{2}, -1, 2}}), Error);                 // negative cache length
  EXPECT_THROW(build({{{10}, 3, 1}}, {}), Error);                 // page beyond the cache
  EXPECT_THROW(build_attention_metadata({}, {}, 24, 10), Error);  // page size
}

// seq_lens, positions and query rows are int32: a sum past INT32_MAX is an error naming the
// counts (the wrapped sum was reported as "token count -2147483648 must be >= 0", and the rows
// of a step wrapped q_offsets negative).
TEST(AttentionMetadata, TokenCountsPastInt32AreRejected) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  const std::vector<ScheduledSequence> long_decode = {{{2}, kMax, 1}};
  EXPECT_QUENCH_ERROR(build_attention_metadata(long_decode, {}, 16, 10),
                      {"decode sequence 0: num_cached_tokens 2147483647 + num_new_tokens 1",
                       "= 2147483648 tokens; allowed: at most 2147483647"});
  const std::vector<ScheduledSequence> long_prefill = {{{2}, kMax - 4, 5}};
  EXPECT_QUENCH_ERROR(build_attention_metadata({}, long_prefill, 16, 10),
                      {"prefill sequence 0: num_cached_tokens 2147483643 + num_new_tokens 5"});
  // Each chunk fits int32 on its own, their rows together do not.
  const std::vector<ScheduledSequence> decode = {{{2}, 3, 1}};
  const std::vector<ScheduledSequence> huge_chunk = {{{}, 0, kMax}};
  EXPECT_QUENCH_ERROR(build_attention_metadata(decode, huge_chunk, 16, 10),
                      {"prefill sequence 0: num_new_tokens 2147483647 brings the step to "
                       "2147483648 query rows; allowed: at most 2147483647"});
}

}  // namespace
}  // namespace quench
