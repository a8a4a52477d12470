// Hopper (sm_90) asynchronous-copy primitives on shared-state-space addresses: shared-memory
// mbarriers and the tiled TMA load (cp.async.bulk.tensor) of one box of a tensor map
// (kv_cache/kv_tensor_map.h) that signals one.
//
// An mbarrier (8 bytes of shared memory, 8-byte aligned) completes a phase when its expected
// arrivals have arrived AND its transaction count is back to zero: TMA loads decrement it by
// the bytes they land, mbarrier_expect_tx raises it. Waiters name the phase by its parity (0, 1,
// 0, ...). A freshly initialised barrier counts as having completed the phase of parity 1, so a
// producer that waits on "buffer empty" with parity 1 in its first round does not block.
//
// Addresses are shared-state-space addresses (smem_address / __cvta_generic_to_shared). Every
// function traps on GPUs below sm_90: callers select these code paths on sm_90 only.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

namespace quench {

// Initialises the barrier at `bar` to expect `arrivals` arrivals per phase. Make it visible to
// the other threads (__syncthreads) before anyone uses it.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
#else
  __trap();
#endif
}

// Makes the initialised barriers visible to the async proxy (the TMA loads' complete_tx). Call it
// after the inits, before the block barrier that publishes them.
__device__ __forceinline__ void mbarrier_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  __trap();
#endif
}

// One arrival, with release semantics: this thread's earlier shared-memory writes are visible
// to threads that observe the phase complete.
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}

// Raises the current phase's transaction count by `bytes` (the bytes bulk copies will land).
// Call it before the arrival that could otherwise complete the phase.
__device__ __forceinline__ void mbarrier_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}

// Blocks until the phase of parity `parity` (0 or 1) has completed, with acquire semantics: the
// writes released by its arrivals, and the bytes its bulk copies landed, are visible after it.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
#else
  __trap();
#endif
}

// Loads the box of the 4-D tensor map `map` (a __grid_constant__ kernel parameter or global
// memory) at element coordinates {c0, c1, c2, c3} (innermost first) into shared `dst` (1024-byte
// aligned for the 128-byte swizzle); the box's bytes, out-of-bounds zero fill included, count
// against barrier `bar`'s transactions.
__device__ __forceinline__ void tma_load_4d_to_shared(uint32_t dst, const CUtensorMap* map, int c0,
                                                      int c1, int c2, int c3, uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}

// Fetches the tensor map's descriptor into the TMA unit's cache ahead of its first load.
__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#else
  __trap();
#endif
}

// Synchronises the `threads` threads (a multiple of 32) that use named barrier `id` (1-15; 0 is
// __syncthreads'): lets a warp-specialised CTA sync its compute warps without its producer.
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace quench
