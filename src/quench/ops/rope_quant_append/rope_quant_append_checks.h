// Host-side checks of RopeQuantAppendParams before a GPU launch (fused kernel and unfused chain
// alike): every bad field throws quench::Error naming the value and what is allowed.
#pragma once

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

// validate_rope_quant_append_params (the reference's array-free checks), plus what the GPU paths
// need: 16-byte aligned q/k/v, outputs, caches, cos/sin cache and norm weights; row strides that
// are multiples of 8 elements; rotary_dim <= 256; fewer than 2^31 head rows; no per-head scale
// array with a bf16 cache (its scales must be 1, and a device array cannot be checked here).
// Device arrays (positions, slot_mapping, per-head scales) are not read: a kernel writes nothing
// for a token whose slot is outside [0, num_pages * page_size) or whose position is outside the
// cos/sin cache.
void check_rope_quant_append_gpu_params(const RopeQuantAppendParams& p);

}  // namespace quench
