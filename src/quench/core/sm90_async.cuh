// Thin wrappers over the sm_90 PTX with which threads of one CTA hand shared-memory tiles to
// each other: mbarriers (PTX ISA "Parallel Synchronization: mbarrier") and tiled TMA loads
// through a CUtensorMap (cp.async.bulk.tensor, see kv_cache/kv_tensor_map.h). A barrier phase
// completes once every expected arrival has arrived and every announced byte (complete_tx) has
// landed; a waiter names the parity of the phase it waits for (use k of a ring slot waits with
// parity k & 1). Used by the ring-buffered Hopper kernels. Only compiled for sm_90 and later
// (QUENCH_SM90_ASYNC_ENABLED).
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define QUENCH_SM90_ASYNC_ENABLED 1
#endif

namespace quench::sm90_async {

#ifdef QUENCH_SM90_ASYNC_ENABLED

__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Initialises a barrier whose phases complete after `arrivals` arrivals (plus announced bytes).
// Call from one thread, then mbarrier_init_fence() and a block barrier before any use.
__device__ __forceinline__ void mbarrier_init(uint64_t* barrier, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(barrier)),
               "r"(arrivals)
               : "memory");
}

// Makes the initialised barriers visible to the async proxy (the bulk copies' completions).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(barrier))
               : "memory");
}

// Arrives and announces `bytes` more bytes that bulk copies will deliver to this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint64_t* barrier, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(barrier)),
      "r"(bytes)
      : "memory");
}

// Waits until the phase with parity `parity` (0, 1, 0, ... in order of completion) has
// completed. Acquire: the shared-memory writes released by the arrivals (and the copies'
// bytes) are visible afterwards.
__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n}\n"
        : "=r"(done)
        : "r"(smem_address(barrier)), "r"(parity)
        : "memory");
  } while (done == 0);
}

// Issues the load of one box of the 4-D tensor map `map` (a kernel parameter declared
// __grid_constant__, or global memory) at element coordinates {c0, c1, c2, c3} (innermost first)
// into shared `dst` (1024-byte aligned for the 128-byte swizzle), counting the box's bytes
// against `barrier`'s current phase. Elements out of the tensor's bounds land as zeros.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, int c3, uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
      "r"(smem_address(barrier))
      : "memory");
}

// Fetches the tensor map's descriptor into the TMA unit's cache ahead of the first load.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

#endif  // QUENCH_SM90_ASYNC_ENABLED

}  // namespace quench::sm90_async
