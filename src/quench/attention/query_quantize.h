// Query quantization inside the attention op (SPEC §1, §1.2): the rows whose kernel takes an FP8
// query are stored as fp8(q / q_scale) (q_scale divides here and multiplies in the kernel).
// Host and device versions compute the same bits (one rounding, saturating to the FP8 max).
#pragma once

#include <cstdint>

#include "quench/core/dtype.h"

namespace quench {

// dst[i] = fp8(float(src[i]) / q_scale) for i in [0, count).
//   src: `count` elements of src_dtype (bf16 or f16, raw 16-bit), host memory
//   dst: `count` bytes of dst_dtype (fp8_e4m3 or fp8_e5m2), host memory
void quantize_query_host(const uint16_t* src, DType src_dtype, uint8_t* dst, DType dst_dtype,
                         int64_t count, float q_scale);

// Same on device memory, enqueued on `stream` (a cudaStream_t; nullptr = default stream).
// Throws quench::Error when the launch fails.
void quantize_query_device(const uint16_t* src, DType src_dtype, uint8_t* dst, DType dst_dtype,
                           int64_t count, float q_scale, void* stream);

}  // namespace quench
