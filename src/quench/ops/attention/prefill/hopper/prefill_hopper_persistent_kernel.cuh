// The persistent warp-specialized Hopper (sm_90a) prefill kernel (head_dim 64/128/256): the
// roles, ring, per-tile steps and numerics of prefill_hopper_ws_kernel.cuh, but each CTA walks a
// list of work items instead of owning one, so the fixed cost of a work item
// (Q load, the first K/V round trip, the epilogue) overlaps the tensor-core work of its
// neighbours (FlashAttention-3's persistent design).
//
// Schedule (prefill_hopper_schedule.h): work items are (m tile rank, sequence, KV head), numbered
// group by group of (sequence, KV head) pairs, the heaviest items of a group first; by default
// groups whose K/V fits L2 (QUENCH_PREFILL_ITEM_GROUPS=all: one group of every pair). A group's
// items are dealt to the CTAs in rounds, in alternating directions for bf16 K/V (ws_item_after),
// in turn for FP8 K/V (ws_next_item); items whose sequence has fewer m tiles are empty and
// skipped. The host launches min(SM count, items) CTAs
// (or one per item: HopperSchedule::kOneItemPerCta) and passes the schedule's sizes (WsItems, a
// kernel argument). No host-side scan: every CTA decodes its items from q_offsets on the fly.
//
// The ring runs on across work items: tile index g counts the CTA's KV tiles over all its items
// (slot g % kStages, phases g / kStages), so the producer loads the next item's first tiles while
// the consumers still work on the current one's last. Each consumer warpgroup prefetches its 64
// Q rows of the next item (cp.async) as soon as the current one's are no longer read: where Q·K^T
// takes Q from registers, right after the item's fragments are loaded (kEarlyNextQ,
// prefill_hopper_persistent_consumer.cuh), else right after its last Q K^T, under the last P V and
// the epilogue; Q stays single-buffered (each consumer reads only its own rows). The epilogue
// stores from registers (prefill_hopper_fragment_store.cuh): the ring is not free for staging any
// more. The consumers' ping-pong (head_dim 128) also runs on across items: consumer 0 starts the
// next item's Q K^T while consumer 1 finishes the current one. The parts, one file each: the walk
// over work items (prefill_hopper_persistent_items.cuh), the producer
// (prefill_hopper_persistent_producer.cuh) and the consumers
// (prefill_hopper_persistent_consumer.cuh); this file is the kernel that runs them.
#pragma once

#include "quench/kv_cache/kv_tensor_map.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_persistent_consumer.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_persistent_items.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_persistent_producer.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_schedule.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_kernel.cuh"

namespace quench::prefill_hopper {

// `maps`: TMA maps of p.k_cache and p.v_cache (make_kv_tensor_maps over p.kv); `items`: ws_items
// for p, Cfg::kBlockM, the K/V element bytes and gridDim.x. kSoftCap must be p.logit_soft_cap > 0.
// Any 1-D grid: CTA b takes the work items ws_item_after deals it (see above).
// kTwoTermPrev (FP8 P·V): two-term P on the second-to-last KV tile too (two_term_prev_tile).
template <HopperKind kKind, int kHeadDimT, bool kSoftCap, bool kTwoTermPrev = true>
__global__ void __launch_bounds__(WsConfig<kKind, kHeadDimT>::kThreads, 1)
    prefill_attention_hopper_persistent_kernel(const AttentionParams p,
                                               const __grid_constant__ KvTensorMaps maps,
                                               const WsItems items) {
#ifdef QUENCH_SM90A_ENABLED
  using Cfg = WsConfig<kKind, kHeadDimT>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = ws_aligned_smem<Cfg>(smem_raw);
  const WsRingBarriers ring = ws_init_ring<Cfg>(smem, maps);
  __syncthreads();

  const int tid = static_cast<int>(threadIdx.x);
  if (tid < Cfg::kProducerThreads) {
    sm90::warpgroup_release_registers<Cfg::kProducerRegisters>();
    ws_persistent_producer<Cfg>(p, maps, items, smem, ring, tid);
  } else {
    sm90::warpgroup_claim_registers<Cfg::kConsumerRegisters>();
    ws_persistent_consumer<Cfg, kSoftCap, kTwoTermPrev>(p, items, smem, ring,
                                                        tid - Cfg::kProducerThreads);
  }
#endif  // QUENCH_SM90A_ENABLED
}

}  // namespace quench::prefill_hopper
