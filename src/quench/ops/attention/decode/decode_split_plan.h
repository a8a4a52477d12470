// How many KV splits a decode launch cuts each work item (request, KV head, row group) into, and
// how deep its CTAs' pipeline ring is: host-only arithmetic, kept apart from the launcher so that
// the CPU tests can reach every branch (a launch without KV tiles once divided by zero here and
// took the GPU suite down).
#pragma once

#include <cstdint>

namespace quench::decode {

// A split covers at least this many 64-token tiles, so the merge stays cheap.
inline constexpr int kMinTilesPerSplit = 2;
// Large batches split only into splits of at least this many tiles.
inline constexpr int kMinTilesPerLongSplit = 16;
// Small batches (fewer work items than CTA slots) split until the grid holds this many CTAs per
// SM (their pipeline depth: ring_stages below).
// Fewer, longer splits amortise each CTA's fixed costs (metadata and block-table latencies
// before its first load, the ring's fill, the epilogue, its share of the merge) over more tiles.
// Measured on the H200 at B1 x 32k (forced split counts, 3 stages): 16 splits (1 CTA per SM)
// 25.2 us, 32 (2 per SM) 24.3 us, 64 (4 per SM) 26.8 us.
inline constexpr int kSplitCtasPerSm = 2;
// Splits of at least this many tiles keep every CTA slot (split_target_ctas, auto).
inline constexpr int kMinTilesPerFillSplit = 32;

// KV splits per work item, from `base` work items, `slots` CTAs the GPU holds at once,
// `target_ctas` CTAs that small batches split up to (<= slots) and `tiles` KV tiles per item.
// - base < slots (small batch, long context): split until the grid holds target_ctas CTAs,
//   keeping at least kMinTilesPerSplit tiles per split so that the merge stays cheap; then as
//   few splits as cover the tiles in the same ceil(tiles / splits) tiles each (a split left
//   without tiles would cost a CTA and a merge term for nothing).
// - otherwise: 1-3 splits, whichever fills the last wave of CTAs best (64 x 4096 on 396 slots:
//   512 CTAs leave the second wave 29% full, 1536 CTAs fill four waves 97%), keeping at least
//   kMinTilesPerLongSplit tiles per split; another split must gain 5% of wave efficiency.
// Always at least 1 and at most kMaxSplits; 1 where there is nothing to split (no work items or
// no tiles, e.g. a batch of padding only).
int64_t choose_num_splits(int64_t base, int64_t slots, int64_t target_ctas, int64_t tiles);

// The pipeline depth of a launch whose grid leaves every SM fewer CTAs than fit (a small
// batch): kFullOccupancy keeps the depth of the kernel's full occupancy; kDeep the deepest ring
// those CTAs leave room for, up to the tiles a split covers; kShallow two stages.
enum class SmallGridRing { kFullOccupancy, kDeep, kShallow };

// Stages of at most this many bytes (the 64-token tile of an FP8 cache at head_dim <= 128) run
// small grids on kShallow; larger ones (bf16, FP8 head_dim 256) on kDeep. Measured on the H200
// (bench/LOG.md, seventh session; same binary, a 2-stage cap against the deep ring, two runs
// each): FP8 B1 x 32k 24.8 / 24.1 / 24.4 us vs 24.9-25.2 / 24.8-25.0 / 25.3-25.5 (NHD page 16 /
// page 64 / HND), B2 x 32k 40.3 / 39.3 / 39.9 vs 41.7-41.9 / 41.1-41.2 / 41.8, where 2 CTAs x 6
// stages per SM kept loads waiting ~5 us from issue to landing; bf16 B2 x 32k page 64 lost 2%
// (71.6 vs 70.2-70.6) and keeps the deep ring.
inline constexpr int32_t kShallowRingMaxStageBytes = 16 * 1024;

// The default SmallGridRing for pipeline stages of `stage_bytes`.
SmallGridRing default_small_grid_ring(int32_t stage_bytes);

// What ring_stages needs to know of a launch.
struct RingDepthInputs {
  int32_t default_stages = 2;  // the kernel's depth at full occupancy (>= 2)
  int32_t occupancy_ctas = 1;  // CTAs per SM the kernel fits at that depth
  int32_t deepest_stages = 0;  // the deepest ring ctas_per_sm CTAs leave room for; 0: unknown
  int64_t ctas_per_sm = 0;     // this grid's CTAs per SM, rounded up
  int64_t split_tiles = 0;     // KV tiles one split covers
  int32_t max_stages = 0;      // a cap on any launch (QUENCH_DECODE_STAGES, >= 2); 0: none
};

// The pipeline depth of a launch: default_stages unless its grid is small (1 <= ctas_per_sm <
// occupancy_ctas); then 2 (kShallow), or the deepest ring capped at split_tiles and never under
// default_stages (kDeep; B1 x 1k's 2-tile splits keep the default); then at most max_stages.
int32_t ring_stages(const RingDepthInputs& in, SmallGridRing ring);

// The CTAs a small batch splits up to (choose_num_splits' target_ctas) on `sm_count` SMs, for
// `split_ctas` CTAs per SM (1-4; 0: every slot; -1: auto). Auto: kSplitCtasPerSm per SM where
// filling every slot would leave splits shorter than kMinTilesPerFillSplit tiles (their per-CTA
// start-up and merge terms then dominate), else every slot. Why (bench/LOG.md, fifth session,
// H200): against the fill rule of the session before, 2 per SM won at B1 x 32k (25.0 vs 26.6 us;
// 8-tile splits) and B2 x 32k (41.3 vs 42.9; 16-tile splits), and lost 1-2% wherever filling
// gives splits of 32 tiles or more (B4 x 32k, B1 x 128k, B2-B8 x 128k, B8 x 32k, B16 x 16k).
// Auto, measured as a whole (sixth session, same call as the 2-per-SM rule): B4 x 32k 73.7 vs
// 76.1 us, B8 x 32k 137.4 vs 139.2, B16 x 16k 137.1 vs 141.5, B2 / B4 / B8 x 128k 137.9 / 261.2 /
// 511.1 vs 140.6 / 266.2 / 523.0, the rest equal; it is the default. Never more than `slots`.
int64_t split_target_ctas(int64_t base, int64_t slots, int32_t sm_count, int64_t tiles,
                          int32_t split_ctas);

// Whether the split merge after a main grid of `grid_ctas` CTAs (of `slots` the GPU holds at
// once, on `sm_count` SMs) launches early, once every main CTA is resident, and warms its code
// up while the main grid runs (DecodeKernelArgs::early_merge_launch); `merge_rows` is its grid
// (one CTA per output row). Only where that can happen, measured on the H200 (bench/LOG.md,
// fifteenth session): B1 x 1k 7.5 -> 7.1 us, B1 x 32k 24.6 -> 24.0, B2 x 32k 40.0 -> 39.5, and
//  - a main grid that fills every slot leaves the merge CTAs no room beside it (B2 x 128k, 528
//    CTAs in 528 slots: 136.4 -> 138.8 us launched early): no;
//  - a merge of more than one row (one CTA) per SM: no. The warm-up fills each SM's instruction
//    cache once, and a larger merge grid's later CTAs, which start after the main grid has
//    ended, only add their passes (bf16 KV B256 x 2048, 8192 rows: 533 -> 555 us).
bool early_merge_launch_pays(int64_t grid_ctas, int64_t slots, int64_t merge_rows,
                             int32_t sm_count);

}  // namespace quench::decode
