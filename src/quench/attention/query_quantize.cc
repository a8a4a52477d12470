#include "quench/attention/query_quantize.h"

#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"

namespace quench {

void quantize_query_host(const uint16_t* src, DType src_dtype, uint8_t* dst, DType dst_dtype,
                         int64_t count, float q_scale) {
  QUENCH_REQUIRE(src_dtype == DType::kBF16 || src_dtype == DType::kF16, "query dtype ",
                 dtype_name(src_dtype), " cannot be quantized; allowed: bf16, f16");
  const Fp8Format format = fp8_format_of(dst_dtype);
  const bool is_bf16 = src_dtype == DType::kBF16;
  for (int64_t i = 0; i < count; ++i) {
    const float x = is_bf16 ? bf16_bits_to_float(src[i]) : f16_bits_to_float(src[i]);
    dst[i] = float_to_fp8(x / q_scale, format);
  }
}

}  // namespace quench
