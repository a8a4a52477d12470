// Where a kernel that produces bf16 activation rows (rms_norm, swiglu) also writes them quantized
// for an FP8 GEMM (linear_fp8_weight.h), so that no separate quantization pass reads them back:
// the e4m3 codes and scales that quantize_fp8_dynamic_rows_cuda(rows, width, group, ..., layout)
// would write from those bf16 rows, bit for bit (fp8_rows_out.cuh holds the device side).
#pragma once

#include <cstdint>

#include "quench/core/host_device.h"
#include "quench/ops/quantize/quantize_fp8_dynamic.h"

namespace quench {

struct Fp8RowsOut {
  // e4m3 [padded rows, width]; null: no FP8 output.
  uint8_t* data = nullptr;
  // fp32 scales, one per row (group == width) or per 128 columns of a row, ordered by `layout`.
  float* scales = nullptr;
  int32_t group = 0;
  // Rows past the producer's rows written as zeros with scale 1, and the scale order.
  Fp8DynamicLayout layout;

  QUENCH_HD bool requested() const { return data != nullptr; }
  // The rows the producer writes: layout.padded_rows, or `rows` where that is 0.
  QUENCH_HD int32_t padded_rows(int32_t rows) const {
    return layout.padded_rows > 0 ? layout.padded_rows : rows;
  }
};

// Throws quench::Error naming what `op` cannot write for `rows` x `width`: a group other than
// the width or 128 (with a width that 128 divides), a width not a multiple of 8, padded rows
// fewer than the rows, a null scale array, or an output not 8-byte aligned.
void check_fp8_rows_out(const char* op, const Fp8RowsOut& out, int32_t rows, int32_t width);

}  // namespace quench
