#include "quench/ops/swiglu/swiglu.h"

#include "quench/core/alignment.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/quantize/fp8_rows_out.cuh"

namespace quench {
namespace {

// silu(g) * up in fp32, rounded once: the one expression both kernels compute.
__device__ __forceinline__ uint16_t swiglu_bits(float g, float u) {
  return float_to_bf16_bits(g / (1.0f + expf(-g)) * u);
}

// swiglu_bits over the eight bf16 pairs of a gate and an up vector.
__device__ __forceinline__ uint4 swiglu_vector(const uint4& g4, const uint4& u4) {
  const uint32_t g[4] = {g4.x, g4.y, g4.z, g4.w};
  const uint32_t u[4] = {u4.x, u4.y, u4.z, u4.w};
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint16_t lo = swiglu_bits(bf16_bits_to_float(static_cast<uint16_t>(g[i] & 0xffffu)),
                                    bf16_bits_to_float(static_cast<uint16_t>(u[i] & 0xffffu)));
    const uint16_t hi = swiglu_bits(bf16_bits_to_float(static_cast<uint16_t>(g[i] >> 16)),
                                    bf16_bits_to_float(static_cast<uint16_t>(u[i] >> 16)));
    words[i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

__global__ void swiglu_kernel(int64_t total, int32_t features, const uint16_t* gate_up,
                              uint16_t* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / features, col = i - row * features;
    out[i] = swiglu_bits(bf16_bits_to_float(gate_up[row * 2 * features + col]),
                         bf16_bits_to_float(gate_up[row * 2 * features + features + col]));
  }
}

// 8 features per thread (16-byte loads and stores) where the rows are whole vectors: an eighth of
// the element kernel's memory instructions. At 32 rows of 8192 both take ~5.1 us on the H100
// (eager, bench/LOG.md thirty-third session: a launch and one round trip bound them); prefill's
// thousands of rows are where the instruction count matters (not measured apart).
__global__ void swiglu_vector_kernel(int64_t total_vectors, int32_t row_vectors,
                                     const uint16_t* gate_up, uint16_t* out) {
  const auto* in = reinterpret_cast<const uint4*>(gate_up);
  auto* dst = reinterpret_cast<uint4*>(out);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total_vectors;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / row_vectors, col = i - row * row_vectors;
    const uint4 g4 = __ldg(in + row * 2 * row_vectors + col);
    const uint4 u4 = __ldg(in + row * 2 * row_vectors + row_vectors + col);
    dst[i] = swiglu_vector(g4, u4);
  }
}

constexpr int kRowThreads = 1024;
constexpr int kRowMaxVectors = kSwigluFp8MaxFeatures / 8 / kRowThreads;

// One CTA per row (and per FP8 padding row): each thread loads all of its 16-byte vectors of the
// row (vector v = thread + k * kRowThreads) before it computes any, so that the row costs one
// memory round trip (computing each vector before loading the next made the loads wait on the
// bf16 stores, which may alias them: 11.6 us for 32 rows of 8192 on the H100, bench/LOG.md,
// thirty-third session); then stores them as bf16 where asked and hands them to the FP8 row
// store, which needs the whole row's amax before it writes.
__global__ void __launch_bounds__(kRowThreads)
    swiglu_fp8_row_kernel(int32_t rows, int32_t features, const uint16_t* gate_up, uint16_t* out,
                          Fp8RowsOut fp8) {
  const int64_t row = blockIdx.x;
  const int32_t fp8_rows = fp8.padded_rows(rows);
  if (row >= rows) {
    fp8_rows_device::store_padding_row<kRowThreads>(fp8, fp8_rows, row, features);
    return;
  }
  const int vectors = features / 8;
  const auto* gate = reinterpret_cast<const uint4*>(gate_up + row * 2 * features);
  const auto* up = reinterpret_cast<const uint4*>(gate_up + row * 2 * features + features);
  auto* dst = out != nullptr ? reinterpret_cast<uint4*>(out + row * features) : nullptr;
  uint4 g4[kRowMaxVectors], u4[kRowMaxVectors];
#pragma unroll
  for (int k = 0; k < kRowMaxVectors; ++k) {
    const int v = static_cast<int>(threadIdx.x) + k * kRowThreads;
    if (v < vectors) {
      g4[k] = __ldg(gate + v);
      u4[k] = __ldg(up + v);
    }
  }
  uint4 values[kRowMaxVectors];
#pragma unroll
  for (int k = 0; k < kRowMaxVectors; ++k) {
    const int v = static_cast<int>(threadIdx.x) + k * kRowThreads;
    if (v >= vectors) break;
    values[k] = swiglu_vector(g4[k], u4[k]);
    if (dst != nullptr) dst[v] = values[k];
  }
  fp8_rows_device::store_row<kRowThreads, kRowMaxVectors>(fp8, fp8_rows, row, features, values);
}

}  // namespace

void swiglu_cuda(int32_t rows, int32_t features, const uint16_t* gate_up, uint16_t* out,
                 cudaStream_t stream) {
  QUENCH_REQUIRE(rows >= 0 && features >= 1, "swiglu rows ", rows, " features ", features,
                 " out of range");
  QUENCH_REQUIRE(gate_up != nullptr && out != nullptr, "swiglu gate_up and out must not be null");
  const int64_t total = int64_t{rows} * features;
  if (total == 0) return;
  if (features % 8 == 0 && aligned16(gate_up) && aligned16(out)) {
    const int64_t total_vectors = total / 8;
    const auto blocks =
        static_cast<unsigned>(std::min<int64_t>((total_vectors + 255) / 256, 65535));
    swiglu_vector_kernel<<<blocks, 256, 0, stream>>>(total_vectors, features / 8, gate_up, out);
  } else {
    const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65535));
    swiglu_kernel<<<blocks, 256, 0, stream>>>(total, features, gate_up, out);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "swiglu launch failed: ", cudaGetErrorString(status));
}

void swiglu_cuda(int32_t rows, int32_t features, const uint16_t* gate_up, uint16_t* out,
                 const Fp8RowsOut& fp8, cudaStream_t stream) {
  if (!fp8.requested()) {
    swiglu_cuda(rows, features, gate_up, out, stream);
    return;
  }
  QUENCH_REQUIRE(rows >= 0, "swiglu with an FP8 output: rows ", rows, " must be >= 0");
  QUENCH_REQUIRE(features >= 8 && features % 8 == 0 && features <= kSwigluFp8MaxFeatures,
                 "swiglu with an FP8 output: ", features,
                 " features are not supported; allowed: a multiple of 8 up to ",
                 kSwigluFp8MaxFeatures);
  QUENCH_REQUIRE(gate_up != nullptr && aligned16(gate_up) && aligned16(out),
                 "swiglu with an FP8 output: gate_up must not be null, and gate_up and out must "
                 "be 16-byte aligned");
  check_fp8_rows_out("swiglu", fp8, rows, features);
  const int32_t grid = fp8.padded_rows(rows);
  if (grid == 0) return;
  swiglu_fp8_row_kernel<<<grid, kRowThreads, 0, stream>>>(rows, features, gate_up, out, fp8);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "swiglu launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
