// The decode launcher's split arithmetic (decode_split_plan.h) on the shapes the H200 benchmarks
// measure (132 SMs, 4 CTAs per SM for hd128 FP8: 528 slots; 8 KV heads; 64-token tiles), and its
// invariants over a sweep: 1 <= splits <= kMaxSplits, no split without tiles, nothing divides by
// zero for a launch without tiles.
#include "quench/ops/attention/decode/decode_split_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench::decode {
namespace {

constexpr int32_t kSms = 132;
constexpr int64_t kSlots = 4 * kSms;

// Splits of a batch of `requests` x `tokens` with 8 KV heads, under the per-SM rule `split_ctas`.
int64_t splits_of(int64_t requests, int64_t tokens, int32_t split_ctas) {
  const int64_t base = requests * 8;
  const int64_t tiles = (tokens + kTileTokens - 1) / kTileTokens;
  return choose_num_splits(base, kSlots, split_target_ctas(base, kSlots, kSms, tiles, split_ctas),
                           tiles);
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

namespace quench::decode {
namespace {

// hd128 on the H200: FP8 16 KB stages (3 at 4 CTAs per SM, the deep ring 6 at 2 per SM and 8 at
// 1), bf16 32 KB stages.
RingDepthInputs hd128_fp8(int64_t ctas_per_sm, int64_t split_tiles) {
  RingDepthInputs in;
  in.default_stages = 3;
  in.occupancy_ctas = 4;
  const int32_t deepest[] = {0, 8, 6, 4, 3};
  in.deepest_stages = ctas_per_sm >= 1 && ctas_per_sm <= 4 ? deepest[ctas_per_sm] : 0;
  in.ctas_per_sm = ctas_per_sm;
  in.split_tiles = split_tiles;
  return in;
}

TEST(DecodeRingDepth, TheDefaultRingFollowsTheStageSize) {
  EXPECT_EQ(default_small_grid_ring(16384), SmallGridRing::kShallow);  // FP8 hd64 / hd128
  EXPECT_EQ(default_small_grid_ring(16385), SmallGridRing::kDeep);
  EXPECT_EQ(default_small_grid_ring(32768), SmallGridRing::kDeep);  // bf16 hd128, FP8 hd256
}

TEST(DecodeRingDepth, MeasuredShapesGetTheDepthTheLogRecords) {
  // B1 x 32k and B2 x 32k FP8: 2 CTAs per SM, 16- and 32-tile splits.
  EXPECT_EQ(ring_stages(hd128_fp8(2, 16), SmallGridRing::kShallow), 2);
  EXPECT_EQ(ring_stages(hd128_fp8(2, 32), SmallGridRing::kShallow), 2);
  EXPECT_EQ(ring_stages(hd128_fp8(2, 16), SmallGridRing::kDeep), 6);  // the rule before
  EXPECT_EQ(ring_stages(hd128_fp8(2, 16), SmallGridRing::kFullOccupancy), 3);
  // B1 x 1k: 1 CTA per SM with 2-tile splits; the deep ring keeps the default.
  EXPECT_EQ(ring_stages(hd128_fp8(1, 2), SmallGridRing::kDeep), 3);
  EXPECT_EQ(ring_stages(hd128_fp8(1, 2), SmallGridRing::kShallow), 2);
  // Full grids (B64 x 4096, B1 x 128k, B4 x 32k: 4 per SM) keep the default whatever the rule.
  for (const SmallGridRing ring :
       {SmallGridRing::kShallow, SmallGridRing::kDeep, SmallGridRing::kFullOccupancy}) {
    EXPECT_EQ(ring_stages(hd128_fp8(4, 64), ring), 3);
    EXPECT_EQ(ring_stages(hd128_fp8(8, 64), ring), 3);  // several waves
    EXPECT_EQ(ring_stages(hd128_fp8(0, 0), ring), 3);   // no CTAs at all
  }
}

TEST(DecodeRingDepth, TheCapBoundsEveryLaunch) {
  RingDepthInputs capped = hd128_fp8(2, 16);
  capped.max_stages = 4;
  EXPECT_EQ(ring_stages(capped, SmallGridRing::kDeep), 4);     // 6 capped
  EXPECT_EQ(ring_stages(capped, SmallGridRing::kShallow), 2);  // under the cap already
  RingDepthInputs full = hd128_fp8(4, 64);
  full.max_stages = 2;
  EXPECT_EQ(ring_stages(full, SmallGridRing::kShallow), 2);  // the full grid's 3 capped
}

TEST(DecodeRingDepth, DepthStaysBetweenTwoAndTheDeepestRing) {
  for (const SmallGridRing ring :
       {SmallGridRing::kShallow, SmallGridRing::kDeep, SmallGridRing::kFullOccupancy}) {
    for (int64_t ctas = 0; ctas <= 6; ++ctas) {
      for (int64_t tiles = 0; tiles <= 40; ++tiles) {
        const RingDepthInputs in = hd128_fp8(ctas, tiles);
        const int32_t stages = ring_stages(in, ring);
        ASSERT_GE(stages, 2);
        ASSERT_LE(stages, std::max(in.default_stages, in.deepest_stages));
      }
    }
  }
}

TEST(DecodeSplitPlan, EarlyMergeLaunchWhereItsWarmUpOverlapsTheMainGrid) {
  // The measured shapes (FP8 KV, 32 q heads: one merge row per q head and request).
  EXPECT_TRUE(early_merge_launch_pays(64, kSlots, 32, kSms));       // B1 x 1k
  EXPECT_TRUE(early_merge_launch_pays(256, kSlots, 32, kSms));      // B1 x 32k
  EXPECT_TRUE(early_merge_launch_pays(256, kSlots, 64, kSms));      // B2 x 32k
  EXPECT_TRUE(early_merge_launch_pays(512, kSlots, 128, kSms));     // B4 x 32k
  EXPECT_FALSE(early_merge_launch_pays(528, kSlots, 64, kSms));     // B2 x 128k: every slot
  EXPECT_FALSE(early_merge_launch_pays(512, kSlots, 256, kSms));    // B8 x 32k
  EXPECT_FALSE(early_merge_launch_pays(4096, kSlots, 8192, kSms));  // bf16 KV B256 x 2048
  // The bounds themselves.
  EXPECT_TRUE(early_merge_launch_pays(kSlots - 1, kSlots, kSms, kSms));
  EXPECT_FALSE(early_merge_launch_pays(kSlots, kSlots, 1, kSms));
  EXPECT_FALSE(early_merge_launch_pays(1, kSlots, kSms + 1, kSms));
}

}  // namespace
}  // namespace quench::decode
