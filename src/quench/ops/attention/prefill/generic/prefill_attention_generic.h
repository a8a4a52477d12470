// The generic tensor-core prefill attention kernel (mma.sync bf16, any GPU of sm_80 or newer):
// the fallback that serves every configuration of the AttentionParams contract.
//
// Serves: q bf16 / f16 / fp8_e4m3 / fp8_e5m2 (f16 is rounded to bf16 on load); KV cache bf16 /
// fp8_e4m3 / fp8_e5m2, NHD or HND, pages of 16/32/64; head_dim 64/128/256; any GQA group;
// causal with a cached prefix, sliding window, soft-cap, sinks; output bf16 / fp8_e4m3 /
// fp8_e5m2 / nvfp4; optional LSE (its denominator includes the sink term when sinks are on).
// Numerics: FP8 operands are widened exactly to bf16, products accumulate in fp32 (no FP8
// tensor-core accumulation), P is rounded to bf16 for P·V.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Empty when the generic kernel serves `params` (host-side fields only); otherwise the reason,
// naming the bad value and the allowed ones.
std::string prefill_attention_generic_unsupported_reason(const AttentionParams& params);

// Runs the prefill attention of params (device pointers) on `stream`. Throws quench::Error for
// an unsupported configuration (see above) or a failed launch. No host synchronization.
void prefill_attention_generic(const AttentionParams& params, cudaStream_t stream);

}  // namespace quench
