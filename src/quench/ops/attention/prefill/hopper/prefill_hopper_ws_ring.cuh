// The K/V ring of the warp-specialized Hopper prefill kernels (prefill_hopper_ws_kernel.cuh):
// its mbarriers, their initialisation, and the shared-memory window they live in (the slots'
// layout is WsConfig's, prefill_hopper_ws_config.cuh).
// Ring protocol (kStages slots, tile t in slot t % kStages, use k = t / kStages):
//   full[s]    kFullArrivals producer arrivals plus the direct loads' bytes; the consumer of
//              tile t waits parity k & 1. Where WsConfig::kSplitFull, full[s] counts K alone
//              and v_full[s] V: the producer loads each after its own `empty` wait, and the
//              consumer waits for tile t's V only where it issues its P V, in iteration t + 1.
//   k_empty[s] 256 consumer arrivals once Q K^T has read the slot's K; v_empty[s] once P V has
//              read its V operand. The producer of tile t >= kStages waits parity (k-1) & 1 of
//              k_empty before loading K into the slot, and of v_empty before writing V: K
//              loads start while the previous P V still reads the slot's V. Direct V loads
//              wait for both.
#pragma once

#include <cstdint>

#include "quench/core/sm90_wgmma.cuh"
#include "quench/kv_cache/kv_tensor_map.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_config.cuh"
#include "quench/ops/attention/prefill/hopper/sm90_sync.cuh"

namespace quench::prefill_hopper {

// The ring's mbarriers, kStages each (see the protocol at the top), and the producer's own.
struct WsRingBarriers {
  uint64_t* full;
  uint64_t* k_empty;
  uint64_t* v_empty;
  uint64_t* raw_full;  // [2]: raw stage s's loads have landed (1 arrival + bytes)
  uint64_t* tail;      // the last tile's loads have landed (direct-V kinds; 1 arrival + bytes)
  uint64_t* v_full;    // the slot's V (WsConfig::kSplitFull; else the same as full)
};

#ifdef QUENCH_SM90A_ENABLED

// The CTA's shared window aligned to the 1024-byte swizzle atom (the swizzle works on shared
// addresses), and its ring barriers, initialised by thread 0 (tensor maps prefetched too); the
// caller syncs the CTA before any thread uses them.
template <class Cfg>
__device__ __forceinline__ unsigned char* ws_aligned_smem(unsigned char* smem_raw) {
  const uint32_t raw_address = sm90::smem_address(smem_raw);
  return smem_raw + ((1024u - raw_address % 1024u) % 1024u);
}
template <class Cfg>
__device__ __forceinline__ WsRingBarriers ws_init_ring(unsigned char* smem,
                                                       const KvTensorMaps& maps) {
  uint64_t* barriers = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  // kSplitFull: full, v_full, k_empty, v_empty per slot; else v_full is full.
  constexpr int kV = Cfg::kSplitFull ? Cfg::kStages : 0;
  const WsRingBarriers ring{barriers,
                            barriers + kV + Cfg::kStages,
                            barriers + kV + 2 * Cfg::kStages,
                            barriers + kV + 3 * Cfg::kStages,
                            barriers + kV + 3 * Cfg::kStages + 2,
                            barriers + kV};
  if (threadIdx.x == 0) {
    sm90_async::prefetch_tensor_map(&maps.k);
    sm90_async::prefetch_tensor_map(&maps.v);
    for (int s = 0; s < Cfg::kStages; ++s) {
      sm90_async::mbarrier_init(&ring.full[s], Cfg::kFullArrivals);
      if constexpr (Cfg::kSplitFull) sm90_async::mbarrier_init(&ring.v_full[s], 1);
      sm90_async::mbarrier_init(&ring.k_empty[s], Cfg::kConsumerThreads);
      sm90_async::mbarrier_init(&ring.v_empty[s], Cfg::kConsumerThreads);
    }
    sm90_async::mbarrier_init(&ring.raw_full[0], 1);
    sm90_async::mbarrier_init(&ring.raw_full[1], 1);
    sm90_async::mbarrier_init(ring.tail, 1);
    sm90_async::mbarrier_init_fence();  // visible to the TMA unit's complete_tx
  }
  return ring;
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
