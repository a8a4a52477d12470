// The Hopper prefill kernel (ops/attention/prefill/hopper, wgmma, sm_90a) as two backend kernels:
// - "prefill_hopper_fp8pv": FP8 e4m3 query over an FP8 e4m3 cache at head_dim 128 with FP8 Q·Kᵀ
//   and FP8 P·V (P rounded to e4m3; on each work item's last one or two KV tiles, where a row
//   with few keys has all of them, P is two e4m3 terms; each tile's P·V joins O in fp32). What
//   `auto` picks for an FP8 query on sm_90: 1.3x faster than bf16 P·V at 8k-16k tokens.
// - "prefill_hopper": bf16 queries over bf16 or e4m3 caches at head_dim 64/128/256, and an FP8
//   query with bf16 P·V (P to bf16, FP8 V widened): the choice for an FP8 query where P's
//   e4m3 rounding is not wanted (--prefill-kernel prefill_hopper): a row whose softmax puts
//   0.1-0.5 of its weight on a few keys far from its diagonal can see errors up to ~2x the
//   SPEC FP8 tolerance with FP8 P·V. The default prefill kernel on sm_90 otherwise (above
//   prefill_mma: 1.2-2.9x faster on the H200, bench/LOG.md).
#pragma once

#include "quench/attention/attention_kernel_registry.h"

namespace quench {

inline constexpr const char* kPrefillHopperKernelName = "prefill_hopper";
inline constexpr const char* kPrefillHopperFp8PvKernelName = "prefill_hopper_fp8pv";

// Registers both kernels above.
void register_prefill_hopper_attention_kernel(AttentionKernelRegistry& registry);

}  // namespace quench
