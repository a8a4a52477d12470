// CPU reference of the fused "RoPE + quantize + paged KV append" step (contract:
// rope_quant_append_params.h). It is literally the composition of the single-op references, in
// the documented order, on fp32 copies of the inputs:
//   bf16 -> float, [qk_rms_norm_reference], apply_rope_reference (cache or on-the-fly cosf/sinf of
//   (float)pos * inv_freq), then one rounding: bf16(q) | fp8(q / q_scale) for the query,
//   kv_append_reference (fp8(x / scale) or bf16) for k and v.
// Output buffers are indexed by absolute token: q_out_bf16 row t and q_out_fp8 row t both sit at
// t * num_q_heads * head_dim (each buffer is [T, Hq, D]; only its own rows are written). q_scale is
// used only for the FP8 rows (a bf16 query is never scaled). Padding tokens (slot -1) write
// nothing at all: no query row, no cache row.
#pragma once

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

// Checks everything that needs no access to the arrays (so a GPU launcher can call it with device
// pointers): sizes, strides, rope config, KV layout, pointers present where needed, q_bf16_rows in
// [0, T], q_fp8_dtype and q_scale when FP8 rows exist, norm weights both or neither, per-tensor
// k/v scales (finite > 0 for fp8, 1 for bf16). Throws quench::Error naming the bad field.
void validate_rope_quant_append_params(const RopeQuantAppendParams& p);

// Checks the host arrays: positions (>= 0, below cos_sin_cache_positions when a cache is given),
// slot_mapping (validate_kv_slot_mapping) and per-head k/v scales. All pointers must be host.
void validate_rope_quant_append_host_arrays(const RopeQuantAppendParams& p);

// Runs both validations, then the op. All pointers in p are host pointers.
void rope_quant_append_reference(const RopeQuantAppendParams& p);

}  // namespace quench
