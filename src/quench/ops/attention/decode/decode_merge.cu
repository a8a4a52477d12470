// Split-KV merge: for every (query token, q head) combines the num_splits partial outputs by
// their log-sum-exp (and the attention sink, when present), then runs the output epilogue.
// One thread per 16 output elements, so the NVFP4 block of an element is one thread's work.
#include <cuda_runtime.h>

#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_output.cuh"

namespace quench::decode {
namespace {

constexpr float kMergeLog2e = 1.4426950408889634f;
constexpr float kMergeLn2 = 0.6931471805599453f;
constexpr int kMergeThreads = 128;

__global__ void __launch_bounds__(kMergeThreads)
    decode_merge_kernel(const __grid_constant__ DecodeKernelArgs args) {
  const AttentionParams& p = args.p;
  const int32_t head_dim = p.kv.head_dim;
  const int32_t blocks_per_row = head_dim / 16;
  const int64_t total = static_cast<int64_t>(p.num_tokens) * p.num_q_heads * blocks_per_row;
  const int64_t split_rows = static_cast<int64_t>(p.num_tokens) * p.num_q_heads;
  for (int64_t unit = static_cast<int64_t>(blockIdx.x) * kMergeThreads + threadIdx.x; unit < total;
       unit += static_cast<int64_t>(gridDim.x) * kMergeThreads) {
    const int64_t row = unit / blocks_per_row;  // token * num_q_heads + head
    const int32_t d0 = static_cast<int32_t>(unit % blocks_per_row) * 16;
    const int32_t head = static_cast<int32_t>(row % p.num_q_heads);
    const int32_t token = static_cast<int32_t>(row / p.num_q_heads);

    float max_lse = -INFINITY;
    for (int s = 0; s < args.num_splits; ++s) {
      max_lse = fmaxf(max_lse, args.partial_lse[s * split_rows + row]);
    }
    const float sink = p.sinks != nullptr ? p.sinks[head] * kMergeLog2e : -INFINITY;
    const float total_max = fmaxf(max_lse, sink);
    float denom = p.sinks != nullptr ? fast_exp2(sink - total_max) : 0.0f;
    float v[16];
#pragma unroll
    for (int k = 0; k < 16; ++k)
      v[k] = 0.0f;
    for (int s = 0; s < args.num_splits; ++s) {
      const float lse = args.partial_lse[s * split_rows + row];
      if (lse == -INFINITY) continue;  // the split saw no visible token of this row
      const float w = fast_exp2(lse - total_max);
      denom += w;
      const float4* src =
          reinterpret_cast<const float4*>(args.partial_o + (s * split_rows + row) * head_dim + d0);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float4 x = src[k];
        v[4 * k] += w * x.x, v[4 * k + 1] += w * x.y, v[4 * k + 2] += w * x.z,
            v[4 * k + 3] += w * x.w;
      }
    }
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
#pragma unroll
    for (int k = 0; k < 16; ++k)
      v[k] *= inv;
    write_output_block16(p, token, head, d0, v);
    if (d0 == 0 && p.lse != nullptr) p.lse[row] = (total_max + __log2f(denom)) * kMergeLn2;
  }
}

}  // namespace

void launch_decode_merge(const DecodeKernelArgs& args, cudaStream_t stream) {
  const int64_t units =
      static_cast<int64_t>(args.p.num_tokens) * args.p.num_q_heads * (args.p.kv.head_dim / 16);
  if (units == 0) return;
  const int64_t blocks = (units + kMergeThreads - 1) / kMergeThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
  decode_merge_kernel<<<grid, kMergeThreads, 0, stream>>>(args);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "decode merge launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench::decode
