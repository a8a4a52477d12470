#include <cuda_runtime.h>

#include "quench/attention/query_quantize.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"

namespace quench {
namespace {

__global__ void quantize_query_kernel(const uint16_t* src, bool src_is_bf16, uint8_t* dst,
                                      Fp8Format format, int64_t count, float q_scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const float x = src_is_bf16 ? bf16_bits_to_float(src[i]) : f16_bits_to_float(src[i]);
    dst[i] = float_to_fp8(x / q_scale, format);
  }
}

}  // namespace

void quantize_query_device(const uint16_t* src, DType src_dtype, uint8_t* dst, DType dst_dtype,
                           int64_t count, float q_scale, void* stream) {
  QUENCH_REQUIRE(src_dtype == DType::kBF16 || src_dtype == DType::kF16, "query dtype ",
                 dtype_name(src_dtype), " cannot be quantized; allowed: bf16, f16");
  const Fp8Format format = fp8_format_of(dst_dtype);
  if (count == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
  quantize_query_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      src, src_dtype == DType::kBF16, dst, format, count, q_scale);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess,
                 "quantize_query_device launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
