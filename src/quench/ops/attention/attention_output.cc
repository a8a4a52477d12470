#include "quench/ops/attention/attention_output.h"

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"
#include "quench/numerics/nvfp4_quantize.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"

namespace quench {

AttentionOutputFormat attention_output_format(const AttentionParams& params) {
  AttentionOutputFormat format;
  format.dtype = params.out_dtype;
  format.row_elems = static_cast<int64_t>(params.num_q_heads) * params.kv.head_dim;
  format.o_scale = params.o_scale;
  format.scale_row_offset = params.out_scale_row_offset;
  format.nvfp4_global_scale = params.nvfp4_global_scale;
  return format;
}

int64_t attention_output_row_bytes(const AttentionOutputFormat& format) {
  return static_cast<int64_t>(dtype_bytes(format.dtype, static_cast<size_t>(format.row_elems)));
}

void write_attention_output_row(const AttentionOutputFormat& format, int64_t token,
                                const float* row, void* out, uint8_t* block_scales) {
  const int64_t n = format.row_elems;
  uint8_t* dst = static_cast<uint8_t*>(out) + token * attention_output_row_bytes(format);
  switch (format.dtype) {
    case DType::kBF16: {
      bf16* values = reinterpret_cast<bf16*>(dst);
      for (int64_t i = 0; i < n; ++i)
        values[i] = to_bf16(row[i]);
      return;
    }
    case DType::kFP8E4M3:
    case DType::kFP8E5M2: {
      const Fp8Format fp8 = fp8_format_of(format.dtype);
      for (int64_t i = 0; i < n; ++i)
        dst[i] = float_to_fp8(row[i] / format.o_scale, fp8);
      return;
    }
    case DType::kNVFP4:
      nvfp4_quantize_row(row, n, format.nvfp4_global_scale, dst, block_scales,
                         format.scale_row_offset + token, n / kNvfp4BlockSize);
      return;
    default:
      fail(str_cat("attention output dtype ", dtype_name(format.dtype),
                   " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2, nvfp4"));
  }
}

void write_attention_outputs(const AttentionParams& p, std::vector<float>& o) {
  const AttentionOutputFormat format = attention_output_format(p);
  const int64_t row_elems = format.row_elems;
  if (p.out != nullptr) {
    parallel_for(p.num_tokens, [&](int64_t token) {
      write_attention_output_row(format, token, &o[token * row_elems], p.out, p.out_block_scales);
    });
  }
  if (!p.out_fp8.requested()) return;
  // The values the bf16 output holds, quantized as the o projection's own pass would.
  for (float& x : o)
    x = bf16_bits_to_float(float_to_bf16_bits(x));
  quantize_fp8_dynamic_rows_reference(o.data(), p.num_tokens, static_cast<int32_t>(row_elems),
                                      p.out_fp8.group, p.out_fp8.data, p.out_fp8.scales,
                                      p.out_fp8.layout.scales_by_group);
}

void read_attention_output_row(const AttentionOutputFormat& format, int64_t token, const void* out,
                               const uint8_t* block_scales, float* row) {
  const int64_t n = format.row_elems;
  const uint8_t* src =
      static_cast<const uint8_t*>(out) + token * attention_output_row_bytes(format);
  switch (format.dtype) {
    case DType::kBF16: {
      const bf16* values = reinterpret_cast<const bf16*>(src);
      for (int64_t i = 0; i < n; ++i)
        row[i] = to_float(values[i]);
      return;
    }
    case DType::kFP8E4M3:
    case DType::kFP8E5M2: {
      const Fp8Format fp8 = fp8_format_of(format.dtype);
      for (int64_t i = 0; i < n; ++i)
        row[i] = fp8_to_float(src[i], fp8) * format.o_scale;
      return;
    }
    case DType::kNVFP4:
      nvfp4_dequantize_row(src, n, format.nvfp4_global_scale, block_scales,
                           format.scale_row_offset + token, n / kNvfp4BlockSize, row);
      return;
    default:
      fail(str_cat("attention output dtype ", dtype_name(format.dtype),
                   " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2, nvfp4"));
  }
}

}  // namespace quench
