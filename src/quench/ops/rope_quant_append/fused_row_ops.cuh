// What both schedules of the fused RoPE/append kernel share (rope_quant_append.cu: one stream of
// row loads per kind; rope_quant_append_ring.cu: one ring over all of a token's rows): the
// launch arguments, the work split of a token, the per-token setup of the rotation (and folded
// RMSNorm) coefficients, and the arithmetic and store of one 16-byte row-lane of q, k or v. One
// copy of the arithmetic keeps both schedules bit-identical.
#pragma once

#include <cstdint>
#include <type_traits>

#include "quench/core/dtype.h"
#include "quench/ops/quantize/vec8_convert.cuh"
#include "quench/ops/rope/rope_angles.h"
#include "quench/ops/rope/rope_angles_device.cuh"
#include "quench/ops/rope_quant_append/head_row_stream.cuh"
#include "quench/ops/rope_quant_append/norm_rope_lanes.cuh"
#include "quench/ops/rope_quant_append/rope_quant_append_params.h"
#include "quench/ops/rope_quant_append/token_rope_lanes.cuh"

namespace quench::fused_rope_append {

inline constexpr int32_t kThreads = 256;
inline constexpr int32_t kWarpsPerBlock = kThreads / 32;
// 4 blocks of 256 threads per SM: 64 registers per thread, 32 warps to keep loads in flight.
inline constexpr int32_t kMinBlocksPerSm = 4;

// Split tokens prefetch their q rows from this many warps per token on (see prefetch_token_rows).
inline constexpr int32_t kPrefetchQMinWarpsPerToken = 4;

struct FusedArgs {
  RopeQuantAppendParams p;
  RopeAngles angles;
  int64_t cache_slots;      // num_pages * page_size: slots outside [0, cache_slots) are skipped
  int32_t page_shift;       // log2(page_size)
  int32_t warps_per_token;  // S: warp w of token t takes every S-th lane group's rows
  bool prefetch_split;      // split tokens (S > 1) ask L2 for their rows up front
  bool setup_first;         // ring: slot/position/cos-sin loads before the row loads
  float inv_q_scale;        // 1 / q_scale, and the per-tensor k/v inverses
  float inv_k_scale;
  float inv_v_scale;
};

template <DType kDType>
constexpr int32_t elem_bytes() {
  return kDType == DType::kBF16 ? 2 : 1;
}

template <DType kDType>
constexpr Fp8Format fp8_format() {
  return kDType == DType::kFP8E5M2 ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
}

template <int32_t kHeadDim, bool kNeox>
using Rope = TokenRopeLanes<kHeadDim, kNeox, kThreads>;

// What the row arithmetic rotates with: the rope's cos/sin, or with the norm the folded
// coefficients.
template <int32_t kHeadDim, bool kNeox, bool kNorm>
using RowMath = std::conditional_t<kNorm, NormRopeLanes<kHeadDim, kNeox, kThreads>,
                                   TokenRopeLanes<kHeadDim, kNeox, kThreads>>;

// Lane slots per thread: the rope's cos/sin, or with the norm the q and k coefficients (which
// overwrite the cos/sin they are made from).
template <bool kNeox, bool kNorm>
constexpr int32_t lane_slots() {
  return kNorm ? NormRopeLanes<64, kNeox, kThreads>::kSlots
               : TokenRopeLanes<64, kNeox, kThreads>::kSlots;
}

// One token's rows of one kind, split between the warps of the token and the groups of a warp:
// rows first, first + step, ... (first = split * kGroups + group, step = S * kGroups).
struct RowShare {
  int32_t first;
  int32_t step;
};

__device__ __forceinline__ void scale_x8(float x[8], float factor) {
#pragma unroll
  for (int32_t j = 0; j < 8; ++j)
    x[j] *= factor;
}

// The global loads of a token's setup, issued but not waited for: its cos/sin (cache row, or
// computed by sincos) and, with the norm, the lane's q and k norm weights.
template <int32_t kHeadDim, bool kNeox>
struct TokenSetupLoads {
  TokenCosSin<kHeadDim, kNeox> cos_sin;
  uint4 q_weight;  // with the norm only
  uint4 k_weight;
};

template <int32_t kHeadDim, bool kNeox, bool kFromCache, bool kNorm>
__device__ __forceinline__ TokenSetupLoads<kHeadDim, kNeox> load_token_setup(
    const FusedArgs& args, const float* smem_inv_freq, int32_t pos, const RowLane<kHeadDim>& row) {
  TokenSetupLoads<kHeadDim, kNeox> l;
  l.cos_sin = load_token_cos_sin<kHeadDim, kNeox, kFromCache>(args.angles, smem_inv_freq, pos, row);
  if constexpr (kNorm) {
    l.q_weight = load_norm_weights(args.p.q_norm_weight, row);
    l.k_weight = load_norm_weights(args.p.k_norm_weight, row);
  }
  return l;
}

// The token's rotation (and with the norm, the folded coefficients) from its setup loads, in the
// lane slots `slots`.
template <int32_t kHeadDim, bool kNeox, bool kNorm>
__device__ __forceinline__ RowMath<kHeadDim, kNeox, kNorm> finish_row_math(
    const TokenSetupLoads<kHeadDim, kNeox>& l, const RowLane<kHeadDim>& row,
    LaneSlots<kThreads> slots) {
  const Rope<kHeadDim, kNeox> rope =
      store_token_rope_lanes<kHeadDim, kNeox, kThreads>(l.cos_sin, slots);
  if constexpr (kNorm) {
    return make_norm_rope_lanes(rope, l.q_weight, l.k_weight, row);
  } else {
    return rope;
  }
}

// Both steps at once.
template <int32_t kHeadDim, bool kNeox, bool kFromCache, bool kNorm>
__device__ __forceinline__ RowMath<kHeadDim, kNeox, kNorm> make_row_math(
    const FusedArgs& args, const float* smem_inv_freq, int32_t pos, const RowLane<kHeadDim>& row,
    LaneSlots<kThreads> slots) {
  return finish_row_math<kHeadDim, kNeox, kNorm>(
      load_token_setup<kHeadDim, kNeox, kFromCache, kNorm>(args, smem_inv_freq, pos, row), row,
      slots);
}

// A split token is a few rows per lane in a single wave: without this, rows processed late
// would start loading only after the ones before them. The q rows too from 4 warps per token on
// (Hq / 8 rows per lane at head dim 128): the batch's whole input then fits in L2 (Qwen3-32B at
// 1k tokens: 22 of 50 MB); with 2-3 warps per token it would be most of L2, before any output is
// written.
template <int32_t kHeadDim>
__device__ __forceinline__ void prefetch_token_rows(const FusedArgs& args, int32_t t,
                                                    RowShare share, const RowLane<kHeadDim>& row) {
  const RopeQuantAppendParams& p = args.p;
  const int32_t elem = 8 * row.lane;
  if (args.warps_per_token >= kPrefetchQMinWarpsPerToken) {
    prefetch_head_rows<kHeadDim>(p.q + t * p.q_row_stride + elem, share.first, p.num_q_heads,
                                 share.step);
  }
  prefetch_head_rows<kHeadDim>(p.k + t * p.k_row_stride + elem, share.first, p.num_kv_heads,
                               share.step);
  prefetch_head_rows<kHeadDim>(p.v + t * p.v_row_stride + elem, share.first, p.num_kv_heads,
                               share.step);
}

// One q row-lane x (eight elements of head row h): norm, rotate, then to dst as bf16 (kOut =
// kBF16) or fp8(q / q_scale); nothing is stored unless `store`. Every lane of the group calls it.
template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kOut>
__device__ __forceinline__ void q_row_out(const FusedArgs& args,
                                          const RowMath<kHeadDim, kNeox, kNorm>& math,
                                          const RowLane<kHeadDim>& row, float x[8], uint8_t* dst,
                                          bool store) {
  // Explicit vector stores: with a plain assignment the compiler splits the bf16 row into four
  // 4-byte stores.
  if constexpr (kNorm) {
    const float r = math.apply(x, NormKind::kQ, row.mask, args.p.norm_eps);
    if constexpr (kOut == DType::kBF16) {
      scale_x8(x, r);
      const uint4 packed = pack_bf16x8(x);
      if (store) __stwb(reinterpret_cast<uint4*>(dst), packed);
    } else {
      const uint2 packed = pack_fp8x8_multiplied(x, r * args.inv_q_scale, fp8_format<kOut>());
      if (store) __stwb(reinterpret_cast<uint2*>(dst), packed);
    }
  } else {
    math.rotate(x, row.mask);
    if constexpr (kOut == DType::kBF16) {
      const uint4 packed = pack_bf16x8(x);
      if (store) __stwb(reinterpret_cast<uint4*>(dst), packed);
    } else {
      const uint2 packed = pack_fp8x8(x, args.p.q_scale, args.inv_q_scale, fp8_format<kOut>());
      if (store) __stwb(reinterpret_cast<uint2*>(dst), packed);
    }
  }
}

// One k (kIsK: normed and rotated) or v (as is) row-lane x of head h into its cache slot at dst:
// fp8(x / scale(h)), or bf16; nothing is stored unless `store`. Every lane of the group calls it.
template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kCache, bool kIsK>
__device__ __forceinline__ void kv_row_out(const FusedArgs& args,
                                           const RowMath<kHeadDim, kNeox, kNorm>& math,
                                           const RowLane<kHeadDim>& row, float x[8], int32_t h,
                                           uint8_t* dst, bool store) {
  const RopeQuantAppendParams& p = args.p;
  const HeadScales& scales = kIsK ? p.k_scale : p.v_scale;
  const float inv_tensor_scale = kIsK ? args.inv_k_scale : args.inv_v_scale;
  const float scale = scales.at(h);
  const float inv_scale = scales.per_head ? 1.0f / scale : inv_tensor_scale;
  if constexpr (kIsK && kNorm) {
    const float r = math.apply(x, NormKind::kK, row.mask, p.norm_eps);
    if constexpr (kCache == DType::kBF16) {
      scale_x8(x, r);
      const uint4 packed = pack_bf16x8(x);
      if (store) *reinterpret_cast<uint4*>(dst) = packed;
    } else {
      const uint2 packed = pack_fp8x8_multiplied(x, r * inv_scale, fp8_format<kCache>());
      if (store) *reinterpret_cast<uint2*>(dst) = packed;
    }
  } else {
    if constexpr (kIsK) math.rotate(x, row.mask);
    if constexpr (kCache == DType::kBF16) {
      const uint4 packed = pack_bf16x8(x);
      if (store) *reinterpret_cast<uint4*>(dst) = packed;
    } else {
      const uint2 packed = pack_fp8x8(x, scale, inv_scale, fp8_format<kCache>());
      if (store) *reinterpret_cast<uint2*>(dst) = packed;
    }
  }
}

// Byte address of this lane's first element of head 0 of `slot` in a cache of kCache elements.
template <DType kCache, int32_t kHeadDim>
__device__ __forceinline__ int64_t cache_row0_bytes(const FusedArgs& args, int64_t slot,
                                                    const RowLane<kHeadDim>& row) {
  const int64_t page = slot >> args.page_shift;
  const int64_t in_page = slot & ((int64_t{1} << args.page_shift) - 1);
  return args.p.kv.offset(page, in_page, 0, 8 * row.lane) * elem_bytes<kCache>();
}

}  // namespace quench::fused_rope_append

namespace quench::fused_rope_append {

// Calls launch(head_dim, neox, from_cache, norm) with each choice the host knows as a
// std::integral_constant, so that every schedule instantiates its kernel over the same axes.
template <typename Launch>
void dispatch_fused_variant(const FusedArgs& args, Launch&& launch) {
  const RopeQuantAppendParams& p = args.p;
  auto with_norm = [&](auto head_dim, auto neox, auto from_cache) {
    if (p.q_norm_weight != nullptr) {
      launch(head_dim, neox, from_cache, std::true_type{});
    } else {
      launch(head_dim, neox, from_cache, std::false_type{});
    }
  };
  auto with_source = [&](auto head_dim, auto neox) {
    if (p.cos_sin_cache != nullptr) {
      with_norm(head_dim, neox, std::true_type{});
    } else {
      with_norm(head_dim, neox, std::false_type{});
    }
  };
  auto with_style = [&](auto head_dim) {
    if (p.rope.style == RopeStyle::kNeox) {
      with_source(head_dim, std::true_type{});
    } else {
      with_source(head_dim, std::false_type{});
    }
  };
  if (p.head_dim == 64) with_style(std::integral_constant<int32_t, 64>{});
  if (p.head_dim == 128) with_style(std::integral_constant<int32_t, 128>{});
  if (p.head_dim == 256) with_style(std::integral_constant<int32_t, 256>{});
}

}  // namespace quench::fused_rope_append
