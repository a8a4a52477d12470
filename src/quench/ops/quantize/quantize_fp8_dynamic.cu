// One CTA per row (and per padding row), one thread per 8 consecutive elements (a 16-byte load,
// an 8-byte store).
// group 128: a half warp's 16 threads hold one group per pass, its amax one 16-lane shuffle
// reduction, so each pass quantizes what it loaded. group == cols: the row's amax first (a CTA
// reduction), then a second pass quantizes (the row is L1/L2-hot by then).
#include "quench/ops/quantize/quantize_fp8_dynamic.h"

#include <cmath>

#include "quench/core/block_reduce.cuh"
#include "quench/core/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/quantize/fp8_rows_out.cuh"
#include "quench/ops/quantize/vec8_convert.cuh"

namespace quench {
namespace {

using fp8_rows_device::amax8;
using fp8_rows_device::scale_from_amax;

constexpr int kThreads = 256;

struct Args {
  int32_t rows = 0, cols = 0;
  const uint16_t* x = nullptr;
  Fp8RowsOut out;  // codes, scales, group, scale order; one CTA per out.padded_rows(rows)
};

template <bool kGroup128>
__global__ void __launch_bounds__(kThreads) quantize_dynamic_kernel(Args a) {
  const int64_t row = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x);
  const int cols = a.cols;
  const int vectors = cols / 8;
  const int32_t padded_rows = a.out.padded_rows(a.rows);  // rows past `rows`: zeros, scale 1
  if (row >= a.rows) {
    fp8_rows_device::store_padding_row<kThreads>(a.out, padded_rows, row, cols);
    return;
  }
  const auto* in = reinterpret_cast<const uint4*>(a.x + row * cols);
  if constexpr (kGroup128) {
    // Every thread runs every pass (the shuffles need whole warps); a half warp past the row's
    // end has no group and stores nothing.
    for (int base = 0; base < vectors; base += kThreads) {
      const int v = base + tid;
      float values[8] = {};
      if (v < vectors) unpack_bf16x8(__ldg(in + v), values);
      fp8_rows_device::store_group_vector(a.out, padded_rows, row, cols, v, v < vectors, values);
    }
  } else {
    // The row's amax first, then a second pass quantizes (the row is L1/L2-hot by then).
    float amax = 0.0f;
    for (int v = tid; v < vectors; v += kThreads) {
      float values[8];
      unpack_bf16x8(__ldg(in + v), values);
      amax = fmaxf(amax, amax8(values));
    }
    const float scale = scale_from_amax(cta::block_max<kThreads>(amax));
    const float inv_scale = 1.0f / scale;
    auto* dst = reinterpret_cast<uint2*>(a.out.data + row * cols);
    for (int v = tid; v < vectors; v += kThreads) {
      float values[8];
      unpack_bf16x8(__ldg(in + v), values);
      dst[v] = pack_fp8x8(values, scale, inv_scale, Fp8Format::kE4M3);
    }
    if (tid == 0) {
      fp8_rows_device::scale_at(a.out.scales, a.out.layout.scales_by_group, padded_rows, 1, row,
                                0) = scale;
    }
  }
}

}  // namespace

void quantize_fp8_dynamic_rows_cuda(int32_t rows, int32_t cols, int32_t group, const uint16_t* x,
                                    uint8_t* out, float* scales, cudaStream_t stream) {
  quantize_fp8_dynamic_rows_cuda(rows, cols, group, x, out, scales, Fp8DynamicLayout{}, stream);
}

void quantize_fp8_dynamic_rows_cuda(int32_t rows, int32_t cols, int32_t group, const uint16_t* x,
                                    uint8_t* out, float* scales, const Fp8DynamicLayout& layout,
                                    cudaStream_t stream) {
  QUENCH_REQUIRE(rows >= 0, "quantize_fp8_dynamic_rows: rows ", rows, " must be >= 0");
  QUENCH_REQUIRE(x != nullptr && out != nullptr,
                 "quantize_fp8_dynamic_rows: x and out must not be null");
  QUENCH_REQUIRE(reinterpret_cast<uintptr_t>(x) % 16 == 0,
                 "quantize_fp8_dynamic_rows: x must be 16-byte aligned");
  Args a;
  a.rows = rows;
  a.cols = cols;
  a.x = x;
  a.out.data = out;
  a.out.scales = scales;
  a.out.group = group;
  a.out.layout = layout;
  // The same output checks as the kernels that write these rows themselves (fp8_rows_out.h).
  check_fp8_rows_out("quantize_fp8_dynamic_rows", a.out, rows, cols);
  const int32_t padded_rows = a.out.padded_rows(rows);
  if (padded_rows == 0) return;
  const auto blocks = static_cast<unsigned>(padded_rows);
  if (group == cols) {
    quantize_dynamic_kernel<false><<<blocks, kThreads, 0, stream>>>(a);
  } else {
    quantize_dynamic_kernel<true><<<blocks, kThreads, 0, stream>>>(a);
  }
  check_cuda(cudaGetLastError(), "quantize_fp8_dynamic_rows launch");
}

}  // namespace quench
