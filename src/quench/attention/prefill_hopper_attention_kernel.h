// The Hopper prefill kernel (ops/attention/prefill/hopper, wgmma, sm_90a) as two backend kernels:
// - "prefill_hopper": FP8 e4m3 query over an FP8 e4m3 cache at head_dim 128 with FP8 Q·Kᵀ and
//   bf16 P·V, and bf16 queries over bf16 or e4m3 caches at head_dim 64/128/256. The default
//   prefill kernel on sm_90 (above prefill_mma: 1.2-2.9x faster on the H200, bench/LOG.md).
// - "prefill_hopper_fp8pv": the same kernel with FP8 P·V (P rounded to e4m3, two-level fp32
//   accumulation), FP8 query only. 1.3-1.4x faster than bf16 P·V at 8k-16k tokens, but P's three
//   mantissa bits put a rare output past the SPEC FP8 prefill tolerance, so `auto` never picks it:
//   users opt in with --prefill-kernel prefill_hopper_fp8pv.
#pragma once

#include "quench/attention/attention_kernel_registry.h"

namespace quench {

inline constexpr const char* kPrefillHopperKernelName = "prefill_hopper";
inline constexpr const char* kPrefillHopperFp8PvKernelName = "prefill_hopper_fp8pv";

// Registers both kernels above.
void register_prefill_hopper_attention_kernel(AttentionKernelRegistry& registry);

}  // namespace quench
