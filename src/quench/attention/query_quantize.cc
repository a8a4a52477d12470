#include "quench/attention/query_quantize.h"

#include <vector>

#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"

namespace quench {

// The CPU path is the per-tensor FP8 reference itself (one CPU implementation per op), after
// widening the 16-bit query to float (exact).
void quantize_query_host(const uint16_t* src, DType src_dtype, uint8_t* dst, DType dst_dtype,
                         int64_t count, float q_scale) {
  QUENCH_REQUIRE(src_dtype == DType::kBF16 || src_dtype == DType::kF16, "query dtype ",
                 dtype_name(src_dtype), " cannot be quantized; allowed: bf16, f16");
  std::vector<float> x(static_cast<size_t>(count));
  const bool is_bf16 = src_dtype == DType::kBF16;
  for (int64_t i = 0; i < count; ++i)
    x[i] = is_bf16 ? bf16_bits_to_float(src[i]) : f16_bits_to_float(src[i]);
  quantize_fp8_per_tensor_reference(x.data(), count, q_scale, dst_dtype, dst);
}

}  // namespace quench
