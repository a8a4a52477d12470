// Fused RoPE + quantize + paged KV append. A warp owns one token and a share of its head rows:
// the token's position, cache slot and the cos/sin of each lane's eight dims are fetched ONCE
// per warp (token_rope_lanes.cuh) and reused for every head; groups of head_dim/8 lanes stream
// the rows (head_row_stream.cuh) with 16-byte loads kept in flight, apply the optional RMSNorm
// and RoPE in registers, and write 8 elements per lane: q as bf16 or FP8, k and v straight into
// their cache slot. Memory-bound: at HBM speed an SM has ~250 instruction slots per lane's 24
// bytes, so everything the host knows (head dim, style, cos/sin source, norm, output dtypes) is
// a template argument and the row loop has no branches and no 64-bit index math; divisions by
// scales are a multiply plus Markstein's correction (scale_divide.h), two FP8 per conversion.
// The Qwen3 RMSNorm is folded into per-lane rotation coefficients (norm_rope_lanes.cuh): per row
// one reduction, one rsqrt and two operations per element, its factor multiplied into 1 / scale.
// Batches smaller than one wave of warps split a token over several warps, which ask L2 for
// their k/v rows (and, from 4 warps per token, their q rows) up front (prefetch_head_rows), so
// the k/v rows do not wait behind the q rows.
// Decode-sized batches (T <= kRowItemsMaxTokens) take the row-item kernel instead
// (rope_quant_append_row_items.cu).
#include "quench/ops/rope_quant_append/rope_quant_append.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "quench/core/cuda_device.h"
#include "quench/core/error.h"
#include "quench/ops/quantize/vec8_convert.cuh"
#include "quench/ops/rope/rope_angles.h"
#include "quench/ops/rope/rope_angles_device.cuh"
#include "quench/ops/rope_quant_append/head_row_stream.cuh"
#include "quench/ops/rope_quant_append/norm_rope_lanes.cuh"
#include "quench/ops/rope_quant_append/rope_quant_append_checks.h"
#include "quench/ops/rope_quant_append/rope_quant_append_row_items.h"
#include "quench/ops/rope_quant_append/token_rope_lanes.cuh"

namespace quench {
namespace {

constexpr int32_t kThreads = 256;
constexpr int32_t kWarpsPerBlock = kThreads / 32;
// 4 blocks of 256 threads per SM: 64 registers per thread, 32 warps to keep loads in flight.
constexpr int32_t kMinBlocksPerSm = 4;

// Split tokens prefetch their q rows from this many warps per token on (see the kernel).
constexpr int32_t kPrefetchQMinWarpsPerToken = 4;

struct FusedArgs {
  RopeQuantAppendParams p;
  RopeAngles angles;
  int64_t cache_slots;      // num_pages * page_size: slots outside [0, cache_slots) are skipped
  int32_t page_shift;       // log2(page_size)
  int32_t warps_per_token;  // S: warp w of token t takes every S-th lane group's rows
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

template <int32_t kHeadDim, bool kNeox>
using NormRope = NormRopeLanes<kHeadDim, kNeox, kThreads>;

// What the row loops rotate with: the rope's cos/sin, or with the norm the folded coefficients.
template <int32_t kHeadDim, bool kNeox, bool kNorm>
using RowMath = std::conditional_t<kNorm, NormRope<kHeadDim, kNeox>, Rope<kHeadDim, kNeox>>;

// Lane slots per thread: the rope's cos/sin, or with the norm the q and k coefficients (which
// overwrite the cos/sin they are made from).
template <bool kNeox, bool kNorm>
constexpr int32_t lane_slots() {
  return kNorm ? NormRopeLanes<64, kNeox, kThreads>::kSlots
               : TokenRopeLanes<64, kNeox, kThreads>::kSlots;
}

__device__ __forceinline__ void scale_x8(float x[8], float factor) {
#pragma unroll
  for (int32_t j = 0; j < 8; ++j)
    x[j] *= factor;
}

// One token's rows of one kind, split between the warps of the token and the groups of a warp:
// rows first, first + step, ... (first = split * kGroups + group, step = S * kGroups).
struct RowShare {
  int32_t first;
  int32_t step;
};

// q rows of token t: norm, rotate, store as bf16 (kOut = kBF16) or fp8(q / q_scale).
template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kOut>
__device__ __forceinline__ void q_rows(const FusedArgs& args, int32_t t, RowShare share,
                                       const RowLane<kHeadDim>& row,
                                       const RowMath<kHeadDim, kNeox, kNorm>& math) {
  const RopeQuantAppendParams& p = args.p;
  const int64_t out_elem = static_cast<int64_t>(t) * p.num_q_heads * kHeadDim + 8 * row.lane;
  uint8_t* out = kOut == DType::kBF16 ? reinterpret_cast<uint8_t*>(p.q_out_bf16 + out_elem)
                                      : p.q_out_fp8 + out_elem;
  auto process = [&](float x[8], int32_t h) {
    // Explicit vector stores: with a plain assignment the compiler splits the bf16 row into four
    // 4-byte stores.
    uint8_t* dst = out + h * (kHeadDim * elem_bytes<kOut>());
    if constexpr (kNorm) {
      const float r = math.apply(x, NormKind::kQ, row.mask, p.norm_eps);
      if constexpr (kOut == DType::kBF16) {
        scale_x8(x, r);
        __stwb(reinterpret_cast<uint4*>(dst), pack_bf16x8(x));
      } else {
        __stwb(reinterpret_cast<uint2*>(dst),
               pack_fp8x8_multiplied(x, r * args.inv_q_scale, fp8_format<kOut>()));
      }
    } else {
      math.rotate(x, row.mask);
      if constexpr (kOut == DType::kBF16) {
        __stwb(reinterpret_cast<uint4*>(dst), pack_bf16x8(x));
      } else {
        __stwb(reinterpret_cast<uint2*>(dst),
               pack_fp8x8(x, p.q_scale, args.inv_q_scale, fp8_format<kOut>()));
      }
    }
  };
  const uint16_t* src = p.q + t * p.q_row_stride + 8 * row.lane;
  stream_head_rows<kHeadDim>(src, share.first, p.num_q_heads, share.step, process);
}

// k (kIsK) or v rows of token t into the cache slot whose head-0 element for this lane is at
// cache_row0 (bytes): k normed and rotated, v as is; fp8(x / scale(h)) or bf16.
template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kCache, bool kIsK>
__device__ __forceinline__ void kv_rows(const FusedArgs& args, int32_t t, RowShare share,
                                        const RowLane<kHeadDim>& row,
                                        const RowMath<kHeadDim, kNeox, kNorm>& math,
                                        uint8_t* cache_row0) {
  const RopeQuantAppendParams& p = args.p;
  const HeadScales& scales = kIsK ? p.k_scale : p.v_scale;
  const float inv_tensor_scale = kIsK ? args.inv_k_scale : args.inv_v_scale;
  const int32_t head_stride_bytes = static_cast<int32_t>(p.kv.head_stride()) * elem_bytes<kCache>();
  auto process = [&](float x[8], int32_t h) {
    uint8_t* dst = cache_row0 + h * head_stride_bytes;
    const float scale = scales.at(h);
    const float inv_scale = scales.per_head ? 1.0f / scale : inv_tensor_scale;
    if constexpr (kIsK && kNorm) {
      const float r = math.apply(x, NormKind::kK, row.mask, p.norm_eps);
      if constexpr (kCache == DType::kBF16) {
        scale_x8(x, r);
        *reinterpret_cast<uint4*>(dst) = pack_bf16x8(x);
      } else {
        *reinterpret_cast<uint2*>(dst) =
            pack_fp8x8_multiplied(x, r * inv_scale, fp8_format<kCache>());
      }
    } else {
      if constexpr (kIsK) math.rotate(x, row.mask);
      store_x8(dst, kCache, x, scale, inv_scale);
    }
  };
  const uint16_t* src =
      kIsK ? p.k + t * p.k_row_stride + 8 * row.lane : p.v + t * p.v_row_stride + 8 * row.lane;
  stream_head_rows<kHeadDim>(src, share.first, p.num_kv_heads, share.step, process);
}

template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kCache>
__device__ __forceinline__ void k_and_v_rows(const FusedArgs& args, int32_t t, RowShare share,
                                             const RowLane<kHeadDim>& row,
                                             const RowMath<kHeadDim, kNeox, kNorm>& math,
                                             int64_t slot) {
  const RopeQuantAppendParams& p = args.p;
  const int64_t page = slot >> args.page_shift;
  const int64_t in_page = slot & ((int64_t{1} << args.page_shift) - 1);
  const int64_t byte0 = p.kv.offset(page, in_page, 0, 8 * row.lane) * elem_bytes<kCache>();
  kv_rows<kHeadDim, kNeox, kNorm, kCache, true>(args, t, share, row, math,
                                                static_cast<uint8_t*>(p.k_cache) + byte0);
  kv_rows<kHeadDim, kNeox, kNorm, kCache, false>(args, t, share, row, math,
                                                 static_cast<uint8_t*>(p.v_cache) + byte0);
}

template <int32_t kHeadDim, bool kNeox, bool kFromCache, bool kNorm>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    rope_quant_append_kernel(const __grid_constant__ FusedArgs args) {
  __shared__ float smem_inv_freq[kFromCache ? 1 : kMaxRopePairs];
  __shared__ float4 smem_lane_slots[lane_slots<kNeox, kNorm>()][kThreads];
  if constexpr (!kFromCache) stage_inv_freq(args.angles, smem_inv_freq);
  const RopeQuantAppendParams& p = args.p;
  const int32_t warp =
      static_cast<int32_t>(blockIdx.x) * kWarpsPerBlock + static_cast<int32_t>(threadIdx.x) / 32;
  const int32_t t = warp / args.warps_per_token;
  if (t >= p.num_tokens) return;  // whole warps leave together
  const int32_t split = warp - t * args.warps_per_token;
  const int64_t slot = __ldg(p.slot_mapping + t);
  const int32_t pos = __ldg(p.positions + t);
  const RowLane<kHeadDim> row = make_row_lane<kHeadDim>();
  constexpr int32_t kGroups = RowLane<kHeadDim>::kGroups;
  const RowShare share{split * kGroups + row.group, args.warps_per_token * kGroups};
  if (args.warps_per_token > 1) {
    // A split token is a few rows per lane in a single wave: without this, its k and v loads
    // would start only after the slot, the cos/sin and the q rows, one HBM latency each. The q
    // rows too from 4 warps per token on (Hq / 8 rows per lane at head dim 128): the batch's
    // whole input then fits in L2 (Qwen3-32B at 1k tokens: 22 of 50 MB); with 2-3 warps per
    // token it would be most of L2, before any output is written.
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
  if (slot < 0 || slot >= args.cache_slots) return;  // padding: nothing of it is written
  if (pos < 0 || (kFromCache && pos >= args.angles.cache_positions)) return;

  const LaneSlots<kThreads> slots{&smem_lane_slots[0][threadIdx.x]};
  const Rope<kHeadDim, kNeox> rope = make_token_rope_lanes<kHeadDim, kNeox, kFromCache>(
      args.angles, smem_inv_freq, pos, row, slots);
  RowMath<kHeadDim, kNeox, kNorm> math;
  if constexpr (kNorm) {
    math = make_norm_rope_lanes(rope, p.q_norm_weight, p.k_norm_weight, row);
  } else {
    math = rope;
  }

  if (t < p.q_bf16_rows) {
    q_rows<kHeadDim, kNeox, kNorm, DType::kBF16>(args, t, share, row, math);
  } else if (p.q_fp8_dtype == DType::kFP8E4M3) {
    q_rows<kHeadDim, kNeox, kNorm, DType::kFP8E4M3>(args, t, share, row, math);
  } else {
    q_rows<kHeadDim, kNeox, kNorm, DType::kFP8E5M2>(args, t, share, row, math);
  }
  if (p.kv.dtype == DType::kFP8E4M3) {
    k_and_v_rows<kHeadDim, kNeox, kNorm, DType::kFP8E4M3>(args, t, share, row, math, slot);
  } else if (p.kv.dtype == DType::kFP8E5M2) {
    k_and_v_rows<kHeadDim, kNeox, kNorm, DType::kFP8E5M2>(args, t, share, row, math, slot);
  } else {
    k_and_v_rows<kHeadDim, kNeox, kNorm, DType::kBF16>(args, t, share, row, math, slot);
  }
}

// Warps per token: as many as fit in one wave of resident warps (all warps run at once, so no
// partly filled last wave leaves HBM idle), but no more than the q rows can feed (each lane group
// of each warp gets at least one q row). Large batches get one warp per token.
int32_t choose_warps_per_token(const RopeQuantAppendParams& p, int32_t groups_per_warp,
                               int32_t num_sms) {
  const int64_t resident_warps = static_cast<int64_t>(num_sms) * kMinBlocksPerSm * kWarpsPerBlock;
  const int32_t max_split = std::max(1, (p.num_q_heads + groups_per_warp - 1) / groups_per_warp);
  return static_cast<int32_t>(std::clamp<int64_t>(resident_warps / p.num_tokens, 1, max_split));
}

template <int32_t kHeadDim, bool kNeox, bool kFromCache>
void launch_for_norm(const FusedArgs& args, unsigned blocks, cudaStream_t stream) {
  if (args.p.q_norm_weight != nullptr) {
    rope_quant_append_kernel<kHeadDim, kNeox, kFromCache, true>
        <<<blocks, kThreads, 0, stream>>>(args);
  } else {
    rope_quant_append_kernel<kHeadDim, kNeox, kFromCache, false>
        <<<blocks, kThreads, 0, stream>>>(args);
  }
}

template <int32_t kHeadDim>
void launch_for_head_dim(const FusedArgs& args, unsigned blocks, cudaStream_t stream) {
  const bool neox = args.p.rope.style == RopeStyle::kNeox;
  const bool from_cache = args.p.cos_sin_cache != nullptr;
  if (neox && from_cache) launch_for_norm<kHeadDim, true, true>(args, blocks, stream);
  if (neox && !from_cache) launch_for_norm<kHeadDim, true, false>(args, blocks, stream);
  if (!neox && from_cache) launch_for_norm<kHeadDim, false, true>(args, blocks, stream);
  if (!neox && !from_cache) launch_for_norm<kHeadDim, false, false>(args, blocks, stream);
}

// Batches up to this many tokens (decode steps) go to the row-item kernel, which spreads even
// one token over Hq + 2 Hkv lane groups: on the H200 it beats this kernel at T <= 64 (Llama-3-8B
// 2.2-2.6 vs 3.0-3.3 us, Qwen3-32B with norm 2.8-3.6 vs 4.0-5.1 us), and loses from T = 1024 on.
constexpr int32_t kRowItemsMaxTokens = 64;

}  // namespace

std::string rope_quant_append_fused_unsupported_reason(const RopeQuantAppendParams& p) {
  if (p.rope.rotary_dim % 16 != 0) {
    return str_cat("rotary_dim ", p.rope.rotary_dim,
                   " is not a multiple of 16 (the GPU kernels keep 8 elements per lane)");
  }
  return {};
}

void rope_quant_append_cuda(const RopeQuantAppendParams& p, cudaStream_t stream) {
  check_rope_quant_append_gpu_params(p);
  const std::string reason = rope_quant_append_fused_unsupported_reason(p);
  QUENCH_REQUIRE(reason.empty(), "fused rope_quant_append: ", reason);
  if (p.num_tokens == 0) return;
  if (p.num_tokens <= kRowItemsMaxTokens) {
    launch_rope_quant_append_row_items(p, stream);
    return;
  }
  const int32_t num_sms = require_current_cuda_device_properties("rope_quant_append").sm_count;
  FusedArgs args;
  args.p = p;
  args.angles = make_rope_angles(p.rope, p.cos_sin_cache, p.cos_sin_cache_positions);
  args.cache_slots = static_cast<int64_t>(p.kv.num_pages) * p.kv.page_size;
  args.page_shift = std::countr_zero(static_cast<uint32_t>(p.kv.page_size));  // a power of two
  args.warps_per_token = choose_warps_per_token(p, 32 / (p.head_dim / 8), num_sms);
  args.inv_q_scale = 1.0f / p.q_scale;
  args.inv_k_scale = 1.0f / p.k_scale.per_tensor;
  args.inv_v_scale = 1.0f / p.v_scale.per_tensor;
  const int64_t warps = static_cast<int64_t>(p.num_tokens) * args.warps_per_token;
  const auto blocks = static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (p.head_dim == 64) launch_for_head_dim<64>(args, blocks, stream);
  if (p.head_dim == 128) launch_for_head_dim<128>(args, blocks, stream);
  if (p.head_dim == 256) launch_for_head_dim<256>(args, blocks, stream);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess,
                 "rope_quant_append kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
