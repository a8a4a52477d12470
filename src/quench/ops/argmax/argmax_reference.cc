#include "quench/ops/argmax/argmax_reference.h"

#include <cmath>

#include "quench/core/error.h"

namespace quench {

void argmax_rows_reference(const float* values, int32_t rows, int32_t cols, int32_t* out) {
  QUENCH_REQUIRE(rows >= 0 && cols >= 1, "argmax rows ", rows, " cols ", cols, " out of range");
  for (int32_t r = 0; r < rows; ++r) {
    const float* row = values + static_cast<int64_t>(r) * cols;
    int32_t best = 0;
    bool finite = true;
    for (int32_t c = 0; c < cols; ++c) {
      finite = finite && std::isfinite(row[c]);
      if (row[c] > row[best]) best = c;
    }
    out[r] = finite ? best : -1;
  }
}

}  // namespace quench
