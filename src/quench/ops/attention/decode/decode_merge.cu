// Split-KV merge: for every (query token, q head) combines the num_splits partial outputs by
// their log-sum-exp (and the attention sink, when present), then runs the output epilogue.
//
// One warp per row. The merge runs after the main kernel on the critical path of every decode
// step with splits (small batches, long contexts), so it must cost about one memory latency,
// not one per split: the lanes read the splits' LSEs in parallel, and every lane then streams
// its head_dim / 32 columns of all splits with the loads of kUnroll splits in flight at once.
#include <cuda_runtime.h>

#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_output.cuh"
#include "quench/ops/attention/decode/dependent_launch.cuh"

namespace quench::decode {
namespace {

constexpr float kMergeLog2e = 1.4426950408889634f;
constexpr float kMergeLn2 = 0.6931471805599453f;
constexpr int kMergeWarps = 4;
constexpr int kUnroll = 8;

template <int kHeadDim>
__global__ void __launch_bounds__(kMergeWarps * 32)
    decode_merge_kernel(const __grid_constant__ DecodeKernelArgs args) {
  constexpr int kColsPerLane = kHeadDim / 32;  // 2, 4 or 8: float2 loads
  __shared__ float weights[kMergeWarps][kMaxSplits];
  __shared__ __align__(16) float merged[kMergeWarps][kHeadDim];
  wait_for_primary_grid();  // the partials are complete and visible past this point
  const AttentionParams& p = args.p;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t split_rows = static_cast<int64_t>(p.num_tokens) * p.num_q_heads;
  const int num_splits = args.num_splits;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kMergeWarps + warp; row < split_rows;
       row += static_cast<int64_t>(gridDim.x) * kMergeWarps) {
    const int32_t head = static_cast<int32_t>(row % p.num_q_heads);
    const int32_t token = static_cast<int32_t>(row / p.num_q_heads);

    // LSEs of splits lane and lane + 32 (num_splits <= kMaxSplits = 64).
    const float lse0 = lane < num_splits ? args.partial_lse[lane * split_rows + row] : -INFINITY;
    const float lse1 =
        lane + 32 < num_splits ? args.partial_lse[(lane + 32) * split_rows + row] : -INFINITY;
    float max_lse = fmaxf(lse0, lse1);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
    const float sink = p.sinks != nullptr ? p.sinks[head] * kMergeLog2e : -INFINITY;
    const float total_max = fmaxf(max_lse, sink);
    // A split that saw no visible token has lse -inf: weight 0, and its partial_o (never
    // written) is not read.
    const float w0 = lse0 == -INFINITY ? 0.0f : fast_exp2(lse0 - total_max);
    const float w1 = lse1 == -INFINITY ? 0.0f : fast_exp2(lse1 - total_max);
    float denom = w0 + w1;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      denom += __shfl_xor_sync(0xffffffffu, denom, offset);
    if (p.sinks != nullptr) denom += fast_exp2(sink - total_max);
    if (lane < num_splits) weights[warp][lane] = w0;
    if (lane + 32 < num_splits) weights[warp][lane + 32] = w1;
    __syncwarp();

    float acc[kColsPerLane] = {};
    const float* column = args.partial_o + row * kHeadDim + lane * kColsPerLane;
    for (int s0 = 0; s0 < num_splits; s0 += kUnroll) {
      float2 x[kUnroll][kColsPerLane / 2];
      float w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int s = s0 + u;
        w[u] = s < num_splits ? weights[warp][s] : 0.0f;
#pragma unroll
        for (int i = 0; i < kColsPerLane / 2; ++i) {
          x[u][i] = w[u] != 0.0f ? reinterpret_cast<const float2*>(
                                       column + static_cast<int64_t>(s) * split_rows * kHeadDim)[i]
                                 : make_float2(0.0f, 0.0f);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int i = 0; i < kColsPerLane / 2; ++i) {
          acc[2 * i] += w[u] * x[u][i].x;
          acc[2 * i + 1] += w[u] * x[u][i].y;
        }
      }
    }
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
#pragma unroll
    for (int i = 0; i < kColsPerLane; ++i)
      merged[warp][lane * kColsPerLane + i] = acc[i] * inv;
    __syncwarp();
    // The epilogue works on 16 consecutive elements (one NVFP4 block) per lane.
    if (lane < kHeadDim / 16) {
      float v[16];
#pragma unroll
      for (int k = 0; k < 16; ++k)
        v[k] = merged[warp][16 * lane + k];
      write_output_block16(p, token, head, 16 * lane, v);
    }
    if (lane == 0 && p.lse != nullptr) p.lse[row] = (total_max + __log2f(denom)) * kMergeLn2;
    __syncwarp();  // weights and merged are rewritten by the warp's next row
  }
}

}  // namespace

void launch_decode_merge(const DecodeKernelArgs& args, bool dependent, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(args.p.num_tokens) * args.p.num_q_heads;
  if (rows == 0) return;
  QUENCH_REQUIRE(args.num_splits <= kMaxSplits, "decode merge: num_splits ", args.num_splits,
                 " exceeds ", kMaxSplits);
  const int64_t blocks = (rows + kMergeWarps - 1) / kMergeWarps;
  void (*kernel)(DecodeKernelArgs) = nullptr;
  switch (args.p.kv.head_dim) {
    case 64:
      kernel = decode_merge_kernel<64>;
      break;
    case 128:
      kernel = decode_merge_kernel<128>;
      break;
    default:
      QUENCH_REQUIRE(args.p.kv.head_dim == 256, "decode merge: head_dim ", args.p.kv.head_dim,
                     " is not supported; allowed: 64, 128, 256");
      kernel = decode_merge_kernel<256>;
      break;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks < 65535 ? blocks : 65535));
  config.blockDim = dim3(kMergeWarps * 32);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;  // older GPUs: launched after the kernel
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, args);
  QUENCH_REQUIRE(status == cudaSuccess, "decode merge launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench::decode
