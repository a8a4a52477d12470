// The fused RoPE + quantize + paged KV append kernel for small batches (decode steps, T <= 64
// tokens): one work item = one (token, head) row of q, k or v; a group of head_dim/8 lanes holds
// the row in registers (one 16-byte load per lane), applies the optional RMSNorm and RoPE
// (rope_head_row.cuh), and writes 8 elements per lane: the q row as bf16 or FP8, k and v straight
// into their cache slot. Every row is its own lane group, so even T = 1 spreads over
// Hq + 2 Hkv groups at once; measured on the H200 it takes 2.2-2.6 us (Llama-3-8B) and
// 2.8-3.6 us (Qwen3-32B with q/k norm) at T <= 64, where the token-per-warp kernel
// (rope_quant_append.cu) takes 3.0-3.3 and 4.0-5.1 us. Items are numbered token-major, so the
// blocks of one token share its cos/sin row in L1. No divide instruction (a multiply plus
// Markstein's correction, scale_divide.h; per-tensor inverses come from the host), two FP8
// conversions per instruction.
#include "quench/ops/rope_quant_append/rope_quant_append_row_items.h"

#include <bit>
#include <cstdint>

#include "quench/core/error.h"
#include "quench/ops/quantize/vec8_convert.cuh"
#include "quench/ops/rope/rope_angles.h"
#include "quench/ops/rope/rope_head_row.cuh"

namespace quench {
namespace {

constexpr int32_t kThreads = 256;
// Blocks of 256 threads per SM: 6 (40 registers, an 8-byte spill) keeps enough 16-byte loads in
// flight for HBM on the cache path; the sincos path needs more registers for its range reduction.
constexpr int32_t min_blocks_per_sm(bool from_cache) {
  return from_cache ? 6 : 4;
}

struct FusedArgs {
  RopeQuantAppendParams p;
  RopeAngles angles;
  int64_t cache_slots;       // num_pages * page_size: slots outside [0, cache_slots) are skipped
  int32_t page_shift;        // log2(page_size)
  int32_t cache_elem_bytes;  // 2 for bf16, 1 for FP8
  float inv_q_scale;         // 1 / q_scale, and the per-tensor k/v inverses
  float inv_k_scale;
  float inv_v_scale;
};

// kFromCache: cos/sin from the cache (true) or computed by sincos (false).
template <bool kFromCache>
__global__ void __launch_bounds__(kThreads, min_blocks_per_sm(kFromCache))
    rope_quant_append_row_items_kernel(const FusedArgs args) {
  __shared__ float smem_inv_freq[kMaxRopePairs];
  if constexpr (!kFromCache) stage_inv_freq(args.angles, smem_inv_freq);
  const RopeQuantAppendParams& p = args.p;
  const LaneGroup g = make_lane_group(p.head_dim);
  const int32_t heads = p.num_q_heads + 2 * p.num_kv_heads;
  const int32_t item = static_cast<int32_t>(blockIdx.x) * (kThreads / g.lanes) +
                       static_cast<int32_t>(threadIdx.x) / g.lanes;
  if (item >= p.num_tokens * heads) return;  // whole lane groups leave together
  const int32_t t = item / heads;
  const int32_t h = item - t * heads;

  // Which row: q head h, k head h - Hq, or v head h - Hq - Hkv (uniform per lane group).
  const bool is_q = h < p.num_q_heads;
  const bool is_k = !is_q && h < p.num_q_heads + p.num_kv_heads;
  const int32_t kv_head =
      is_q ? 0 : (is_k ? h - p.num_q_heads : h - p.num_q_heads - p.num_kv_heads);
  const uint16_t* src = is_q ? p.q + t * p.q_row_stride + static_cast<int64_t>(h) * p.head_dim
                        : is_k
                            ? p.k + t * p.k_row_stride + static_cast<int64_t>(kv_head) * p.head_dim
                            : p.v + t * p.v_row_stride + static_cast<int64_t>(kv_head) * p.head_dim;
  // Issue the row load before the (dependent) slot and position checks.
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(src) + g.lane);
  const int64_t slot = __ldg(p.slot_mapping + t);
  const int32_t pos = __ldg(p.positions + t);
  if (slot < 0 || slot >= args.cache_slots) return;  // padding: nothing of it is written
  if (pos < 0 || (p.cos_sin_cache != nullptr && pos >= p.cos_sin_cache_positions)) return;

  float x[8];
  unpack_bf16x8(raw, x);
  if (!is_q && !is_k) {
    const float scale = p.v_scale.at(kv_head);
    const float inv_scale = p.v_scale.per_head ? 1.0f / scale : args.inv_v_scale;
    const int64_t offset = p.kv.offset(slot >> args.page_shift, slot & ((1 << args.page_shift) - 1),
                                       kv_head, 8 * g.lane);
    store_x8(static_cast<uint8_t*>(p.v_cache) + offset * args.cache_elem_bytes, p.kv.dtype, x,
             scale, inv_scale);
    return;
  }
  if (p.q_norm_weight != nullptr) {
    rms_norm_x8(x, g, p.head_dim, is_q ? p.q_norm_weight : p.k_norm_weight, p.norm_eps);
  }
  rope_x8<kFromCache>(x, g, args.angles, smem_inv_freq, pos);
  if (is_q) {
    const int64_t elem = (static_cast<int64_t>(t) * p.num_q_heads + h) * p.head_dim + 8 * g.lane;
    if (t < p.q_bf16_rows) {
      *reinterpret_cast<uint4*>(p.q_out_bf16 + elem) = pack_bf16x8(x);
    } else {
      *reinterpret_cast<uint2*>(p.q_out_fp8 + elem) =
          pack_fp8x8(x, p.q_scale, args.inv_q_scale,
                     p.q_fp8_dtype == DType::kFP8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2);
    }
    return;
  }
  const float scale = p.k_scale.at(kv_head);
  const float inv_scale = p.k_scale.per_head ? 1.0f / scale : args.inv_k_scale;
  const int64_t offset = p.kv.offset(slot >> args.page_shift, slot & ((1 << args.page_shift) - 1),
                                     kv_head, 8 * g.lane);
  store_x8(static_cast<uint8_t*>(p.k_cache) + offset * args.cache_elem_bytes, p.kv.dtype, x, scale,
           inv_scale);
}

}  // namespace

void launch_rope_quant_append_row_items(const RopeQuantAppendParams& p, cudaStream_t stream) {
  FusedArgs args;
  args.p = p;
  args.angles = make_rope_angles(p.rope, p.cos_sin_cache, p.cos_sin_cache_positions);
  args.cache_slots = static_cast<int64_t>(p.kv.num_pages) * p.kv.page_size;
  args.page_shift = std::countr_zero(static_cast<uint32_t>(p.kv.page_size));  // a power of two
  args.cache_elem_bytes = p.kv.dtype == DType::kBF16 ? 2 : 1;
  args.inv_q_scale = 1.0f / p.q_scale;
  args.inv_k_scale = 1.0f / p.k_scale.per_tensor;
  args.inv_v_scale = 1.0f / p.v_scale.per_tensor;
  const int64_t items = static_cast<int64_t>(p.num_tokens) * (p.num_q_heads + 2 * p.num_kv_heads);
  const int64_t items_per_block = kThreads / (p.head_dim / 8);
  const auto blocks = static_cast<unsigned>((items + items_per_block - 1) / items_per_block);
  if (p.cos_sin_cache != nullptr) {
    rope_quant_append_row_items_kernel<true><<<blocks, kThreads, 0, stream>>>(args);
  } else {
    rope_quant_append_row_items_kernel<false><<<blocks, kThreads, 0, stream>>>(args);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess,
                 "rope_quant_append kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
