// The warpgroup register reallocation (setmaxnreg) of the warp-specialized Hopper kernels, and
// the mbarriers they hand tiles over with (quench/core/sm90_async.cuh). Only compiled for
// sm_90a (the caller guards with QUENCH_SM90A_ENABLED, defined in core/sm90_wgmma.cuh).
#pragma once

#include <cstdint>

#include "quench/core/sm90_async.cuh"
#include "quench/core/sm90_wgmma.cuh"

namespace quench::sm90 {

#ifdef QUENCH_SM90A_ENABLED

// Lowers (dec) or raises (inc) the register budget of the executing warpgroup to kRegisters per
// thread; every warp of the warpgroup must execute the same one.
template <int kRegisters>
__device__ __forceinline__ void warpgroup_release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

template <int kRegisters>
__device__ __forceinline__ void warpgroup_claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::sm90
