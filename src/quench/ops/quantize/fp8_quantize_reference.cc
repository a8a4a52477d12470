#include "quench/ops/quantize/fp8_quantize_reference.h"

#include <algorithm>
#include <cmath>

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/numerics/fp8.h"

namespace quench {

void validate_fp8_scale(float scale, const char* what) {
  QUENCH_REQUIRE(std::isfinite(scale) && scale > 0.0f, what, " ", scale,
                 " is invalid; allowed: finite and > 0");
}

void validate_fp8_head_scales(const HeadScales& scale, int32_t num_heads, const char* what) {
  if (scale.per_head == nullptr) {
    validate_fp8_scale(scale.per_tensor, what);
    return;
  }
  for (int32_t h = 0; h < num_heads; ++h) {
    QUENCH_REQUIRE(std::isfinite(scale.per_head[h]) && scale.per_head[h] > 0.0f, what, "[head ", h,
                   "] ", scale.per_head[h], " is invalid; allowed: finite and > 0");
  }
}

void quantize_fp8_per_tensor_reference(const float* x, int64_t n, float scale, DType fp8_dtype,
                                       uint8_t* out) {
  const Fp8Format format = fp8_format_of(fp8_dtype);
  validate_fp8_scale(scale, "fp8 scale");
  parallel_for(n, [&](int64_t i) { out[i] = float_to_fp8(x[i] / scale, format); });
}

void quantize_fp8_per_head_reference(const float* x, int64_t num_rows, int32_t num_heads,
                                     int32_t head_dim, const HeadScales& scale, DType fp8_dtype,
                                     uint8_t* out) {
  const Fp8Format format = fp8_format_of(fp8_dtype);
  QUENCH_REQUIRE(num_rows >= 0 && num_heads >= 1 && head_dim >= 0, "fp8 quantize shape [", num_rows,
                 ", ", num_heads, ", ", head_dim,
                 "] is invalid; allowed: rows >= 0, heads >= 1, head_dim >= 0");
  validate_fp8_head_scales(scale, num_heads, "fp8 scale");
  parallel_for(num_rows * num_heads, [&](int64_t row) {
    const float s = scale.at(static_cast<int32_t>(row % num_heads));
    for (int64_t d = row * head_dim; d < (row + 1) * head_dim; ++d) {
      out[d] = float_to_fp8(x[d] / s, format);
    }
  });
}

void dequantize_fp8_per_tensor_reference(const uint8_t* q, int64_t n, float scale, DType fp8_dtype,
                                         float* out) {
  const Fp8Format format = fp8_format_of(fp8_dtype);
  validate_fp8_scale(scale, "fp8 scale");
  parallel_for(n, [&](int64_t i) { out[i] = fp8_to_float(q[i], format) * scale; });
}

void dequantize_fp8_per_head_reference(const uint8_t* q, int64_t num_rows, int32_t num_heads,
                                       int32_t head_dim, const HeadScales& scale, DType fp8_dtype,
                                       float* out) {
  const Fp8Format format = fp8_format_of(fp8_dtype);
  QUENCH_REQUIRE(num_rows >= 0 && num_heads >= 1 && head_dim >= 0, "fp8 dequantize shape [",
                 num_rows, ", ", num_heads, ", ", head_dim,
                 "] is invalid; allowed: rows >= 0, heads >= 1, head_dim >= 0");
  validate_fp8_head_scales(scale, num_heads, "fp8 scale");
  parallel_for(num_rows * num_heads, [&](int64_t row) {
    const float s = scale.at(static_cast<int32_t>(row % num_heads));
    for (int64_t d = row * head_dim; d < (row + 1) * head_dim; ++d) {
      out[d] = fp8_to_float(q[d], format) * s;
    }
  });
}

float fp8_scale_from_amax(float amax, DType fp8_dtype) {
  const Fp8Format format = fp8_format_of(fp8_dtype);
  QUENCH_REQUIRE(std::isfinite(amax) && amax >= 0.0f, "amax ", amax,
                 " is invalid; allowed: finite and >= 0");
  if (amax == 0.0f) return 1.0f;
  return amax / fp8_max(format);
}

void quantize_fp8_dynamic_rows_reference(const float* x, int32_t rows, int32_t cols, int32_t group,
                                         uint8_t* out, float* scales, bool scales_by_group) {
  QUENCH_REQUIRE(rows >= 0 && cols >= 1 && group >= 1 && cols % group == 0, "rows ", rows,
                 ", cols ", cols, ", group ", group,
                 " are invalid; allowed: rows >= 0, cols >= 1, cols a multiple of group");
  const int32_t groups = cols / group;
  for (int64_t r = 0; r < rows; ++r) {
    for (int32_t g = 0; g < groups; ++g) {
      const float* in = x + r * cols + static_cast<int64_t>(g) * group;
      const float scale = fp8_per_tensor_scale(in, group, DType::kFP8E4M3);
      scales[scales_by_group ? g * int64_t{rows} + r : r * groups + g] = scale;
      quantize_fp8_per_tensor_reference(in, group, scale, DType::kFP8E4M3,
                                        out + r * cols + static_cast<int64_t>(g) * group);
    }
  }
}

float fp8_per_tensor_scale(const float* x, int64_t n, DType fp8_dtype) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  return fp8_scale_from_amax(amax, fp8_dtype);
}

std::vector<float> fp8_per_head_scales(const float* x, int64_t num_rows, int32_t num_heads,
                                       int32_t head_dim, DType fp8_dtype) {
  QUENCH_REQUIRE(num_heads >= 1, "num_heads ", num_heads, " must be >= 1");
  std::vector<float> amax(static_cast<size_t>(num_heads), 0.0f);
  for (int64_t row = 0; row < num_rows; ++row) {
    for (int32_t h = 0; h < num_heads; ++h) {
      const float* v = x + (row * num_heads + h) * head_dim;
      for (int32_t d = 0; d < head_dim; ++d) {
        amax[static_cast<size_t>(h)] = std::max(amax[static_cast<size_t>(h)], std::fabs(v[d]));
      }
    }
  }
  std::vector<float> scales(amax.size());
  for (size_t h = 0; h < amax.size(); ++h)
    scales[h] = fp8_scale_from_amax(amax[h], fp8_dtype);
  return scales;
}

}  // namespace quench
