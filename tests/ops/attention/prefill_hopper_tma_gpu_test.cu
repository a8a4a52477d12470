// GPU tests aimed at the TMA loads of the warp-specialized Hopper prefill kernel
// (ws_producer in prefill_hopper_ws_producer.cuh; the maps of kv_tensor_map.h), through the
// public prefill_attention_hopper entry, against the CPU reference at the SPEC §3 tolerances:
// - every page size (one TMA box per page: 8, 4 or 2 per 128-key tile) in both layouts, head_dim
//   64 (bf16 q: one 128-byte box per row, FP8 KV rows half out of bounds) and 128 (bf16 KV: two
//   column boxes per row), per-head scales;
// - last tiles that end inside a page (keys 1, page - 1, page + 1 and 127 past a tile start),
//   over a cache whose bytes past every sequence's end are NaN: TMA loads whole pages, so those
//   rows reach shared memory, and V rows past kv_end must be zeroed before P V (P = 0 times NaN
//   is NaN) — a NaN output or NaN-free error map pins this down;
// - single-tile sequences (the tail tile is tile 0, whose zero-P product the bf16 consumers
//   issue too) and long ones whose tail tile lands in every ring slot.
// Skipped unless the device is sm_90. The tensor-map probe (kv_tensor_map_gpu_test.cu) checks
// the boxes alone, byte by byte.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "harness/attention_problem.h"
#include "prefill_test_support.h"

namespace quench::testing_support {
namespace {

// Sequences whose last KV tile holds 1, page - 1, page + 1 and 127 keys (and one whole tile),
// with chunks of several lengths.
std::vector<SeqShape> tail_seqs(int page_size) {
  return {{1, 1},
          {page_size - 1, 128 + page_size - 1},
          {100, 256 + page_size + 1},
          {300, 384 + 127},
          {128, 512}};
}

TEST(PrefillHopperTma, EveryPageSizeLayoutAndHeadDimWithPartialTails) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 2600;
  for (const HopperKindCase& kind : kHopperKinds) {
    for (const int head_dim : {64, 128}) {
      if (head_dim == 64 && kind.dtypes.q != DType::kBF16) continue;  // FP8 q: head_dim 128
      for (const int page_size : {16, 32, 64}) {
        for (const KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
          SCOPED_TRACE(kind.name);
          AttentionProblemConfig c = base_config(kind.dtypes, head_dim, seed++);
          c.num_q_heads = 6;
          c.num_kv_heads = 3;  // the last KV head's rows sit at the end of NHD token rows
          c.page_size = page_size;
          c.layout = layout;
          c.per_head_kv_scales = true;
          c.seqs = tail_seqs(page_size);
          expect_matches_reference(c, kind.run);
        }
      }
    }
  }
}

// Long sequences whose tail tiles fall in every ring slot (tile counts 9..12 over rings of 2,
// 3 and 4 slots) next to graph padding, with GQA 4 (several CTAs per sequence, each its own
// last tile), soft-cap and sinks.
TEST(PrefillHopperTma, TailTilesInEveryRingSlot) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 2700;
  for (const HopperKindCase& kind : kHopperKinds) {
    SCOPED_TRACE(kind.name);
    AttentionProblemConfig c = base_config(kind.dtypes, 128, seed++);
    c.num_q_heads = 8;
    c.num_kv_heads = 2;
    c.page_size = 16;
    c.layout = KvLayout::kNHD;
    c.logit_soft_cap = 30.0f;
    c.sinks = true;
    c.seqs = {{70, 1100}, {0, 0}, {33, 1200}, {128, 1400}, {1, 1531}};
    if (is_fp8_pv(kind)) c.logit_soft_cap = 5.0f;  // see PrefillHopperWs.SlidingWindowOverTheRing
    expect_matches_reference(c, kind.run);
  }
}

// Sliding windows start at a tile boundary inside the sequence (kv_begin > 0: the first box of
// a tile is not the sequence's first page) and end in a partial tile.
TEST(PrefillHopperTma, SlidingWindowWithPartialTail) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 2800;
  for (const HopperKindCase& kind : kHopperKinds) {
    SCOPED_TRACE(kind.name);
    AttentionProblemConfig c = base_config(kind.dtypes, 128, seed++);
    c.num_q_heads = 4;
    c.num_kv_heads = 2;
    c.page_size = 32;
    c.layout = KvLayout::kHND;
    c.window_left = 200;
    c.per_head_kv_scales = true;
    c.seqs = {{90, 1317}, {200, 1500}};
    expect_matches_reference(c, kind.run);
  }
}

}  // namespace
}  // namespace quench::testing_support
