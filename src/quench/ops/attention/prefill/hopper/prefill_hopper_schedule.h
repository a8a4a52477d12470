// The work-item order of the persistent Hopper prefill kernel (prefill_hopper_persistent_kernel
// .cuh), shared by the host (grid size) and the kernel (item decoding), and tested on the CPU.
//
// A work item is (m tile rank, sequence, KV head): rank 0 is a sequence's last m tile, the one
// with the most keys under causality. The (sequence, KV head) pairs, pair = seq * H + head
// (H = num_kv_heads), are cut into groups of ws_pairs_per_group consecutive pairs, and the items
// are numbered group by group, rank-major inside a group (ws_item_coordinates). A CTA takes every
// gridDim.x-th item, so the CTAs working at the same time read the K/V of one group's pairs, which
// L2 holds, and take the group's heaviest items first. With every pair in one group (the order
// before), a batch of 16 sequences of 1k tokens had all 128 pairs' K/V in flight at once, 64 MiB
// of bf16 against a 60 MiB L2, and read each KV tile from DRAM again for every rank.
#pragma once

#include <cstdint>

#include "quench/core/host_device.h"

namespace quench::prefill_hopper {

// K/V bytes that the pairs of one group may keep in L2 together (of the H200's 60 MiB, leaving
// room for Q, O and the copies that the second L2 partition holds).
inline constexpr int64_t kScheduleGroupKvBytes = int64_t{16} << 20;
// Items per CTA that one group holds at least, so that heaviest-first still balances the grid.
inline constexpr int kScheduleGroupItemsPerCta = 4;

// Work items of the schedule (empty ones included); also the host's grid bound.
QUENCH_HD int ws_schedule_size(int max_q_len, int num_q_heads, int num_kv_heads, int num_seqs,
                               int block_m) {
  const int64_t rows = static_cast<int64_t>(max_q_len) * (num_q_heads / num_kv_heads);
  const int64_t max_m_tiles = (rows + block_m - 1) / block_m;
  return static_cast<int>(max_m_tiles * num_seqs * num_kv_heads);
}

// Pairs per group for `pairs` pairs of at most `m_tiles` m tiles whose K/V take `pair_kv_bytes`
// each, on `ctas` CTAs: as many as kScheduleGroupKvBytes of K/V allows, but at least enough for
// kScheduleGroupItemsPerCta items per CTA, and at most `pairs`.
QUENCH_HD int ws_pairs_per_group(int pairs, int m_tiles, int64_t pair_kv_bytes, int ctas) {
  const int64_t by_l2 = kScheduleGroupKvBytes / (pair_kv_bytes > 0 ? pair_kv_bytes : 1);
  const int64_t by_balance = (int64_t{kScheduleGroupItemsPerCta} * ctas + m_tiles - 1) / m_tiles;
  const int64_t wanted = by_l2 > by_balance ? by_l2 : by_balance;
  return static_cast<int>(wanted < pairs ? wanted : pairs);
}

// An item's place: its m tile rank and its (sequence, KV head) pair.
struct WsItemCoordinates {
  int rank;
  int pair;
};

// Item `item` (0 <= item < pairs * m_tiles) of the grouped numbering: group g holds items
// g * per_group * m_tiles onwards, rank-major over its pairs (per_group of them, fewer in the
// last group).
QUENCH_HD WsItemCoordinates ws_item_coordinates(int item, int pairs, int m_tiles, int per_group) {
  const int first_pair = item / (per_group * m_tiles) * per_group;
  const int size = per_group < pairs - first_pair ? per_group : pairs - first_pair;
  const int j = item - first_pair * m_tiles;
  return {j / size, first_pair + j % size};
}

}  // namespace quench::prefill_hopper
