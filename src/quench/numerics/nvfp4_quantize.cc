#include "quench/numerics/nvfp4_quantize.h"

#include <cmath>

#include "quench/core/error.h"
#include "quench/numerics/nvfp4.h"

namespace quench {
namespace {

void check_row_arguments(int64_t n, float global_scale, int64_t scale_row, int64_t num_scale_cols) {
  QUENCH_REQUIRE(n > 0 && n % kNvfp4BlockSize == 0, "NVFP4 row length n=", n,
                 " must be a positive multiple of ", kNvfp4BlockSize);
  QUENCH_REQUIRE(std::isfinite(global_scale) && global_scale > 0.0f, "NVFP4 global_scale ",
                 global_scale, " must be finite and > 0");
  QUENCH_REQUIRE(num_scale_cols == n / kNvfp4BlockSize, "NVFP4 num_scale_cols=", num_scale_cols,
                 " must equal n / ", kNvfp4BlockSize, " = ", n / kNvfp4BlockSize);
  QUENCH_REQUIRE(scale_row >= 0, "NVFP4 scale_row ", scale_row, " must be >= 0");
}

}  // namespace

void nvfp4_quantize_row(const float* x, int64_t n, float global_scale, uint8_t* packed_out,
                        uint8_t* scales, int64_t scale_row, int64_t num_scale_cols) {
  check_row_arguments(n, global_scale, scale_row, num_scale_cols);
  for (int64_t block = 0; block < num_scale_cols; ++block) {
    const float* xb = x + block * kNvfp4BlockSize;
    float amax = 0.0f;
    for (int i = 0; i < kNvfp4BlockSize; ++i) {
      const float a = std::fabs(xb[i]);
      if (a > amax) amax = a;
    }
    const uint8_t block_scale = nvfp4_block_scale(amax, global_scale);
    scales[nvfp4_scale_offset(scale_row, block, num_scale_cols)] = block_scale;
    const float factor = nvfp4_element_factor(block_scale, global_scale);
    uint8_t* out = packed_out + block * (kNvfp4BlockSize / 2);
    for (int i = 0; i < kNvfp4BlockSize; i += 2) {
      const uint8_t even = float_to_e2m1(xb[i] * factor);
      const uint8_t odd = float_to_e2m1(xb[i + 1] * factor);
      out[i / 2] = static_cast<uint8_t>(even | (odd << 4));
    }
  }
}

void nvfp4_dequantize_row(const uint8_t* packed, int64_t n, float global_scale,
                          const uint8_t* scales, int64_t scale_row, int64_t num_scale_cols,
                          float* out) {
  check_row_arguments(n, global_scale, scale_row, num_scale_cols);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t byte = packed[i / 2];
    const uint8_t code = (i % 2 == 0) ? (byte & 0xfu) : static_cast<uint8_t>(byte >> 4);
    const uint8_t block_scale =
        scales[nvfp4_scale_offset(scale_row, i / kNvfp4BlockSize, num_scale_cols)];
    out[i] = nvfp4_dequantize_element(code, block_scale, global_scale);
  }
}

}  // namespace quench
