// The persistent Hopper prefill kernel's work-item order (prefill_hopper_schedule.h): every
// (rank, pair) item exactly once, heaviest first inside each group, group sizes that keep a
// group's K/V within the L2 budget unless the grid needs more items to balance, a launch's
// WsItems (one group of every pair unless L2 groups are asked for), and how the items are dealt
// to the CTAs (ws_item_after: every item to one CTA, the snake's balance on the bench's shapes).
#include "quench/ops/attention/prefill/hopper/prefill_hopper_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
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

// Each CTA's items in the order ws_item_after deals them.
std::vector<std::vector<int>> items_by_cta(const WsItems& items, int ctas) {
  std::vector<std::vector<int>> by_cta(static_cast<size_t>(ctas));
  for (int cta = 0; cta < ctas; ++cta) {
    for (int item = ws_item_after(-1, cta, ctas, items); item >= 0;
         item = ws_item_after(item, cta, ctas, items)) {
      by_cta[static_cast<size_t>(cta)].push_back(item);
      if (by_cta[static_cast<size_t>(cta)].size() > static_cast<size_t>(items.count)) break;
    }
  }
  return by_cta;
}

TEST(PrefillHopperSchedule, EveryItemDealtToOneCtaInIncreasingOrder) {
  for (const WsItemOrder order : {WsItemOrder::kSnake, WsItemOrder::kRoundRobin}) {
    for (const int pairs : {1, 7, 16, 128}) {
      for (const int m_tiles : {1, 3, 32, 257}) {
        for (const int per_group : {1, 5, 16, 128}) {
          if (per_group > pairs) continue;
          for (const int ctas : {1, 7, 132, 1000}) {
            SCOPED_TRACE(testing::Message()
                         << (order == WsItemOrder::kSnake ? "snake" : "round robin") << ", "
                         << pairs << " pairs, " << m_tiles << " m tiles, " << per_group
                         << " per group, " << ctas << " CTAs");
            const WsItems items{pairs * m_tiles, 4,         pairs,
                                m_tiles,         per_group, order == WsItemOrder::kSnake ? 1 : 0};
            std::vector<int> seen(static_cast<size_t>(items.count), 0);
            for (const std::vector<int>& list : items_by_cta(items, ctas)) {
              ASSERT_LE(list.size(), static_cast<size_t>(items.count));
              for (size_t i = 0; i < list.size(); ++i) {
                ASSERT_GE(list[i], 0);
                ASSERT_LT(list[i], items.count);
                if (i > 0) {
                  ASSERT_GT(list[i], list[i - 1]) << "a CTA walks its items forward";
                }
                ++seen[static_cast<size_t>(list[i])];
              }
            }
            for (size_t i = 0; i < seen.size(); ++i)
              ASSERT_EQ(seen[i], 1) << "item " << i;
          }
        }
      }
    }
  }
}

// The kernel starts each CTA's walk from ws_before_first_item(), blockIdx.x - gridDim.x: any
// negative item means "before the first".
TEST(PrefillHopperSchedule, AnyNegativeItemStartsTheWalk) {
  for (const WsItemOrder order : {WsItemOrder::kSnake, WsItemOrder::kRoundRobin}) {
    const WsItems items = ws_items(4096, 4096, 32, 8, 4, 128, 2, 128, 132, true, order);
    for (int cta = 0; cta < 132; ++cta) {
      EXPECT_EQ(ws_item_after(cta - 132, cta, 132, items), ws_item_after(-1, cta, 132, items));
    }
  }
}

TEST(PrefillHopperSchedule, OneItemPerCtaWhenTheGridHasOnePerItem) {
  const WsItems items = ws_items(1000, 1000, 32, 8, 3, 128, 1, 128, 32 * 3 * 8, true);
  for (int cta = 0; cta < items.count; cta += 13) {
    EXPECT_EQ(ws_item_after(-1, cta, items.count, items), cta);
    EXPECT_EQ(ws_item_after(cta, cta, items.count, items), -1);
  }
}

// The busiest CTA's work over the mean, on the bench's causal shapes (32 q / 8 KV heads, hd128,
// 128-key tiles, 132 CTAs): an item of rank r covers ceil((len - 32 r) / 128) KV tiles plus a
// fixed cost of about 1.4 tiles (bench/LOG.md, eighth session: ~5600 cycles per item boundary,
// ~3900 per tile).
double busiest_over_mean(int len, int seqs, int kv_bytes, WsItemOrder order) {
  constexpr int kCtas = 132;
  const WsItems items = ws_items(len, len, 32, 8, seqs, 128, kv_bytes, 128, kCtas, true, order);
  std::vector<double> work;
  for (const std::vector<int>& list : items_by_cta(items, kCtas)) {
    double sum = 0.0;
    for (const int item : list) {
      const WsItemCoordinates at =
          ws_item_coordinates(item, items.pairs, items.m_tiles, items.pairs_per_group);
      sum += (len - 32 * at.rank + 127) / 128 + 1.4;
    }
    work.push_back(sum);
  }
  const double mean = std::accumulate(work.begin(), work.end(), 0.0) / kCtas;
  return *std::max_element(work.begin(), work.end()) / mean;
}

TEST(PrefillHopperSchedule, SnakeBalancesTheBenchShapes) {
  for (const int kv_bytes : {1, 2}) {
    for (int len = 1024, seqs = 16; len <= 16384; len *= 2, seqs /= 2) {
      SCOPED_TRACE(testing::Message() << seqs << " x " << len << ", " << kv_bytes << "-byte K/V");
      const double snake = busiest_over_mean(len, seqs, kv_bytes, WsItemOrder::kSnake);
      const double round_robin = busiest_over_mean(len, seqs, kv_bytes, WsItemOrder::kRoundRobin);
      EXPECT_GT(round_robin, 1.025);  // CTA 0 takes every round's heaviest item
      EXPECT_LE(snake, round_robin + 1e-9);
      // 16 x 1k FP8 (two groups of 15.5 rounds) stays at round robin's 3.1%.
      if (!(len == 1024 && kv_bytes == 1)) {
        EXPECT_LT(snake, 1.01);
      }
    }
  }
}

TEST(PrefillHopperSchedule, RoundRobinForShortChunksSnakeBeyond) {
  EXPECT_EQ(default_item_order(1), WsItemOrder::kRoundRobin);
  EXPECT_EQ(default_item_order(1024), WsItemOrder::kRoundRobin);
  EXPECT_EQ(default_item_order(1025), WsItemOrder::kSnake);
  EXPECT_EQ(default_item_order(2048), WsItemOrder::kSnake);
  EXPECT_EQ(default_item_order(16384), WsItemOrder::kSnake);
}

TEST(PrefillHopperSchedule, PerTileHeadsFirstWhereASequencesKvIsSmall) {
  // 8 KV heads at hd128: FP8 up to 4k tokens (8 MiB), bf16 up to 2k.
  EXPECT_TRUE(per_tile_heads_first(1024, 128, 1, 8));
  EXPECT_TRUE(per_tile_heads_first(4096, 128, 1, 8));
  EXPECT_FALSE(per_tile_heads_first(8192, 128, 1, 8));  // 16 MiB: ranks first measured 728 / 725
  EXPECT_TRUE(per_tile_heads_first(2048, 128, 2, 8));
  EXPECT_FALSE(per_tile_heads_first(8192, 256, 2, 8));  // 64 MiB: ranks first measured 624 / 611
  // No int overflow on long sequences.
  EXPECT_FALSE(per_tile_heads_first(1 << 20, 256, 2, 64));
}

TEST(PrefillHopperSchedule, ScheduleSizeCountsEveryMTileOfTheLongestChunk) {
  // 1000 tokens x 4 q heads per KV head = 4000 packed rows -> 32 m tiles of 128.
  EXPECT_EQ(ws_schedule_size(1000, 32, 8, 3, 128), 32 * 3 * 8);
  EXPECT_EQ(ws_schedule_size(1, 32, 8, 1, 128), 8);
}

// The default schedule rule on the shapes the H200 measured (bench/LOG.md, sixth, tenth,
// eleventh and fourteenth sessions) and the H100 (forty-seventh).
TEST(PrefillHopperSchedule, PersistentByDefaultWhereItWasMeasuredToWin) {
  // bf16 over bf16: persistent up to 2k-token chunks at head_dim 64 and 256 ...
  for (const int head_dim : {64, 256}) {
    for (const int page : {16, 32, 64}) {
      EXPECT_TRUE(persistent_by_default(true, head_dim, page, 1024));
      EXPECT_TRUE(persistent_by_default(true, head_dim, page, kPersistentMaxQueryLen));
    }
  }
  // ... at head_dim 128 persistent up to 1k-token chunks, per tile up to 4k and persistent
  // beyond ...
  for (const int page : {16, 32, 64}) {
    EXPECT_TRUE(persistent_by_default(true, 128, page, 64));
    EXPECT_TRUE(persistent_by_default(true, 128, page, kPersistentMaxQueryLenHd128));
    EXPECT_FALSE(persistent_by_default(true, 128, page, kPersistentMaxQueryLenHd128 + 1));
    EXPECT_FALSE(persistent_by_default(true, 128, page, 2048));
    EXPECT_FALSE(persistent_by_default(true, 128, page, kPerTileMaxQueryLenHd128));
    EXPECT_TRUE(persistent_by_default(true, 128, page, kPerTileMaxQueryLenHd128 + 1));
    EXPECT_TRUE(persistent_by_default(true, 128, page, 16384));
    // (soft-capped: per tile at every length)
    EXPECT_FALSE(persistent_by_default(true, 128, page, 1024, /*soft_cap=*/true));
    EXPECT_FALSE(persistent_by_default(true, 128, page, 16384, /*soft_cap=*/true));
  }
  // ... at every length at head_dim 64 in pages of 64 ...
  EXPECT_TRUE(persistent_by_default(true, 64, 64, 8192));
  // ... and per tile beyond 2k at head_dim 64 in smaller pages and at head_dim 256.
  EXPECT_FALSE(persistent_by_default(true, 64, 16, 8192));
  EXPECT_FALSE(persistent_by_default(true, 64, 32, 8192));
  EXPECT_FALSE(persistent_by_default(true, 256, 16, 8192));
  EXPECT_FALSE(persistent_by_default(true, 256, 64, kPersistentMaxQueryLen + 1));
  // The FP8-KV kinds: per tile at every length, head_dim and page size.
  for (const int head_dim : {64, 128, 256}) {
    for (const int page : {16, 32, 64}) {
      for (const int len : {1, 1024, kPersistentMaxQueryLen, 16384}) {
        EXPECT_FALSE(persistent_by_default(false, head_dim, page, len));
      }
    }
  }
}

}  // namespace
}  // namespace quench::prefill_hopper
