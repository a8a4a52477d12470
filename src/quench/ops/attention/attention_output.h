// One attention output row ([num_q_heads * head_dim] floats of one token) to and from its stored
// form: bf16, FP8 (stored = fp8(o / o_scale)) or NVFP4 (SPEC §1.3). The CPU reference writes
// through it, and GPU kernel tests decode kernel outputs through it, so both sides agree on the
// formats by construction.
#pragma once

#include <cstdint>
#include <vector>

#include "quench/core/dtype.h"
#include "quench/ops/attention/attention_params.h"

namespace quench {

struct AttentionOutputFormat {
  DType dtype = DType::kBF16;  // bf16, fp8_e4m3, fp8_e5m2 or nvfp4
  int64_t row_elems = 0;       // num_q_heads * head_dim (a multiple of 16 for nvfp4)
  float o_scale = 1.0f;        // FP8: stored = fp8(o / o_scale), value = stored * o_scale
  // NVFP4: token t's block scales live in row scale_row_offset + t of the swizzled scale tensor
  // (row_elems / 16 scale columns); the global scale multiplies before quantization.
  int32_t scale_row_offset = 0;
  float nvfp4_global_scale = 1.0f;
};

// The output fields of params as a format.
AttentionOutputFormat attention_output_format(const AttentionParams& params);

// Bytes of one stored output row (the data tensor only, not the NVFP4 block scales).
int64_t attention_output_row_bytes(const AttentionOutputFormat& format);

// Stores row (float [row_elems]) as token `token` of out: out is [num_tokens, row_bytes] bytes;
// block_scales (NVFP4 only, else unused) is the whole swizzled scale tensor.
void write_attention_output_row(const AttentionOutputFormat& format, int64_t token,
                                const float* row, void* out, uint8_t* block_scales);

// Stores every row of `o` (float [num_tokens, num_q_heads * head_dim]) as params asks: into
// params.out in its format where out is set, and, where params.out_fp8 is requested, the bf16
// rows quantized as quantize_fp8_dynamic_rows_reference does (rounds o to bf16 in place then).
void write_attention_outputs(const AttentionParams& params, std::vector<float>& o);

// Decodes token `token` of out into row (float [row_elems]): bf16 value, fp8 * o_scale, or
// e2m1 * block_scale / global_scale.
void read_attention_output_row(const AttentionOutputFormat& format, int64_t token, const void* out,
                               const uint8_t* block_scales, float* row);

}  // namespace quench
