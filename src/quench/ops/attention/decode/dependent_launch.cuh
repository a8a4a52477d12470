// The device side of programmatic dependent launch, by which a decode kernel's launch and
// prologue overlap the end of the kernel before it (the host side is the launch attribute in
// decode_attention.cu and decode_merge.cu).
#pragma once

namespace quench::decode {

// Programmatic dependent launch (sm_90+; nothing on older GPUs): the primary grid lets its
// dependent start launching; the dependent waits until the primary grid has completed and its
// memory operations are visible.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
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

}  // namespace quench::decode
