// The device side of programmatic dependent launch (sm_90+; nothing on older GPUs), by which a
// kernel's launch and prologue overlap the end of the kernel before it, and L2 prefetches. The
// host side is the launch attribute cudaLaunchAttributeProgrammaticStreamSerialization (the
// decode attention kernel and its merge).
//
// A primary grid calls allow_dependent_launch (anywhere: it only lets the dependent's CTAs start);
// the dependent must call wait_for_primary_grid before it reads anything the primary (or any
// kernel before it) writes, and before it writes anything they read. Before the wait it may only
// touch what no kernel of the step writes: weights, constants, its own shared memory.
#pragma once

#include <cstdint>

namespace quench {

// Lets this grid's programmatic dependent start launching once every CTA has called it (or
// exited). Harmless when the next kernel is an ordinary launch.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Waits until the primary grid has completed and its memory operations are visible (returns at
// once for an ordinary launch).
__device__ __forceinline__ void wait_for_primary_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Brings the 128-byte line of `address` into L2, without waiting. Safe before
// wait_for_primary_grid even on data the primary grid writes: L2 is the GPU's point of
// coherence, so a later read sees the writes either way; it only saves that read a DRAM trip.
__device__ __forceinline__ void prefetch_l2(const void* address) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(address));
}

// Brings `bytes` (a multiple of 16) from the 16-byte aligned `address` into L2 with one bulk
// copy-engine request (sm_90+; nothing on older GPUs), without waiting. One thread issues it.
__device__ __forceinline__ void prefetch_l2_bulk(const void* address, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(address), "r"(bytes)
               : "memory");
#endif
}

}  // namespace quench
