// The GPU decode kernel (ops/attention/decode, mma.sync, sm_80+) as the attention-backend kernel
// "decode_gqa": bf16/f16 query over a bf16 or FP8 paged cache, all query heads of a KV group
// from one read of K/V, split-KV for small batches.
#pragma once

#include "quench/attention/attention_kernel_registry.h"

namespace quench {

inline constexpr const char* kDecodeGqaKernelName = "decode_gqa";

void register_decode_gqa_attention_kernel(AttentionKernelRegistry& registry);

}  // namespace quench
