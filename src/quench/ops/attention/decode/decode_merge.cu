// Split-KV merge: for every (query token, q head) combines the num_splits partial outputs by
// their log-sum-exp (and the attention sink, when present), then runs the output epilogue.
//
// One CTA of 128 threads per row. The merge runs after the main kernel on the critical path of
// every decode step with splits (small batches, long contexts: up to 64 splits per row), so it
// must cost one memory latency, not one per split or per group of splits: every thread owns one
// float4 column chunk of the row in a group of splits and issues all its loads at once, before
// the weights are known (the LSEs load in parallel with them); the groups' sums then meet in
// shared memory. (One warp per row with the splits in rounds of 8 took 9 us for 49 splits x 32
// rows on the H200, cold caches: seven rounds of latency on 8 SMs.)
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
constexpr int kMergeThreads = 128;

template <int kHeadDim>
__global__ void __launch_bounds__(kMergeThreads)
    decode_merge_kernel(const __grid_constant__ DecodeKernelArgs args) {
  constexpr int kChunks = kHeadDim / 4;                    // float4 column chunks of a row
  constexpr int kGroups = kMergeThreads / kChunks;         // split groups: 8, 4 or 2
  constexpr int kPerGroup = kMaxSplits / kGroups;          // most splits one thread visits
  constexpr int kBatch = kPerGroup < 16 ? kPerGroup : 16;  // loads in flight per thread
  static_assert(kChunks * kGroups == kMergeThreads, "head_dim 64, 128 or 256");
  __shared__ float weights[kMaxSplits];
  __shared__ float row_stats[2];  // total max (log2 units), denominator
  __shared__ __align__(16) float sums[kGroups][kHeadDim];
  wait_for_primary_grid();  // the partials are complete and visible past this point
  const AttentionParams& p = args.p;
  const int tid = static_cast<int>(threadIdx.x);
  const int chunk = tid % kChunks;
  const int group = tid / kChunks;
  const int64_t split_rows = static_cast<int64_t>(p.num_tokens) * p.num_q_heads;
  const int num_splits = args.num_splits;
  for (int64_t row = blockIdx.x; row < split_rows; row += gridDim.x) {
    const int32_t head = static_cast<int32_t>(row % p.num_q_heads);
    const int32_t token = static_cast<int32_t>(row / p.num_q_heads);
    const float4* column = reinterpret_cast<const float4*>(args.partial_o + row * kHeadDim) + chunk;
    const int64_t split_stride = split_rows * kChunks;  // float4s from one split to the next

    // This thread's first batch of partial chunks (splits group, group + kGroups, ...), issued
    // before the weights exist: a split that saw no token has an unwritten (arbitrary) chunk,
    // which its zero weight keeps out below.
    float4 x[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int s = group + i * kGroups;
      x[i] = s < num_splits ? column[s * split_stride] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    if (tid < 32) {
      // LSEs of splits lane and lane + 32 (num_splits <= kMaxSplits = 64).
      const int lane = tid;
      const float lse0 = lane < num_splits ? args.partial_lse[lane * split_rows + row] : -INFINITY;
      const float lse1 =
          lane + 32 < num_splits ? args.partial_lse[(lane + 32) * split_rows + row] : -INFINITY;
      float max_lse = fmaxf(lse0, lse1);
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
      const float sink = p.sinks != nullptr ? p.sinks[head] * kMergeLog2e : -INFINITY;
      const float total_max = fmaxf(max_lse, sink);
      const float w0 = lse0 == -INFINITY ? 0.0f : fast_exp2(lse0 - total_max);
      const float w1 = lse1 == -INFINITY ? 0.0f : fast_exp2(lse1 - total_max);
      float denom = w0 + w1;
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        denom += __shfl_xor_sync(0xffffffffu, denom, offset);
      if (p.sinks != nullptr) denom += fast_exp2(sink - total_max);
      weights[lane] = w0;
      weights[lane + 32] = w1;
      if (lane == 0) row_stats[0] = total_max, row_stats[1] = denom;
    }
    __syncthreads();

    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const auto add = [&](const float4& v, int s) {
      const float w = s < num_splits ? weights[s] : 0.0f;
      if (w != 0.0f) {
        acc.x += w * v.x, acc.y += w * v.y;
        acc.z += w * v.z, acc.w += w * v.w;
      }
    };
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      add(x[i], group + i * kGroups);
    for (int s0 = group + kBatch * kGroups; s0 < num_splits; s0 += kBatch * kGroups) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int s = s0 + i * kGroups;
        x[i] = s < num_splits ? column[s * split_stride] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        add(x[i], s0 + i * kGroups);
    }
    *reinterpret_cast<float4*>(&sums[group][4 * chunk]) = acc;
    __syncthreads();

    // The epilogue works on 16 consecutive elements (one NVFP4 block) per thread.
    const float total_max = row_stats[0];
    const float denom = row_stats[1];
    if (tid < kHeadDim / 16) {
      const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
      float v[16];
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        float sum = 0.0f;
#pragma unroll
        for (int g = 0; g < kGroups; ++g)
          sum += sums[g][16 * tid + k];
        v[k] = sum * inv;
      }
      write_output_block16(p, token, head, 16 * tid, v);
    }
    if (tid == 0 && p.lse != nullptr) p.lse[row] = (total_max + __log2f(denom)) * kMergeLn2;
    __syncthreads();  // weights, row_stats and sums are rewritten for the block's next row
  }
}

}  // namespace

void launch_decode_merge(const DecodeKernelArgs& args, bool dependent, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(args.p.num_tokens) * args.p.num_q_heads;
  if (rows == 0) return;
  QUENCH_REQUIRE(args.num_splits <= kMaxSplits, "decode merge: num_splits ", args.num_splits,
                 " exceeds ", kMaxSplits);
  const int64_t blocks = rows;
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
  config.gridDim = dim3(static_cast<unsigned>(blocks < 1048576 ? blocks : 1048576));
  config.blockDim = dim3(kMergeThreads);
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
