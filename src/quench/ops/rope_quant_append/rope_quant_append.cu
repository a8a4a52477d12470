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
// their k/v rows (and, from 4 warps per token, their q rows) up front (prefetch_head_rows) when
// FusedRopeAppendOptions::prefetch_split_tokens asks (off by default: no gain measured).
// Two row schedules (FusedRowSchedule): this file's per-kind one streams q, then k, then v rows,
// each through its own 3-deep stream started after the token setup; the default ring schedule
// (rope_quant_append_ring.cu) walks all of a token's rows as one ring, its token setup loads
// issued before (one-wave grids that split tokens over warps) or after its first row loads. The
// arithmetic of a row is shared (fused_row_ops.cuh). Decode-sized batches (T <= kRowItemsMaxTokens)
// take the row-item kernel instead (rope_quant_append_row_items.cu).
#include "quench/ops/rope_quant_append/rope_quant_append.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include "quench/core/cuda_device.h"
#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/ops/rope_quant_append/fused_row_ops.cuh"
#include "quench/ops/rope_quant_append/rope_quant_append_checks.h"
#include "quench/ops/rope_quant_append/rope_quant_append_ring.h"
#include "quench/ops/rope_quant_append/rope_quant_append_row_items.h"

namespace quench {
namespace {

using namespace fused_rope_append;

// q rows of token t in the per-kind schedule: norm, rotate, store as bf16 or fp8(q / q_scale).
template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kOut>
__device__ __forceinline__ void q_rows(const FusedArgs& args, int32_t t, RowShare share,
                                       const RowLane<kHeadDim>& row,
                                       const RowMath<kHeadDim, kNeox, kNorm>& math) {
  const RopeQuantAppendParams& p = args.p;
  const int64_t out_elem = static_cast<int64_t>(t) * p.num_q_heads * kHeadDim + 8 * row.lane;
  uint8_t* out = kOut == DType::kBF16 ? reinterpret_cast<uint8_t*>(p.q_out_bf16 + out_elem)
                                      : p.q_out_fp8 + out_elem;
  auto process = [&](float x[8], int32_t h) {
    q_row_out<kHeadDim, kNeox, kNorm, kOut>(args, math, row, x,
                                            out + h * (kHeadDim * elem_bytes<kOut>()), true);
  };
  const uint16_t* src = p.q + t * p.q_row_stride + 8 * row.lane;
  stream_head_rows<kHeadDim>(src, share.first, p.num_q_heads, share.step, process);
}

// k (kIsK) or v rows of token t in the per-kind schedule into the cache slot whose head-0
// element for this lane is at cache_row0 (bytes).
template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kCache, bool kIsK>
__device__ __forceinline__ void kv_rows(const FusedArgs& args, int32_t t, RowShare share,
                                        const RowLane<kHeadDim>& row,
                                        const RowMath<kHeadDim, kNeox, kNorm>& math,
                                        uint8_t* cache_row0) {
  const RopeQuantAppendParams& p = args.p;
  const int32_t head_stride_bytes = static_cast<int32_t>(p.kv.head_stride()) * elem_bytes<kCache>();
  auto process = [&](float x[8], int32_t h) {
    kv_row_out<kHeadDim, kNeox, kNorm, kCache, kIsK>(args, math, row, x, h,
                                                     cache_row0 + h * head_stride_bytes, true);
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
  const int64_t byte0 = cache_row0_bytes<kCache>(args, slot, row);
  kv_rows<kHeadDim, kNeox, kNorm, kCache, true>(args, t, share, row, math,
                                                static_cast<uint8_t*>(p.k_cache) + byte0);
  kv_rows<kHeadDim, kNeox, kNorm, kCache, false>(args, t, share, row, math,
                                                 static_cast<uint8_t*>(p.v_cache) + byte0);
}

// The per-kind schedule (FusedRowSchedule::kPerKind).
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
  if (args.prefetch_split && args.warps_per_token > 1) prefetch_token_rows(args, t, share, row);
  if (slot < 0 || slot >= args.cache_slots) return;  // padding: nothing of it is written
  if (pos < 0 || (kFromCache && pos >= args.angles.cache_positions)) return;

  const auto slots = LaneSlots<kThreads>::at(&smem_lane_slots[0][threadIdx.x]);
  const RowMath<kHeadDim, kNeox, kNorm> math =
      make_row_math<kHeadDim, kNeox, kFromCache, kNorm>(args, smem_inv_freq, pos, row, slots);

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
int64_t resident_warps(int32_t num_sms) {
  return static_cast<int64_t>(num_sms) * kMinBlocksPerSm * kWarpsPerBlock;
}

int32_t choose_warps_per_token(const RopeQuantAppendParams& p, int32_t groups_per_warp,
                               int32_t num_sms) {
  const int32_t max_split = std::max(1, (p.num_q_heads + groups_per_warp - 1) / groups_per_warp);
  return static_cast<int32_t>(
      std::clamp<int64_t>(resident_warps(num_sms) / p.num_tokens, 1, max_split));
}

void launch_per_kind_schedule(const FusedArgs& args, unsigned blocks, cudaStream_t stream) {
  dispatch_fused_variant(args, [&](auto head_dim, auto neox, auto from_cache, auto norm) {
    rope_quant_append_kernel<head_dim(), neox(), from_cache(), norm()>
        <<<blocks, kThreads, 0, stream>>>(args);
  });
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

const char* fused_row_schedule_name(FusedRowSchedule schedule) {
  return schedule == FusedRowSchedule::kRing ? "ring" : "per_kind";
}

const char* fused_setup_order_name(FusedSetupOrder order) {
  switch (order) {
    case FusedSetupOrder::kAuto:
      return "auto";
    case FusedSetupOrder::kSetupFirst:
      return "first";
    case FusedSetupOrder::kRowsFirst:
      return "rows";
  }
  return "?";
}

FusedRopeAppendOptions fused_rope_append_options_from_env() {
  static const FusedRopeAppendOptions options = [] {
    FusedRopeAppendOptions o;
    if (env_switch("QUENCH_ROPE_APPEND_SCHEDULE", {"ring", "per_kind"}) == "per_kind") {
      o.schedule = FusedRowSchedule::kPerKind;
    }
    o.prefetch_split_tokens = env_switch("QUENCH_ROPE_APPEND_PREFETCH", {"0", "1"}) == "1";
    const std::string setup = env_switch("QUENCH_ROPE_APPEND_SETUP", {"auto", "first", "rows"});
    if (setup == "first") o.setup_order = FusedSetupOrder::kSetupFirst;
    if (setup == "rows") o.setup_order = FusedSetupOrder::kRowsFirst;
    return o;
  }();
  return options;
}

void rope_quant_append_cuda(const RopeQuantAppendParams& p, cudaStream_t stream) {
  rope_quant_append_cuda(p, fused_rope_append_options_from_env(), stream);
}

void rope_quant_append_cuda(const RopeQuantAppendParams& p, const FusedRopeAppendOptions& options,
                            cudaStream_t stream) {
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
  args.prefetch_split = options.prefetch_split_tokens;
  args.inv_q_scale = 1.0f / p.q_scale;
  args.inv_k_scale = 1.0f / p.k_scale.per_tensor;
  args.inv_v_scale = 1.0f / p.v_scale.per_tensor;
  const int64_t warps = static_cast<int64_t>(p.num_tokens) * args.warps_per_token;
  args.setup_first = options.setup_order == FusedSetupOrder::kSetupFirst ||
                     (options.setup_order == FusedSetupOrder::kAuto && args.warps_per_token > 1 &&
                      warps <= resident_warps(num_sms));
  const auto blocks = static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (options.schedule == FusedRowSchedule::kRing) {
    launch_ring_schedule(args, blocks, stream);
  } else {
    launch_per_kind_schedule(args, blocks, stream);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess,
                 "rope_quant_append kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
