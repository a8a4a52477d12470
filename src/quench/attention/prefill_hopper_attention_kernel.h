// The Hopper prefill kernel (ops/attention/prefill/hopper, wgmma, sm_90a) as the backend kernel
// "prefill_hopper": FP8 e4m3 query over an FP8 e4m3 cache at head_dim 128, and bf16 queries over
// bf16 or e4m3 caches at head_dim 64/128/256.
//
// Its priority sits below prefill_mma's while it is the slower of the two (bench/LOG.md,
// 2026-12-02: 128 vs 224 TFLOP/s FP8 at 16k tokens), so `auto` picks prefill_mma and users
// reach this kernel with --prefill-kernel prefill_hopper. Raise the priority when it wins.
#pragma once

#include "quench/attention/attention_kernel_registry.h"

namespace quench {

inline constexpr const char* kPrefillHopperKernelName = "prefill_hopper";

void register_prefill_hopper_attention_kernel(AttentionKernelRegistry& registry);

}  // namespace quench
