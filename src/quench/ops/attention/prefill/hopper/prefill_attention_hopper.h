// The Hopper (sm_90a) prefill attention kernel on warpgroup MMA: FP8 e4m3 Q over an FP8 e4m3
// paged cache with FP8 operands and two-level (per 128-key tile) fp32 accumulation of P·V; bf16
// Q over a bf16 cache, and bf16 Q over an FP8 e4m3 cache (widened to bf16), with bf16 operands.
//
// Serves: an sm_90 device; q/KV fp8_e4m3/fp8_e4m3, bf16/bf16 or bf16/fp8_e4m3 (f16 and e5m2
// are not served); head_dim 128 (FP8 q) or 64/128/256 (bf16 q), NHD or HND, pages of
// 16/32/64; any GQA group; causal with a cached
// prefix, sliding window, soft-cap, sinks; output bf16 / fp8_e4m3 / fp8_e5m2 / nvfp4; optional LSE.
// Everything else gets a reason, and the caller falls back to the generic kernel
// (prefill_attention_generic.h). Numerics: FP8: Q·Kᵀ on FP8 tensor cores; P is rounded to e4m3 (as
// P * 256) for P·V; each tile's P·V accumulates on the tensor core, tiles accumulate in fp32
// registers. bf16 operands: as the generic kernel (FP8 widened exactly, P rounded to bf16, fp32
// accumulation).
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
