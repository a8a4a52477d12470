// Thin wrappers over the sm_90 PTX with which threads of one CTA hand shared-memory tiles to
// each other: mbarriers (PTX ISA "Parallel Synchronization: mbarrier") and tiled TMA loads
// through a CUtensorMap (cp.async.bulk.tensor, see kv_cache/kv_tensor_map.h). A barrier phase
// completes once every expected arrival has arrived and every announced byte (complete_tx) has
// landed; a waiter names the parity of the phase it waits for (use k of a ring slot waits with
// parity k & 1). Used by the ring-buffered Hopper kernels. Only compiled for sm_90 and later
// (QUENCH_SM90_ASYNC_ENABLED); elsewhere (kernels instantiated for older targets but never
// launched there) the wrappers trap. Every barrier and shared destination comes as a pointer, or
// as a shared-window address (uint32_t, from smem_address) where a kernel computes addresses.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define QUENCH_SM90_ASYNC_ENABLED 1
#endif

namespace quench::sm90_async {

__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Initialises the barrier at shared address `bar` whose phases complete after `arrivals`
// arrivals (plus announced bytes). Call from one thread, then mbarrier_init_fence() and a block
// barrier before any use.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
#else
  __trap();
#endif
}

// Makes the initialised barriers visible to the async proxy (the TMA loads' complete_tx).
__device__ __forceinline__ void mbarrier_init_fence() {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  __trap();
#endif
}

// One arrival, with release semantics: this thread's earlier shared-memory writes are visible
// to the threads that observe the phase complete.
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}

// Raises the current phase's transaction count by `bytes` (the bytes TMA loads will land), to
// be called before the arrival that could otherwise complete the phase.
__device__ __forceinline__ void mbarrier_expect_bytes(uint32_t bar, uint32_t bytes) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}

// Arrives and announces `bytes` more bytes that TMA loads will deliver to this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint32_t bar, uint32_t bytes) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}

// Waits until the phase with parity `parity` (0, 1, 0, ... in order of completion) has
// completed. Acquire: the shared-memory writes released by the arrivals (and the loads' bytes)
// are visible afterwards.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
#else
  __trap();
#endif
}

// Issues the load of one box of the 4-D tensor map `map` (a kernel parameter declared
// __grid_constant__, or global memory) at element coordinates {c0, c1, c2, c3} (innermost first)
// into shared address `dst` (1024-byte aligned for the 128-byte swizzle), counting the box's
// bytes against barrier `bar`'s current phase. Elements out of the tensor's bounds land as zeros.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, int c3, uint32_t bar) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}

// Fetches the tensor map's descriptor into the TMA unit's cache ahead of the first load.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#else
  __trap();
#endif
}

// The same operations on barriers and destinations given as shared-memory pointers.
__device__ __forceinline__ void mbarrier_init(uint64_t* barrier, uint32_t arrivals) {
  mbarrier_init(smem_address(barrier), arrivals);
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* barrier) {
  mbarrier_arrive(smem_address(barrier));
}
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint64_t* barrier, uint32_t bytes) {
  mbarrier_arrive_expect_bytes(smem_address(barrier), bytes);
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  mbarrier_wait(smem_address(barrier), parity);
}
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, int c3, uint64_t* barrier) {
  tma_load_4d(smem_address(dst), map, c0, c1, c2, c3, smem_address(barrier));
}

// Named barriers (1-15; 0 is __syncthreads'): a warp-specialised CTA syncs a subset of its warps
// (`threads`, a multiple of 32) without the others. arrive does not wait.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace quench::sm90_async
