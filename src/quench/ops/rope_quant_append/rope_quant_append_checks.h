// Host-side checks of RopeQuantAppendParams before a GPU launch (fused kernel and unfused chain
// alike): every bad field throws quench::Error naming the value and what is allowed.
#pragma once

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

// Shapes, dtypes, scales, null pointers, and the 16-byte alignment the GPU paths load and store
// with: q/k/v/outputs/caches/cos_sin_cache/norm weights 16-byte aligned, row strides multiples
// of 8 elements.
void check_rope_quant_append_gpu_params(const RopeQuantAppendParams& p);

}  // namespace quench
