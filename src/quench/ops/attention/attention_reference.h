// CPU reference of paged attention (the oracle every attention kernel is tested against).
// Contract: see attention_params.h. All pointers are host memory. fp32 math throughout, with
// inputs dequantized exactly as SPEC §1.2 says; output written in params.out_dtype.
#pragma once

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Throws quench::Error naming the first inconsistent field (shapes, dtypes, offsets, pages).
void validate_attention_params(const AttentionParams& params);

// Computes the attention of every query row of params (after validate_attention_params).
void attention_reference(const AttentionParams& params);

}  // namespace quench
