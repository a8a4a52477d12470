// Thin wrappers over the sm_90a PTX that lets warpgroups of one CTA hand tiles to each other:
// shared-memory mbarriers (init, arrive, parity wait) and the warpgroup register reallocation
// (setmaxnreg). Only compiled for sm_90a (the caller guards with QUENCH_SM90A_ENABLED, defined
// in sm90_ptx.cuh).
//
// An mbarrier counts arrivals of its current phase; when `count` threads have arrived the phase
// completes and the barrier's phase bit flips. A waiter names the parity of the phase it waits
// for: use k of a ring slot (k = 0, 1, 2, ...) waits with parity k & 1.
#pragma once

#include <cstdint>

#include "quench/ops/attention/prefill/hopper/sm90_ptx.cuh"

namespace quench::sm90 {

#ifdef QUENCH_SM90A_ENABLED

// One thread initializes; the CTA synchronizes (__syncthreads) before any other use.
__device__ __forceinline__ void mbarrier_init(uint64_t* barrier, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(barrier)), "r"(count)
               : "memory");
}

// Arrives once (default .release at CTA scope at CTA scope: this thread's prior writes, including
// async-proxy-fenced ones, are visible to a thread that waits for this phase).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* barrier) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                   smem_address(barrier))
               : "memory");
}

// Blocks until the phase of parity `parity` has completed (default .acquire at CTA scope; the
// label is local to the braces, so the wait can be inlined many times).
__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_address(barrier)),
      "r"(parity)
      : "memory");
}

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
