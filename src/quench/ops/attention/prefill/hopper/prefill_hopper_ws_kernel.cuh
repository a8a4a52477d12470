// The warp-specialized Hopper (sm_90a) prefill attention kernel (head_dim 64, 128 and, bf16 q
// only, 256, the launcher's default there too; QUENCH_PREFILL_HD256=sync keeps the synchronous
// kernel as the A/B baseline).
// Same operand kinds, numerics and per-tile steps (prefill_hopper_tile.cuh) as the
// synchronous kernel; what changes is who does what, and when:
//
// One CTA of three warpgroups per (tile of 128 packed query rows, KV head, sequence).
//   producer  warpgroup 0 (setmaxnreg down): loads each K/V tile (kBlockN keys: 128; 64 at
//             head_dim 256 and for bf16 q over FP8 KV at 128) with TMA, one box per page, each
//             page's boxes issued by one lane (ws_load_page: warp 0's, or all four warps' where
//             a tile spans four pages or more), page ids read from the block table; tensor maps
//             of kv_tensor_map.h, kernel parameters). bf16 K and V land straight in the ring
//             slot (V as cached is P V's MN-major B operand); FP8 K too unless it is widened,
//             while FP8 V lands in a private raw stage (two, where they fit, let
//             kPrefetchTiles tiles fly) from which the producer builds the slot's V operand:
//             V^T for FP8 P V (transpose_v_fp8), V widened to f16 for 16-bit
//             P V (MN-major, no transpose). The slot's `full` mbarrier completes when the loads'
//             bytes have landed and the built operands are fenced for the async proxy. It waits on
//             the slot's `empty` mbarriers before reusing it. See ws_producer.
//   consumers warpgroups 1 and 2 (setmaxnreg up), packed rows 64c..64c+63 for consumer c:
//             wait `full`, S = Q K^T (wgmma SS), online softmax in registers, P V (wgmma RS),
//             arrive on `empty` once the wgmmas reading the slot have completed. Ping-pong
//             (head_dim 128, WsConfig::kPingPong): consumer c issues its GEMMs only after the
//             other consumer issued its own (two named barriers), so one consumer's softmax runs
//             under the other's GEMMs. P V of tile t is issued right after tile t + 1's Q K^T
//             and runs under tile t + 1's softmax (FA3's intra-warpgroup overlap); FP8 P V
//             (two-level) lands in T, 64 more registers, and joins O in fp32 after that softmax.
// The parts, one file each: the work item (prefill_hopper_ws_work.cuh), the ring and its
// protocol (prefill_hopper_ws_ring.cuh), the producer (prefill_hopper_ws_producer.cuh) and the
// consumers (prefill_hopper_ws_consumer.cuh); this file is the kernel that runs them.
#pragma once

#include "quench/core/sm90_wgmma.cuh"
#include "quench/kv_cache/kv_tensor_map.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_config.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_consumer.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_producer.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_ring.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_work.cuh"

namespace quench::prefill_hopper {

// `maps`: TMA maps of p.k_cache and p.v_cache (make_kv_tensor_maps over p.kv); heads_first: the
// grid's layout (ws_work, prefill_common::QueryTileGrid). kSoftCap must be p.logit_soft_cap > 0
// (the launcher picks the instantiation).
// kTwoTermPrev (FP8 P·V): two-term P on the second-to-last KV tile too (two_term_prev_tile).
template <HopperKind kKind, int kHeadDimT, bool kSoftCap, bool kTwoTermPrev = true>
__global__ void __launch_bounds__(WsConfig<kKind, kHeadDimT>::kThreads, 1)
    prefill_attention_hopper_ws_kernel(const AttentionParams p,
                                       const __grid_constant__ KvTensorMaps maps,
                                       const int heads_first) {
#ifdef QUENCH_SM90A_ENABLED
  using Cfg = WsConfig<kKind, kHeadDimT>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = ws_aligned_smem<Cfg>(smem_raw);
  WsWork w;
  if (!ws_work<typename Cfg::Tile>(p, heads_first, w)) return;  // the whole CTA, before any barrier
  const WsRingBarriers ring = ws_init_ring<Cfg>(smem, maps);
  __syncthreads();

  const int tid = static_cast<int>(threadIdx.x);
  if (tid < Cfg::kProducerThreads) {
    sm90::warpgroup_release_registers<Cfg::kProducerRegisters>();
    ws_producer<Cfg>(p, maps, w, smem, ring, tid);
  } else {
    sm90::warpgroup_claim_registers<Cfg::kConsumerRegisters>();
    ws_consumer<Cfg, kSoftCap, kTwoTermPrev>(p, w, smem, ring, tid - Cfg::kProducerThreads);
  }
#endif  // QUENCH_SM90A_ENABLED
}

}  // namespace quench::prefill_hopper
