// The persistent Hopper prefill kernel's work-item order (prefill_hopper_schedule.h): every
// (rank, pair) item exactly once, heaviest first inside each group, group sizes that keep a
// group's K/V within the L2 budget unless the grid needs more items to balance, and a launch's
// WsItems (one group of every pair unless L2 groups are asked for).
#include "quench/ops/attention/prefill/hopper/prefill_hopper_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace quench::prefill_hopper {
namespace {

TEST(PrefillHopperSchedule, EveryItemOnceRankMajorInsideEachGroup) {
  for (const int pairs : {1, 7, 8, 56, 128}) {
    for (const int m_tiles : {1, 3, 32, 63}) {
      for (const int per_group : {1, 5, 8, 32, 128}) {
        if (per_group > pairs) continue;
        SCOPED_TRACE(testing::Message() << pairs << " pairs, " << m_tiles << " m tiles, "
                                        << per_group << " per group");
        std::vector<int> seen(static_cast<size_t>(pairs) * m_tiles, 0);
        int previous_group = -1, previous_rank = -1;
        for (int item = 0; item < pairs * m_tiles; ++item) {
          const WsItemCoordinates at = ws_item_coordinates(item, pairs, m_tiles, per_group);
          ASSERT_GE(at.rank, 0);
          ASSERT_LT(at.rank, m_tiles);
          ASSERT_GE(at.pair, 0);
          ASSERT_LT(at.pair, pairs);
          ++seen[static_cast<size_t>(at.pair) * m_tiles + at.rank];
          const int group = at.pair / per_group;
          ASSERT_GE(group, previous_group) << "item " << item << ": groups come in order";
          if (group == previous_group) {
            ASSERT_GE(at.rank, previous_rank) << "item " << item << ": heaviest first in a group";
          }
          previous_group = group;
          previous_rank = at.rank;
        }
        for (size_t i = 0; i < seen.size(); ++i)
          ASSERT_EQ(seen[i], 1) << "item " << i;
      }
    }
  }
}

TEST(PrefillHopperSchedule, GroupSizeFollowsL2BudgetAndGridBalance) {
  // 16 sequences x 8 KV heads of 1k bf16 tokens, hd128: 512 KiB of K/V per pair, 32 m tiles.
  EXPECT_EQ(ws_pairs_per_group(128, 32, 512 << 10, 132), 32);  // 16 MiB of K/V per group
  // FP8 K/V: half the bytes, twice the pairs.
  EXPECT_EQ(ws_pairs_per_group(128, 32, 256 << 10, 132), 64);
  // One 16k bf16 sequence: 8 MiB per pair, 512 m tiles; L2 takes two pairs, balance needs 2.
  EXPECT_EQ(ws_pairs_per_group(8, 512, int64_t{8} << 20, 132), 2);
  // Short chunks on a big grid: balance (4 items per CTA) wins over the L2 budget.
  EXPECT_EQ(ws_pairs_per_group(1000, 1, int64_t{8} << 20, 132), 528);
  // Never more than the pairs there are, never fewer than one.
  EXPECT_EQ(ws_pairs_per_group(3, 4, 1, 132), 3);
  EXPECT_EQ(ws_pairs_per_group(64, 1024, int64_t{1} << 30, 1), 1);
}

TEST(PrefillHopperSchedule, ItemsOfALaunch) {
  // 2 sequences of 8k FP8 tokens, 32 q / 8 KV heads, hd128: 256 m tiles per pair, 16 pairs,
  // 2 MiB of K/V (K and V, one byte each) per pair.
  const WsItems all = ws_items(8192, 8192, 32, 8, 2, 128, 1, 128, 132, /*l2_groups=*/false);
  EXPECT_EQ(all.count, ws_schedule_size(8192, 32, 8, 2, 128));
  EXPECT_EQ(all.group, 4);
  EXPECT_EQ(all.pairs, 16);
  EXPECT_EQ(all.m_tiles, 256);
  EXPECT_EQ(all.pairs_per_group, 16);
  const WsItems l2 = ws_items(8192, 8192, 32, 8, 2, 128, 1, 128, 132, /*l2_groups=*/true);
  EXPECT_EQ(l2.count, all.count);
  EXPECT_EQ(l2.pairs_per_group, ws_pairs_per_group(16, 256, int64_t{2} << 20, 132));
  EXPECT_EQ(l2.pairs_per_group, 8);  // 16 MiB of K/V per group
  // One group of every pair is the rank-major order over the whole batch: rank i / pairs,
  // pair i % pairs (KV head i % H, sequence i / H % num_seqs).
  for (int item = 0; item < all.count; item += 37) {
    const WsItemCoordinates at = ws_item_coordinates(item, all.pairs, all.m_tiles, all.pairs);
    EXPECT_EQ(at.rank, item / 16);
    EXPECT_EQ(at.pair % 8, item % 8);
    EXPECT_EQ(at.pair / 8, item / 8 % 2);
  }
}

TEST(PrefillHopperSchedule, ScheduleSizeCountsEveryMTileOfTheLongestChunk) {
  // 1000 tokens x 4 q heads per KV head = 4000 packed rows -> 32 m tiles of 128.
  EXPECT_EQ(ws_schedule_size(1000, 32, 8, 3, 128), 32 * 3 * 8);
  EXPECT_EQ(ws_schedule_size(1, 32, 8, 1, 128), 8);
}

// The default schedule rule on the shapes the H200 measured (bench/LOG.md, sixth and tenth
// sessions).
TEST(PrefillHopperSchedule, PersistentByDefaultWhereItWasMeasuredToWin) {
  // Every kind: persistent up to 2k-token chunks; above, per tile for the FP8-KV kinds (page 16)
  // and bf16 at head_dim 64 / 256 in 16-token pages.
  for (const bool bf16 : {true, false}) {
    EXPECT_TRUE(persistent_by_default(bf16, 128, 16, 1024));
    EXPECT_TRUE(persistent_by_default(bf16, 128, 16, kPersistentMaxQueryLen));
  }
  EXPECT_FALSE(persistent_by_default(false, 128, 16, kPersistentMaxQueryLen + 1));
  EXPECT_FALSE(persistent_by_default(false, 128, 16, 16384));
  EXPECT_FALSE(persistent_by_default(true, 64, 16, 8192));
  EXPECT_FALSE(persistent_by_default(true, 256, 16, 8192));
  EXPECT_TRUE(persistent_by_default(true, 256, 16, kPersistentMaxQueryLen));
  // bf16 over bf16 at head_dim 128: persistent at every length in every page size.
  for (const int page : {16, 32, 64}) {
    EXPECT_TRUE(persistent_by_default(true, 128, page, 16384));
    EXPECT_TRUE(persistent_by_default(true, 128, page, kPersistentMaxQueryLen + 1));
  }
  // ... and at head_dim 64 in pages of 64.
  EXPECT_TRUE(persistent_by_default(true, 64, 64, 8192));
  EXPECT_FALSE(persistent_by_default(true, 64, 32, 8192));
  // Not for the FP8-KV kinds, nor at head_dim 256 (not measured at page 64).
  EXPECT_FALSE(persistent_by_default(false, 128, 64, 8192));
  EXPECT_FALSE(persistent_by_default(true, 256, 64, 8192));
}

}  // namespace
}  // namespace quench::prefill_hopper
