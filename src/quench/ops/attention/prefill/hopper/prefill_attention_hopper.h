// The Hopper (sm_90a) prefill attention kernel: FP8 e4m3 Q over an FP8 e4m3 paged cache on
// warpgroup MMA with FP8 operands and two-level (per 128-key tile) fp32 accumulation of P·V.
//
// Serves: an sm_90 device; q fp8_e4m3, KV cache fp8_e4m3, head_dim 128, NHD or HND, pages of
// 16/32/64; any GQA group; causal with a cached prefix, sliding window, soft-cap, sinks; output
// bf16 / fp8_e4m3 / fp8_e5m2 / nvfp4; optional LSE. Everything else gets a reason, and the
// caller falls back to the generic kernel (prefill_attention_generic.h).
// Numerics: Q·Kᵀ on FP8 tensor cores; P is rounded to e4m3 (as P * 256) for P·V; each tile's
// P·V accumulates on the tensor core, tiles accumulate in fp32 registers.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Empty when the Hopper kernel serves `params` on the current CUDA device (host-side fields
// and the device's compute capability only); otherwise the reason, naming the bad value and
// the allowed ones.
std::string prefill_attention_hopper_unsupported_reason(const AttentionParams& params);

// Runs the prefill attention of params (device pointers) on `stream`. Throws quench::Error for
// an unsupported configuration (see above) or a failed launch. No host synchronization.
void prefill_attention_hopper(const AttentionParams& params, cudaStream_t stream);

}  // namespace quench
