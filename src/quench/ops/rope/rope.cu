// Standalone RoPE kernel: one lane group (head_dim/8 lanes, 8 elements each) per (token, head)
// row of q or k, rows numbered token-major; one 16-byte load and one 16-byte store per lane.
#include "quench/ops/rope/rope.h"

#include <cstdint>
#include <limits>

#include "quench/core/device_array_check.h"
#include "quench/core/error.h"
#include "quench/ops/quantize/vec8_convert.cuh"
#include "quench/ops/rope/rope_angles.h"
#include "quench/ops/rope/rope_head_row.cuh"

namespace quench {
namespace {

constexpr int32_t kThreads = 256;

struct RopeArgs {
  RopeParams p;
  RopeAngles angles;
};

template <bool kFromCache>
__global__ void __launch_bounds__(kThreads) rope_kernel(const RopeArgs args) {
  __shared__ float smem_inv_freq[kMaxRopePairs];
  if constexpr (!kFromCache) stage_inv_freq(args.angles, smem_inv_freq);
  const RopeParams& p = args.p;
  const LaneGroup g = make_lane_group(p.head_dim);
  const int32_t heads = p.num_q_heads + p.num_kv_heads;
  const int32_t item = static_cast<int32_t>(blockIdx.x) * (kThreads / g.lanes) +
                       static_cast<int32_t>(threadIdx.x) / g.lanes;
  if (item >= p.num_tokens * heads) return;
  const int32_t t = item / heads;
  const int32_t h = item - t * heads;
  const bool is_q = h < p.num_q_heads;
  const int32_t head = is_q ? h : h - p.num_q_heads;
  const uint16_t* src = is_q ? p.q + t * p.q_row_stride : p.k + t * p.k_row_stride;
  const uint4 raw =
      __ldg(reinterpret_cast<const uint4*>(src + static_cast<int64_t>(head) * p.head_dim) + g.lane);
  const int32_t pos = __ldg(p.positions + t);
  if (pos < 0 || (kFromCache && pos >= p.cos_sin_cache_positions)) return;
  float x[8];
  unpack_bf16x8(raw, x);
  if (p.q_norm_weight != nullptr) {
    rms_norm_x8(x, g, p.head_dim, is_q ? p.q_norm_weight : p.k_norm_weight, p.norm_eps);
  }
  rope_x8<kFromCache>(x, g, args.angles, smem_inv_freq, pos);
  const int64_t row = static_cast<int64_t>(t) * (is_q ? p.num_q_heads : p.num_kv_heads) + head;
  uint16_t* dst = (is_q ? p.q_out : p.k_out) + row * p.head_dim;
  reinterpret_cast<uint4*>(dst)[g.lane] = pack_bf16x8(x);
}

}  // namespace

void rope_cuda(const RopeParams& p, cudaStream_t stream) {
  QUENCH_REQUIRE(p.num_tokens >= 0 && p.num_q_heads >= 1 && p.num_kv_heads >= 1,
                 "rope: num_tokens ", p.num_tokens, ", num_q_heads ", p.num_q_heads,
                 ", num_kv_heads ", p.num_kv_heads, " must be >= 0, >= 1, >= 1");
  QUENCH_REQUIRE(p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256, "rope: head_dim ",
                 p.head_dim, " is not supported; allowed: 64, 128, 256");
  p.rope.validate(p.head_dim);
  QUENCH_REQUIRE(p.rope.rotary_dim % 16 == 0, "rope: rotary_dim ", p.rope.rotary_dim,
                 " must be a multiple of 16 on the GPU");
  QUENCH_REQUIRE((p.q_norm_weight == nullptr) == (p.k_norm_weight == nullptr),
                 "rope: q_norm_weight and k_norm_weight must be both set or both null");
  const int64_t items = static_cast<int64_t>(p.num_tokens) * (p.num_q_heads + p.num_kv_heads);
  // The kernel's int32 item index runs up to one block past the last head row.
  QUENCH_REQUIRE(items <= std::numeric_limits<int32_t>::max() - kThreads, "rope: ", items,
                 " head rows (num_tokens x (num_q_heads + num_kv_heads)) exceed the limit; "
                 "allowed: at most 2^31 - 1 - ",
                 kThreads);
  if (p.num_tokens == 0) return;
  require_row_stride(p.q_row_stride, static_cast<int64_t>(p.num_q_heads) * p.head_dim,
                     "num_q_heads * head_dim", 2, "rope", "q_row_stride");
  require_row_stride(p.k_row_stride, static_cast<int64_t>(p.num_kv_heads) * p.head_dim,
                     "num_kv_heads * head_dim", 2, "rope", "k_row_stride");
  QUENCH_REQUIRE(p.positions != nullptr, "rope: positions is null; ", p.num_tokens,
                 " tokens need one each");
  require_aligned_device_array(p.q, "rope", "q");
  require_aligned_device_array(p.k, "rope", "k");
  require_aligned_device_array(p.q_out, "rope", "q_out");
  require_aligned_device_array(p.k_out, "rope", "k_out");
  RopeArgs args;
  args.p = p;
  args.angles = make_rope_angles(p.rope, p.cos_sin_cache, p.cos_sin_cache_positions);
  const int64_t items_per_block = kThreads / (p.head_dim / 8);
  const auto blocks = static_cast<unsigned>((items + items_per_block - 1) / items_per_block);
  if (p.cos_sin_cache != nullptr) {
    rope_kernel<true><<<blocks, kThreads, 0, stream>>>(args);
  } else {
    rope_kernel<false><<<blocks, kThreads, 0, stream>>>(args);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "rope kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
