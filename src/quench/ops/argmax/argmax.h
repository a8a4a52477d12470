// GPU argmax per row, as argmax_rows_reference: the greedy token of each logit row, so that only
// one int per row crosses to the host instead of a vocabulary of floats.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace quench {

// values: device fp32 [rows, cols]; out: device int32 [rows]. Launches on `stream`; throws
// quench::Error for bad sizes or a failed launch. Graph-capturable.
void argmax_rows_cuda(const float* values, int32_t rows, int32_t cols, int32_t* out,
                      cudaStream_t stream);

}  // namespace quench
