// The device side of programmatic dependent launch, by which the split merge overlaps its launch
// with the end of the decode kernel (the host side is the launch attribute in decode_merge.cu).
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

}  // namespace quench::decode
