#include "quench/ops/swiglu/swiglu.h"

#include "quench/core/error.h"
#include "quench/numerics/bf16.h"

namespace quench {
namespace {

__global__ void swiglu_kernel(int64_t total, int32_t features, const uint16_t* gate_up,
                              uint16_t* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / features, col = i - row * features;
    const float g = bf16_bits_to_float(gate_up[row * 2 * features + col]);
    const float u = bf16_bits_to_float(gate_up[row * 2 * features + features + col]);
    out[i] = float_to_bf16_bits(g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

void swiglu_cuda(int32_t rows, int32_t features, const uint16_t* gate_up, uint16_t* out,
                 cudaStream_t stream) {
  QUENCH_REQUIRE(rows >= 0 && features >= 1, "swiglu rows ", rows, " features ", features,
                 " out of range");
  QUENCH_REQUIRE(gate_up != nullptr && out != nullptr, "swiglu gate_up and out must not be null");
  const int64_t total = int64_t{rows} * features;
  if (total == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65535));
  swiglu_kernel<<<blocks, 256, 0, stream>>>(total, features, gate_up, out);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "swiglu launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
