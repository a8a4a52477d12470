// CPU reference of paged attention (the oracle every attention kernel is tested against).
// Contract: see attention_params.h. All pointers are host memory. fp32 math throughout, with
// inputs dequantized exactly as SPEC §1.2 says; output written in params.out_dtype.
#pragma once

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Throws quench::Error naming the first inconsistent field (shapes, dtypes, offsets, pages).
void validate_attention_params(const AttentionParams& params);

// The checks of validate_attention_params that read no array, so that GPU launchers run them on
// device params and accept exactly the values the reference accepts: sm_scale, q_scale (FP8
// query), per-tensor k/v scales, window_left, logit_soft_cap, o_scale (FP8 output) and the
// NVFP4 output fields (out_block_scales set, nvfp4_global_scale, scale rows in range), and
// out_fp8 where requested (bf16 output, a group check_fp8_rows_out takes, no padding rows).
void validate_attention_scalars(const AttentionParams& params);

// Computes the attention of every query row of params (after validate_attention_params).
void attention_reference(const AttentionParams& params);

}  // namespace quench
