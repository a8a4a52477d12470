// Fused RoPE + quantize + paged KV append. A group of head_dim/8 lanes holds one head row in
// registers (one 16-byte load per lane per row) and writes 8 elements per lane: the q row as bf16
// or FP8, k and v straight into their cache slot. Work item = kRows consecutive heads of one
// token (heads numbered q, then k, then v), items numbered token-major.
// Large batches on sm_90 take the bulk-copy kernel (rope_quant_append_bulk.cu) unless one token
// is too wide for its shared-memory ring; elsewhere, and for those, the register path here:
// 4-head items, one wave of lane groups, each streaming a contiguous range of
// items as a two-stage pipeline: the next item's rows (and, at a token boundary, its position and
// slot) are loaded before the current item is finished, so a lane always has 64 bytes in flight
// instead of loading, waiting, computing and retiring (bytes in flight, not occupancy, keeps HBM
// busy). A token's cos/sin are loaded once per group and kept for its later items, so the
// dependent position -> cos/sin load is paid once per token boundary, not per item.
// Small batches (rows <= what one wave holds): one head per group, so the serial per-lane work
// (norm reduction, RoPE shuffles, quantization) is one row long and the whole batch runs at once.
// Memory-bound, so the ALU work is kept lean: no divide instruction (a multiply plus Markstein's
// correction, scale_divide.h; per-tensor inverses come from the host), two FP8 conversions per
// instruction.
#include "quench/ops/rope_quant_append/rope_quant_append.h"

#include <cstdint>

#include "quench/core/error.h"
#include "quench/ops/rope_quant_append/rope_quant_append_bulk.h"
#include "quench/ops/rope_quant_append/rope_quant_append_checks.h"
#include "quench/ops/rope_quant_append/rope_quant_append_row.cuh"

namespace quench {
namespace {

constexpr int32_t kThreads = 256;
// Head rows per item of a large batch: a lane streams its items with the next item's rows (64
// bytes) in flight while it finishes the current one. 4 divides the head counts of the common GQA
// shapes (Hq + 2*Hkv = 48 for Llama-3-8B, 80 for Qwen3-32B); a ragged last item just has fewer
// rows.
constexpr int32_t kStreamedItemRows = 4;
// Blocks of 256 threads per SM (the launch bound). One-row items: 3 (up to 85 registers), no
// spills. Streamed 4-row items hold two items' rows (32 registers): at 3 blocks every variant
// spills, at 2 (up to 128 registers) none does, and 512 threads x 64 bytes = 32 KB of row loads
// stay in flight per SM the whole time.
template <int32_t kRows>
constexpr int32_t min_blocks_per_sm() {
  return kRows == 1 ? 3 : 2;
}

// First element of head h (of the q, k, v numbering) of token t: bf16 bits.
__device__ __forceinline__ const uint16_t* head_row(const RopeQuantAppendParams& p, int32_t t,
                                                    int32_t h) {
  if (h < p.num_q_heads) return p.q + t * p.q_row_stride + static_cast<int64_t>(h) * p.head_dim;
  h -= p.num_q_heads;
  if (h < p.num_kv_heads) return p.k + t * p.k_row_stride + static_cast<int64_t>(h) * p.head_dim;
  h -= p.num_kv_heads;
  return p.v + t * p.v_row_stride + static_cast<int64_t>(h) * p.head_dim;
}

// One work item in flight: the raw bits of kRows consecutive heads of token t (heads numbered q,
// then k, then v) and the token's slot and position.
template <int32_t kRows>
struct ItemInFlight {
  uint4 raw[kRows];
  int32_t t;
  int32_t first_head;
  int64_t slot;
  int32_t pos;
};

// Issues the row loads of the item (t, first_head); rows past the last head are zero.
template <int32_t kRows>
__device__ __forceinline__ void issue_row_loads(const RopeQuantAppendParams& p, const LaneGroup& g,
                                                int32_t heads, ItemInFlight<kRows>& item) {
#pragma unroll
  for (int32_t r = 0; r < kRows; ++r) {
    item.raw[r] =
        item.first_head + r < heads
            ? __ldg(reinterpret_cast<const uint4*>(head_row(p, item.t, item.first_head + r)) +
                    g.lane)
            : make_uint4(0u, 0u, 0u, 0u);
  }
}

// Processes `cur` after issuing the loads of the group's next item (item index next < end) into
// `nxt`, so a lane has the next rows in flight while it rotates, quantizes and stores the current
// ones. The next item's slot and position are loaded only when it starts a new token. The cos/sin
// of a token are loaded on its first rotating item and kept in `angles` for the token's later
// items (angles_token names the token they belong to).
template <bool kFromCache, bool kQkNorm, int32_t kRows>
__device__ __forceinline__ void step(const FusedArgs& args, const LaneGroup& g, int32_t heads,
                                     const float* smem_inv_freq, int32_t next, int32_t end,
                                     const uint4& q_norm_bits, const uint4& k_norm_bits,
                                     const ItemInFlight<kRows>& cur, ItemInFlight<kRows>& nxt,
                                     RopeLaneAngles& angles, int32_t& angles_token) {
  const RopeQuantAppendParams& p = args.p;
  if (next < end) {
    const bool same_token = cur.first_head + kRows < heads;
    nxt.t = same_token ? cur.t : cur.t + 1;
    nxt.first_head = same_token ? cur.first_head + kRows : 0;
    issue_row_loads(p, g, heads, nxt);
    if (same_token) {
      nxt.slot = cur.slot;
      nxt.pos = cur.pos;
    } else {
      nxt.slot = __ldg(p.slot_mapping + nxt.t);
      nxt.pos = __ldg(p.positions + nxt.t);
    }
  }
  // Padding (slot -1 or outside the cache) and positions outside the cos/sin cache: nothing of
  // the token is written.
  if (cur.slot < 0 || cur.slot >= args.cache_slots) return;
  if (cur.pos < 0 || (p.cos_sin_cache != nullptr && cur.pos >= p.cos_sin_cache_positions)) return;
  const bool rotates = cur.first_head < p.num_q_heads + p.num_kv_heads;  // some row is q or k
  if (rotates && angles_token != cur.t) {
    load_rope_lane_angles<kFromCache>(g, args.angles, smem_inv_freq, cur.pos, angles);
    angles_token = cur.t;
  }
#pragma unroll
  for (int32_t r = 0; r < kRows; ++r) {
    if (cur.first_head + r >= heads) break;
    finish_row<kQkNorm>(args, g, cur.t, cur.first_head + r, cur.slot, cur.raw[r], angles,
                        q_norm_bits, k_norm_bits);
  }
}

// kFromCache: cos/sin from the cache (true) or computed by sincos (false). kQkNorm: q and k
// RMSNorm weights given (a template argument so the plain path does not hold their registers).
// kRows: heads per item (1 spreads a small batch over more lanes; 4 amortises the token's loads).
// Each lane group handles the items_per_group consecutive items from group * items_per_group,
// as a two-stage pipeline over two item buffers used in turn (a copy of a buffer whose loads are
// still in flight would wait for them).
template <bool kFromCache, bool kQkNorm, int32_t kRows>
__global__ void __launch_bounds__(kThreads, min_blocks_per_sm<kRows>())
    rope_quant_append_kernel(const FusedArgs args, int32_t items_per_group) {
  __shared__ float smem_inv_freq[kMaxRopePairs];
  if constexpr (!kFromCache) stage_inv_freq(args.angles, smem_inv_freq);
  const RopeQuantAppendParams& p = args.p;
  const LaneGroup g = make_lane_group(p.head_dim);
  const int32_t heads = p.num_q_heads + 2 * p.num_kv_heads;
  const int32_t items_per_token = (heads + kRows - 1) / kRows;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * (kThreads / g.lanes) +
                        static_cast<int32_t>(threadIdx.x) / g.lanes;
  const int64_t num_items = static_cast<int64_t>(p.num_tokens) * items_per_token;
  const int64_t first_item = group * items_per_group;
  if (first_item >= num_items) return;  // whole lane groups leave together
  const auto begin = static_cast<int32_t>(first_item);
  const auto end = static_cast<int32_t>(
      first_item + items_per_group < num_items ? first_item + items_per_group : num_items);

  ItemInFlight<kRows> a, b;
  a.t = begin / items_per_token;
  a.first_head = (begin - a.t * items_per_token) * kRows;
  issue_row_loads(p, g, heads, a);
  a.slot = __ldg(p.slot_mapping + a.t);
  a.pos = __ldg(p.positions + a.t);
  uint4 q_norm_bits = make_uint4(0u, 0u, 0u, 0u);
  uint4 k_norm_bits = make_uint4(0u, 0u, 0u, 0u);
  if constexpr (kQkNorm) {
    q_norm_bits = __ldg(reinterpret_cast<const uint4*>(p.q_norm_weight) + g.lane);
    k_norm_bits = __ldg(reinterpret_cast<const uint4*>(p.k_norm_weight) + g.lane);
  }
  RopeLaneAngles angles;
  int32_t angles_token = -1;
  for (int32_t item = begin; item < end; item += 2) {
    step<kFromCache, kQkNorm>(args, g, heads, smem_inv_freq, item + 1, end, q_norm_bits,
                              k_norm_bits, a, b, angles, angles_token);
    if (item + 1 >= end) break;
    step<kFromCache, kQkNorm>(args, g, heads, smem_inv_freq, item + 2, end, q_norm_bits,
                              k_norm_bits, b, a, angles, angles_token);
  }
}

int32_t log2_exact(int32_t n) {
  int32_t shift = 0;
  while ((1 << shift) < n)
    ++shift;
  return shift;
}

// Streaming multiprocessors of the current device.
int64_t device_sm_count() {
  int device = 0;
  int sm_count = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) {
    status = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  }
  QUENCH_REQUIRE(status == cudaSuccess,
                 "rope_quant_append: SM count query failed: ", cudaGetErrorString(status));
  return sm_count;
}

// Launches the variant of kernel for (from_cache, qk_norm) over `groups` lane groups.
template <int32_t kRows>
void launch_kernel(const FusedArgs& args, bool from_cache, bool qk_norm, int64_t groups,
                   int32_t groups_per_block, int32_t items_per_group, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((groups + groups_per_block - 1) / groups_per_block);
  if (from_cache && qk_norm) {
    rope_quant_append_kernel<true, true, kRows>
        <<<blocks, kThreads, 0, stream>>>(args, items_per_group);
  } else if (from_cache) {
    rope_quant_append_kernel<true, false, kRows>
        <<<blocks, kThreads, 0, stream>>>(args, items_per_group);
  } else if (qk_norm) {
    rope_quant_append_kernel<false, true, kRows>
        <<<blocks, kThreads, 0, stream>>>(args, items_per_group);
  } else {
    rope_quant_append_kernel<false, false, kRows>
        <<<blocks, kThreads, 0, stream>>>(args, items_per_group);
  }
}

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
  FusedArgs args;
  args.p = p;
  args.angles = make_rope_angles(p.rope, p.cos_sin_cache, p.cos_sin_cache_positions);
  args.cache_slots = static_cast<int64_t>(p.kv.num_pages) * p.kv.page_size;
  args.page_shift = log2_exact(p.kv.page_size);
  args.cache_elem_bytes = p.kv.dtype == DType::kBF16 ? 2 : 1;
  args.inv_q_scale = 1.0f / p.q_scale;
  args.inv_k_scale = 1.0f / p.k_scale.per_tensor;
  args.inv_v_scale = 1.0f / p.v_scale.per_tensor;
  const bool from_cache = p.cos_sin_cache != nullptr;
  const bool qk_norm = p.q_norm_weight != nullptr;
  const int32_t heads = p.num_q_heads + 2 * p.num_kv_heads;
  const int64_t rows = static_cast<int64_t>(p.num_tokens) * heads;
  const int32_t groups_per_block = kThreads / (p.head_dim / 8);
  const int64_t sm_count = device_sm_count();
  if (rows <= sm_count * min_blocks_per_sm<1>() * groups_per_block) {
    // A small batch: one head per lane group, so each lane's serial work (norm, RoPE, one store)
    // is a single row and the whole batch runs at once.
    launch_kernel<1>(args, from_cache, qk_norm, rows, groups_per_block, 1, stream);
  } else if (const int32_t chunk_tokens = rope_quant_append_bulk_chunk_tokens(
                 p, rope_quant_append_bulk_kernel_available(), sm_count);
             chunk_tokens > 0) {
    // sm_90: rows through a shared-memory ring fed by bulk copies (rope_quant_append_bulk.cu).
    launch_rope_quant_append_bulk(args, chunk_tokens, sm_count, stream);
  } else {
    // Below sm_90, or tokens too wide for the bulk ring: one wave of resident lane groups, each
    // streaming its share of the items with register-held rows.
    const int64_t resident_groups =
        sm_count * min_blocks_per_sm<kStreamedItemRows>() * groups_per_block;
    const int64_t items =
        static_cast<int64_t>(p.num_tokens) * ((heads + kStreamedItemRows - 1) / kStreamedItemRows);
    const auto items_per_group =
        static_cast<int32_t>((items + resident_groups - 1) / resident_groups);
    const int64_t groups = (items + items_per_group - 1) / items_per_group;
    launch_kernel<kStreamedItemRows>(args, from_cache, qk_norm, groups, groups_per_block,
                                     items_per_group, stream);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess,
                 "rope_quant_append kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
