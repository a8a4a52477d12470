#include "quench/ops/rms_norm/rms_norm.h"

#include "quench/core/alignment.h"
#include "quench/core/block_reduce.cuh"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/quantize/fp8_rows_out.cuh"
#include "quench/ops/rms_norm/rms_norm_vector.cuh"

namespace quench {
namespace {

using cta::block_sum;

constexpr int kThreads = 256;

// Rows whose width is a multiple of 8: each thread owns up to kMaxVectors 16-byte vectors of the
// row, and issues every load it needs (residual, delta, weight) before it waits on any, so the
// kernel costs one memory round trip, not one per element (the element loop before, which stored
// each residual element before loading the next, took 7-10 us per 2048-wide row on the H100:
// bench/LOG.md, twenty-sixth session).
constexpr int kMaxVectors = 4;  // width <= 8192

// With an FP8 output the grid also covers its padding rows (fp8.padded_rows), which write the
// zeros and scales an FP8 GEMM reads there and nothing else.
__global__ void __launch_bounds__(kThreads)
    rms_norm_vector_kernel(RmsNormParams p, Fp8RowsOut fp8) {
  const int64_t row = blockIdx.x;
  const int32_t fp8_rows = fp8.padded_rows(p.rows);
  if (row >= p.rows) {
    fp8_rows_device::store_padding_row<kThreads>(fp8, fp8_rows, row, p.width);
    return;
  }
  const int vectors = p.width / 8;
  auto* residual = reinterpret_cast<uint4*>(p.residual + row * p.width);
  const auto* delta = p.delta ? reinterpret_cast<const uint4*>(p.delta + row * p.width) : nullptr;
  const auto* weight = reinterpret_cast<const uint4*>(p.weight);
  uint4 r[kMaxVectors], d[kMaxVectors], w[kMaxVectors];
#pragma unroll
  for (int k = 0; k < kMaxVectors; ++k) {
    const int v = static_cast<int>(threadIdx.x) + k * kThreads;
    if (v < vectors) {
      r[k] = residual[v];
      d[k] = delta != nullptr ? __ldg(delta + v) : make_uint4(0, 0, 0, 0);
      w[k] = __ldg(weight + v);
    }
  }
  float sum_squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxVectors; ++k) {
    const int v = static_cast<int>(threadIdx.x) + k * kThreads;
    if (v >= vectors) break;
    if (delta != nullptr) {
      r[k] = rms_norm_device::add_residual(r[k], d[k]);
      residual[v] = r[k];
    }
    sum_squares = rms_norm_device::add_squares(r[k], sum_squares);
  }
  const float denominator =
      sqrtf(block_sum<kThreads>(sum_squares) / static_cast<float>(p.width) + p.eps);
  auto* out = p.out != nullptr ? reinterpret_cast<uint4*>(p.out + row * p.width) : nullptr;
  uint4 normalised[kMaxVectors];
#pragma unroll
  for (int k = 0; k < kMaxVectors; ++k) {
    const int v = static_cast<int>(threadIdx.x) + k * kThreads;
    if (v >= vectors) break;
    normalised[k] = rms_norm_device::normalise(r[k], w[k], denominator);
    if (out != nullptr) out[v] = normalised[k];
  }
  if (fp8.requested()) {
    fp8_rows_device::store_row<kThreads, kMaxVectors>(fp8, fp8_rows, row, p.width, normalised);
  }
}

// Any width: one block per row; each thread holds up to kMaxPerThread elements of the row in
// registers between the reduction and the scaling, so the row is read once.
constexpr int kMaxPerThread = 32;  // width <= 8192

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(RmsNormParams p) {
  const int64_t row = blockIdx.x;
  uint16_t* residual = p.residual + row * p.width;
  const uint16_t* delta = p.delta ? p.delta + row * p.width : nullptr;
  // Unrolled with constant indices, so that x stays in registers (a loop counting n spilled it
  // to local memory: ~10 us per 2048-wide row on the H100, against ~3 for the bytes).
  float x[kMaxPerThread];
  float sum_squares = 0.0f;
#pragma unroll
  for (int n = 0; n < kMaxPerThread; ++n) {
    const int i = static_cast<int>(threadIdx.x) + n * kThreads;
    if (i >= p.width) break;
    float v = bf16_bits_to_float(residual[i]);
    if (delta != nullptr) {
      v = bf16_bits_to_float(float_to_bf16_bits(v + bf16_bits_to_float(delta[i])));
      residual[i] = float_to_bf16_bits(v);
    }
    x[n] = v;
    sum_squares += v * v;
  }
  const float denominator =
      sqrtf(block_sum<kThreads>(sum_squares) / static_cast<float>(p.width) + p.eps);
  uint16_t* out = p.out + row * p.width;
#pragma unroll
  for (int n = 0; n < kMaxPerThread; ++n) {
    const int i = static_cast<int>(threadIdx.x) + n * kThreads;
    if (i >= p.width) break;
    out[i] = float_to_bf16_bits(x[n] / denominator * bf16_bits_to_float(p.weight[i]));
  }
}

}  // namespace

void rms_norm_cuda(const RmsNormParams& p, cudaStream_t stream) {
  rms_norm_cuda(p, Fp8RowsOut{}, stream);
}

void rms_norm_cuda(const RmsNormParams& p, const Fp8RowsOut& fp8, cudaStream_t stream) {
  QUENCH_REQUIRE(p.rows >= 0 && p.width >= 1 && p.width <= kThreads * kMaxPerThread,
                 "rms_norm rows ", p.rows, " width ", p.width, ": width must be in [1, ",
                 kThreads * kMaxPerThread, "]");
  QUENCH_REQUIRE(
      p.residual != nullptr && p.weight != nullptr && (p.out != nullptr || fp8.requested()),
      "rms_norm residual, weight and out (or an FP8 output) must not be null");
  QUENCH_REQUIRE(p.out != p.residual, "rms_norm out must not alias residual");
  const bool vectors = p.width % 8 == 0 && aligned16(p.residual) && aligned16(p.delta) &&
                       aligned16(p.weight) && aligned16(p.out);
  if (fp8.requested()) {
    QUENCH_REQUIRE(vectors, "rms_norm with an FP8 output needs a width that is a multiple of 8 ",
                   "(", p.width, ") and 16-byte aligned residual, delta, weight and out");
    check_fp8_rows_out("rms_norm", fp8, p.rows, p.width);
  }
  const int32_t grid = fp8.requested() ? fp8.padded_rows(p.rows) : p.rows;
  if (grid == 0) return;
  if (vectors) {
    rms_norm_vector_kernel<<<grid, kThreads, 0, stream>>>(p, fp8);
  } else {
    rms_norm_kernel<<<p.rows, kThreads, 0, stream>>>(p);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "rms_norm launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
