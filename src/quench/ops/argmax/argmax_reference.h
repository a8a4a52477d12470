// The largest logit of each row: greedy sampling's choice. values is fp32 [rows, cols] row-major;
// out[r] is the lowest column holding row r's largest value (the index std::max_element gives),
// or -1 when the row holds a NaN or an infinity (the caller names that as the model's fault).
#pragma once

#include <cstdint>

namespace quench {

void argmax_rows_reference(const float* values, int32_t rows, int32_t cols, int32_t* out);

}  // namespace quench
