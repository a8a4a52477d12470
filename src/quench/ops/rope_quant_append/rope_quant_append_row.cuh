// One head row of the fused RoPE + quantize + paged KV append, shared by its kernels (the
// register-streaming kernel and the sm_90 bulk-copy kernel): the kernel arguments and the
// norm -> RoPE -> round-and-store step of one row held by a lane group, so every path does the
// same arithmetic as the CPU reference.
#pragma once

#include <cstdint>

#include "quench/ops/quantize/vec8_convert.cuh"
#include "quench/ops/rope/rope_angles.h"
#include "quench/ops/rope/rope_head_row.cuh"
#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

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

// Quantizes x to the cache dtype and stores the lane's 8 elements of kv head kv_head at slot.
__device__ __forceinline__ void store_to_cache(const FusedArgs& args, const LaneGroup& g,
                                               void* cache, const HeadScales& scales,
                                               float inv_per_tensor, int32_t kv_head, int64_t slot,
                                               const float x[8]) {
  const float scale = scales.at(kv_head);
  const float inv_scale = scales.per_head ? 1.0f / scale : inv_per_tensor;
  const int64_t offset = args.p.kv.offset(slot >> args.page_shift,
                                          slot & ((1 << args.page_shift) - 1), kv_head, 8 * g.lane);
  store_x8(static_cast<uint8_t*>(cache) + offset * args.cache_elem_bytes, args.p.kv.dtype, x, scale,
           inv_scale);
}

// Norm (kQkNorm), RoPE and store of head h of token t, whose lane bits are in raw (uniform per
// group).
template <bool kQkNorm>
__device__ __forceinline__ void finish_row(const FusedArgs& args, const LaneGroup& g, int32_t t,
                                           int32_t h, int64_t slot, const uint4& raw,
                                           const RopeLaneAngles& angles, const uint4& q_norm_bits,
                                           const uint4& k_norm_bits) {
  const RopeQuantAppendParams& p = args.p;
  float x[8];
  unpack_bf16x8(raw, x);
  const bool is_q = h < p.num_q_heads;
  const bool is_k = !is_q && h < p.num_q_heads + p.num_kv_heads;
  if (!is_q && !is_k) {
    store_to_cache(args, g, p.v_cache, p.v_scale, args.inv_v_scale,
                   h - p.num_q_heads - p.num_kv_heads, slot, x);
    return;
  }
  if constexpr (kQkNorm) {
    // Selected word by word: a select of the two uint4 objects would put them in local memory.
    const uint4 weight_bits =
        make_uint4(is_q ? q_norm_bits.x : k_norm_bits.x, is_q ? q_norm_bits.y : k_norm_bits.y,
                   is_q ? q_norm_bits.z : k_norm_bits.z, is_q ? q_norm_bits.w : k_norm_bits.w);
    rms_norm_x8(x, g, p.head_dim, weight_bits, p.norm_eps);
  }
  rope_x8(x, g, args.angles, angles);
  if (is_k) {
    store_to_cache(args, g, p.k_cache, p.k_scale, args.inv_k_scale, h - p.num_q_heads, slot, x);
    return;
  }
  const int64_t elem = (static_cast<int64_t>(t) * p.num_q_heads + h) * p.head_dim + 8 * g.lane;
  if (t < p.q_bf16_rows) {
    *reinterpret_cast<uint4*>(p.q_out_bf16 + elem) = pack_bf16x8(x);
  } else {
    *reinterpret_cast<uint2*>(p.q_out_fp8 + elem) =
        pack_fp8x8(x, p.q_scale, args.inv_q_scale,
                   p.q_fp8_dtype == DType::kFP8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2);
  }
}

}  // namespace quench
