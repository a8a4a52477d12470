#include "quench/ops/quantize/fp8_rows_out.h"

#include "quench/core/error.h"

namespace quench {

void check_fp8_rows_out(const char* op, const Fp8RowsOut& out, int32_t rows, int32_t width) {
  QUENCH_REQUIRE(width >= 8 && width % 8 == 0, op, ": an FP8 output of width ", width,
                 " is not supported; allowed: a positive multiple of 8");
  QUENCH_REQUIRE(out.group == width || (out.group == 128 && width % 128 == 0), op,
                 ": FP8 output group ", out.group, " over ", width,
                 " columns is not supported; allowed: the whole row (", width,
                 "), or 128 where the width is a multiple of 128");
  QUENCH_REQUIRE(out.layout.padded_rows == 0 || out.layout.padded_rows >= rows, op,
                 ": FP8 output padded_rows ", out.layout.padded_rows, " is fewer than the ", rows,
                 " rows; allowed: 0 (none) or >= rows");
  QUENCH_REQUIRE(out.scales != nullptr, op, ": the FP8 output's scales must not be null");
  QUENCH_REQUIRE(reinterpret_cast<uintptr_t>(out.data) % 8 == 0, op,
                 ": the FP8 output must be 8-byte aligned");
}

}  // namespace quench
