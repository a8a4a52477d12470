// The decode launcher's split arithmetic (decode_split_plan.h) on the shapes the H200 benchmarks
// measure (132 SMs, 4 CTAs per SM for hd128 FP8: 528 slots; 8 KV heads; 64-token tiles), and its
// invariants over a sweep: 1 <= splits <= kMaxSplits, no split without tiles, nothing divides by
// zero for a launch without tiles.
#include "quench/ops/attention/decode/decode_split_plan.h"

#include <gtest/gtest.h>

#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench::decode {
namespace {

constexpr int32_t kSms = 132;
constexpr int64_t kSlots = 4 * kSms;

// Splits of a batch of `requests` x `tokens` with 8 KV heads, under the per-SM rule `split_ctas`.
int64_t splits_of(int64_t requests, int64_t tokens, int32_t split_ctas) {
  const int64_t base = requests * 8;
  const int64_t tiles = (tokens + kTileTokens - 1) / kTileTokens;
  return choose_num_splits(base, kSlots,
                           split_target_ctas(base, kSlots, kSms, tiles, split_ctas), tiles);
}

TEST(DecodeSplitPlan, MeasuredShapesGetTheSplitsTheLogRecords) {
  // 2 CTAs per SM, as in the fifth session's record.
  EXPECT_EQ(splits_of(1, 32768, kSplitCtasPerSm), 32);
  EXPECT_EQ(splits_of(2, 32768, kSplitCtasPerSm), 16);
  EXPECT_EQ(splits_of(4, 32768, kSplitCtasPerSm), 8);
  EXPECT_EQ(splits_of(1, 131072, kSplitCtasPerSm), 33);
  EXPECT_EQ(splits_of(1, 1024, kSplitCtasPerSm), 8);
  EXPECT_EQ(splits_of(64, 4096, kSplitCtasPerSm), 1);
  // Every slot (fill), as in the fourth session's record, minus its empty split at B2 x 32k.
  EXPECT_EQ(splits_of(1, 32768, 0), 64);
  EXPECT_EQ(splits_of(2, 32768, 0), 32);
  EXPECT_EQ(splits_of(4, 32768, 0), 16);
  EXPECT_EQ(splits_of(1, 131072, 0), 64);
  // Auto (the launcher's default): 2 per SM where filling leaves splits under
  // kMinTilesPerFillSplit tiles, else fill.
  EXPECT_EQ(splits_of(1, 32768, -1), 32);   // fill: 8-tile splits
  EXPECT_EQ(splits_of(2, 32768, -1), 16);   // fill: 16-tile splits
  EXPECT_EQ(splits_of(4, 32768, -1), 16);   // fill: 32-tile splits
  EXPECT_EQ(splits_of(1, 131072, -1), 64);  // fill: 32-tile splits
  EXPECT_EQ(splits_of(8, 131072, -1), 8);
}

TEST(DecodeSplitPlan, LaunchesWithoutTilesOrWorkDoNotSplit) {
  for (const int32_t rule : {-1, 0, 1, 2, 4}) {
    EXPECT_EQ(choose_num_splits(16, kSlots, split_target_ctas(16, kSlots, kSms, 0, rule), 0), 1);
    EXPECT_EQ(choose_num_splits(0, kSlots, split_target_ctas(0, kSlots, kSms, 10, rule), 10), 1);
  }
}

TEST(DecodeSplitPlan, SplitsStayInRangeAndNoneIsEmpty) {
  for (const int32_t rule : {-1, 0, 1, 2, 3, 4}) {
    for (int64_t base = 1; base <= 2048; base = base * 3 / 2 + 1) {
      for (int64_t tiles = 1; tiles <= 4096; tiles = tiles * 2 + 1) {
        const int64_t target = split_target_ctas(base, kSlots, kSms, tiles, rule);
        ASSERT_GE(target, 1);
        ASSERT_LE(target, kSlots);
        const int64_t splits = choose_num_splits(base, kSlots, target, tiles);
        ASSERT_GE(splits, 1) << base << " items, " << tiles << " tiles";
        ASSERT_LE(splits, kMaxSplits) << base << " items, " << tiles << " tiles";
        // Splits take ceil(tiles / splits) tiles each in order: the last one must get some.
        const int64_t per_split = (tiles + splits - 1) / splits;
        ASSERT_GT(tiles - (splits - 1) * per_split, 0) << base << " items, " << tiles << " tiles";
      }
    }
  }
}

}  // namespace
}  // namespace quench::decode
