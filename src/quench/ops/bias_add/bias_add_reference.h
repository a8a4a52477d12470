// CPU reference of a bias added to every row of bf16 activations:
//   x[r][n] = bf16(float(x[r][n]) + float(bias[n]))
#pragma once

#include <cstdint>

namespace quench {

//   x: bf16 bits [rows, width], updated in place; bias: bf16 bits [width].
void bias_add_reference(int32_t rows, int32_t width, const uint16_t* bias, uint16_t* x);

}  // namespace quench
