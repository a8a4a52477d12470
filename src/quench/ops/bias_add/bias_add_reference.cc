#include "quench/ops/bias_add/bias_add_reference.h"

#include "quench/numerics/bf16.h"

namespace quench {

void bias_add_reference(int32_t rows, int32_t width, const uint16_t* bias, uint16_t* x) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = 0; n < width; ++n) {
      uint16_t& v = x[r * width + n];
      v = float_to_bf16_bits(bf16_bits_to_float(v) + bf16_bits_to_float(bias[n]));
    }
}

}  // namespace quench
