#include "quench/ops/bias_add/bias_add.h"

#include <algorithm>

#include "quench/core/error.h"
#include "quench/numerics/bf16.h"

namespace quench {
namespace {

__global__ void bias_add_kernel(int64_t total, int32_t width, const uint16_t* bias, uint16_t* x) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = float_to_bf16_bits(bf16_bits_to_float(x[i]) + bf16_bits_to_float(bias[i % width]));
  }
}

}  // namespace

void bias_add_cuda(int32_t rows, int32_t width, const uint16_t* bias, uint16_t* x,
                   cudaStream_t stream) {
  QUENCH_REQUIRE(rows >= 0 && width >= 1, "bias_add rows ", rows, " width ", width,
                 " out of range; allowed: rows >= 0, width >= 1");
  QUENCH_REQUIRE(bias != nullptr && x != nullptr, "bias_add bias and x must not be null");
  const int64_t total = int64_t{rows} * width;
  if (total == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65535));
  bias_add_kernel<<<blocks, 256, 0, stream>>>(total, width, bias, x);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "bias_add launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
