// A bias added to every row of a bf16 activation (Qwen2's q/k/v projections, after their fused
// GEMM): x[r][n] = bf16(x[r][n] + bias[n]) in fp32, as bias_add_reference. The GEMM rounded its
// output to bf16 first, so the GPU path rounds twice where the CPU decoder adds the bias before
// its one rounding: at most one bf16 step apart.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace quench {

// Launches on `stream`; throws quench::Error for bad sizes or null pointers. Graph-capturable.
void bias_add_cuda(int32_t rows, int32_t width, const uint16_t* bias, uint16_t* x,
                   cudaStream_t stream);

}  // namespace quench
