// The generic tensor-core attention kernel (ops/attention/prefill/generic, mma.sync, sm_80+) as
// an attention-backend kernel "prefill_mma": the GPU fallback that serves every configuration
// of the contract, in both phases (decode rows are prefill rows of length 1 to it).
#pragma once

#include "quench/attention/attention_kernel_registry.h"

namespace quench {

inline constexpr const char* kPrefillMmaKernelName = "prefill_mma";

void register_prefill_mma_attention_kernel(AttentionKernelRegistry& registry);

}  // namespace quench
