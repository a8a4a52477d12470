// One thread per 8 consecutive elements of a row: a 16-byte load, an 8-byte (FP8) or 16-byte
// (bf16) store; a grid-stride loop keeps the grid at a few waves.
#include "quench/ops/quantize/quantize_fp8.h"

#include <cmath>

#include "quench/core/error.h"
#include "quench/ops/quantize/vec8_convert.cuh"

namespace quench {
namespace {

constexpr int32_t kThreads = 256;

__global__ void __launch_bounds__(kThreads) quantize_rows_kernel(const QuantizeRowsParams p) {
  const int64_t chunks_per_row = static_cast<int64_t>(p.num_heads) * p.head_dim / 8;
  const int64_t chunks = chunks_per_row * p.num_rows;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t row = i / chunks_per_row;
    const int64_t chunk = i - row * chunks_per_row;
    if (p.row_slots != nullptr && __ldg(p.row_slots + row) < 0) continue;
    float x[8];
    unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(p.x + row * p.x_row_stride) + chunk), x);
    const int32_t head = static_cast<int32_t>(chunk * 8 / p.head_dim);
    const float scale = p.scale.at(head);
    const int64_t elem = i * 8;
    const size_t out_bytes = p.out_dtype == DType::kBF16 ? 2 : 1;
    store_x8(static_cast<uint8_t*>(p.out) + elem * static_cast<int64_t>(out_bytes), p.out_dtype, x,
             scale, 1.0f / scale);
  }
}

}  // namespace

void quantize_rows_cuda(const QuantizeRowsParams& p, cudaStream_t stream) {
  QUENCH_REQUIRE(p.num_rows >= 0 && p.num_heads >= 1 && p.head_dim >= 8 && p.head_dim % 8 == 0,
                 "quantize_rows: num_rows ", p.num_rows, ", num_heads ", p.num_heads, ", head_dim ",
                 p.head_dim, " must be >= 0, >= 1, a multiple of 8");
  QUENCH_REQUIRE(p.out_dtype == DType::kBF16 || is_fp8(p.out_dtype), "quantize_rows: out_dtype ",
                 dtype_name(p.out_dtype), " is not allowed; allowed: fp8_e4m3, fp8_e5m2, bf16");
  QUENCH_REQUIRE(std::isfinite(p.scale.per_tensor) && p.scale.per_tensor > 0.0f,
                 "quantize_rows: scale ", p.scale.per_tensor, " must be finite and > 0");
  QUENCH_REQUIRE(p.out_dtype != DType::kBF16 || (p.scale.per_tensor == 1.0f && !p.scale.per_head),
                 "quantize_rows: a bf16 output takes scale 1 (no per-head array)");
  QUENCH_REQUIRE(
      p.x_row_stride % 8 == 0 && p.x_row_stride >= static_cast<int64_t>(p.num_heads) * p.head_dim,
      "quantize_rows: x_row_stride ", p.x_row_stride,
      " must be a multiple of 8 and >= num_heads*head_dim");
  if (p.num_rows == 0) return;
  const int64_t chunks = static_cast<int64_t>(p.num_rows) * p.num_heads * p.head_dim / 8;
  // 132 SMs x 8 blocks of 256 threads covers an H200 with full occupancy; more is pure overhead.
  const int64_t max_blocks = 132 * 8 * 4;
  const int64_t needed = (chunks + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned>(needed < max_blocks ? needed : max_blocks);
  quantize_rows_kernel<<<blocks, kThreads, 0, stream>>>(p);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess,
                 "quantize_rows kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
