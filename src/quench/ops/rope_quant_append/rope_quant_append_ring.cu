// The ring schedule of the fused RoPE + quantize + paged KV append kernel (FusedRowSchedule::
// kRing). Same work split and arithmetic as the per-kind schedule (rope_quant_append.cu, shared
// through fused_row_ops.cuh), different load schedule: a lane group walks its token's q rows, k
// rows and v rows as ONE sequence, with ring_depth() 16-byte rows per lane in flight through
// cp.async into a per-thread ring in shared memory (no registers held by loads in flight, so the
// ring is deeper than the per-kind schedule's 3 register loads, and rotating it costs no moves):
//  - the token's slot and position are read first, then its cos/sin (and norm weight) loads
//    leave, then all of its first row loads, and only then does the warp wait for the cos/sin
//    (FusedSetupOrder::kSetupFirst): in a one-wave batch every warp issues its rows at once, and
//    loads issued behind them waited for most of the batch's reads (at Llama T = 1024 23% of the
//    stall samples were on the slot and cos/sin, and no row was processed or stored before
//    nearly all had been read). kRowsFirst, the order before, issues the rows first, and
//    kAuto (the default) takes it for grids of more than one wave, whose warps start staggered,
//    and at one warp per token, whose rows are enough to cover the setup loads;
//  - the k rows load while the last q rows are processed and the v rows during the last k rows:
//    the per-kind schedule drained its loads at each kind boundary and waited a full latency
//    twice more per token;
//  - every lane group of the warp runs the same iterations (a group past its last row of a kind
//    reloads that kind's last row and stores nothing), so shuffles use the full-warp mask: no
//    convergence checks per row.
#include "quench/ops/rope_quant_append/rope_quant_append_ring.h"

#include <cstdint>
#include <type_traits>

#include "quench/core/error.h"
#include "quench/ops/attention/prefill/prefill_launch.h"
#include "quench/ops/rope_quant_append/fused_row_ops.cuh"

namespace quench::fused_rope_append {
namespace {

// Rows each lane keeps in flight: as deep as 4 blocks per SM leave room for in shared memory
// (with the norm the lane slots take 32 KB per block).
template <bool kNorm>
constexpr int32_t ring_depth() {
  return kNorm ? 5 : 6;
}

template <bool kNorm>
constexpr int32_t ring_bytes() {
  return ring_depth<kNorm>() * kThreads * 16;
}

// The rows one lane group of one warp handles for its token, in order: heads first, first + step,
// ... of q, then the same of k, then of v. The iteration counts per kind are the most any group
// of the warp has (group 0's), so they are the same across the warp, and q_iters >= 1 (the host
// never splits a token over more warps than its q rows can feed).
template <int32_t kHeadDim>
struct TokenRowSequence {
  const uint16_t* q;  // this lane's first element of head 0, per kind
  const uint16_t* k;
  const uint16_t* v;
  int32_t first;
  int32_t step;
  int32_t num_q_heads;
  int32_t num_kv_heads;
  int32_t q_iters;
  int32_t kv_iters;
};

// Iterations a warp needs for `count` rows when its groups start at first0, first0 + 1, ... and
// step by `step` (group 0 has the most).
__device__ __forceinline__ int32_t warp_iterations(int32_t count, int32_t first0, int32_t step) {
  return count > first0 ? (count - first0 + step - 1) / step : 0;
}

template <int32_t kHeadDim>
__device__ __forceinline__ TokenRowSequence<kHeadDim> make_token_row_sequence(
    const RopeQuantAppendParams& p, int32_t t, int32_t split, int32_t warps_per_token,
    const RowLane<kHeadDim>& row) {
  constexpr int32_t kGroups = RowLane<kHeadDim>::kGroups;
  TokenRowSequence<kHeadDim> s;
  const int32_t elem = 8 * row.lane;
  s.q = p.q + t * p.q_row_stride + elem;
  s.k = p.k + t * p.k_row_stride + elem;
  s.v = p.v + t * p.v_row_stride + elem;
  s.first = split * kGroups + row.group;
  s.step = warps_per_token * kGroups;
  s.num_q_heads = p.num_q_heads;
  s.num_kv_heads = p.num_kv_heads;
  s.q_iters = warp_iterations(p.num_q_heads, split * kGroups, s.step);
  s.kv_iters = warp_iterations(p.num_kv_heads, split * kGroups, s.step);
  return s;
}

// The row that the ring loads next: walks q, k, v iterations in order.
template <int32_t kHeadDim>
struct RowLoadCursor {
  const uint16_t* base;  // the current kind's head-0 element for this lane
  int32_t count;         // the current kind's heads
  int32_t iters;         // the current kind's iterations
  int32_t i;             // iteration within the kind
  int32_t kind;          // 0: q, 1: k, 2: v

  __device__ __forceinline__ static RowLoadCursor start(const TokenRowSequence<kHeadDim>& s) {
    return {s.q, s.num_q_heads, s.q_iters, 0, 0};
  }

  // The current row; past its kind's last head a group loads that last head.
  __device__ __forceinline__ const uint16_t* address(const TokenRowSequence<kHeadDim>& s) const {
    return base + min(s.first + i * s.step, count - 1) * kHeadDim;
  }

  // Past the last iteration of a kind, on to the next kind (k after q, v after k; the caller
  // stops asking once every row is loaded). Updated in place: a fresh cursor in the rare branch
  // makes the compiler copy every field on every iteration.
  __device__ __forceinline__ void advance(const TokenRowSequence<kHeadDim>& s) {
    if (++i == iters) {
      i = 0;
      if (kind == 0) {
        base = s.k;
        count = s.num_kv_heads;
        iters = s.kv_iters;
      } else {
        base = s.v;
      }
      ++kind;
    }
  }
};

// A lane's ring of ring_depth() 16-byte rows in shared memory (column threadIdx.x of a
// [depth][kThreads] array), filled by cp.async: only the owning thread touches its column, and
// cp.async.wait_group makes a thread's own copies visible to it, so no barrier is needed. One
// commit group per slot fill, empty once every row is loaded, so that "all but the newest
// kDepth - 1 groups complete" always means "the oldest row has landed" and no copy is left in
// flight when the thread finishes.
template <int32_t kHeadDim, bool kNorm>
struct RowRing {
  static constexpr int32_t kDepth = ring_depth<kNorm>();
  static constexpr uint32_t kSlotBytes = kThreads * 16;
  uint32_t column;   // shared-window address of slot 0 of this thread
  uint32_t at;       // byte offset of the oldest row's slot
  int32_t unissued;  // rows of the sequence not yet loaded (warp-uniform)
  RowLoadCursor<kHeadDim> cursor;

  // Issues the loads of the first kDepth rows (fewer if the sequence is shorter).
  __device__ __forceinline__ void start(uint32_t column_address,
                                        const TokenRowSequence<kHeadDim>& s) {
    column = column_address;
    at = 0;
    unissued = s.q_iters + 2 * s.kv_iters;
    cursor = RowLoadCursor<kHeadDim>::start(s);
#pragma unroll
    for (int32_t u = 0; u < kDepth; ++u)
      fill(column + static_cast<uint32_t>(u) * kSlotBytes, s);
  }

  // Takes the oldest row (waiting for it) as floats and refills its slot with the next row.
  __device__ __forceinline__ void pop(const TokenRowSequence<kHeadDim>& s, float x[8]) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kDepth - 1) : "memory");
    uint4 raw;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
                 : "r"(column + at)
                 : "memory");
    unpack_bf16x8(raw, x);
    fill(column + at, s);
    at = at + kSlotBytes == kDepth * kSlotBytes ? 0u : at + kSlotBytes;
  }

  // Waits for the copies still in flight (a padding token leaves after start()).
  __device__ __forceinline__ static void drain() {
    asm volatile("cp.async.wait_all;" ::: "memory");
  }

 private:
  // The next row into slot dst (16-byte cp.async, L2 only: the rows are read once), if any is
  // left, then a commit group either way.
  __device__ __forceinline__ void fill(uint32_t dst, const TokenRowSequence<kHeadDim>& s) {
    if (unissued > 0) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(cursor.address(s))
                   : "memory");
      cursor.advance(s);
      --unissued;
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
};

// Processes the token's q rows from the ring (already started), to bf16 (kOut = kBF16) or fp8.
template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kOut>
__device__ __forceinline__ void ring_q_rows(const FusedArgs& args, int32_t t,
                                            const TokenRowSequence<kHeadDim>& seq,
                                            const RowLane<kHeadDim>& row,
                                            const RowMath<kHeadDim, kNeox, kNorm>& math,
                                            RowRing<kHeadDim, kNorm>& ring) {
  const RopeQuantAppendParams& p = args.p;
  const int64_t q_elem0 = static_cast<int64_t>(t) * p.num_q_heads * kHeadDim + 8 * row.lane;
  uint8_t* q_out = kOut == DType::kBF16 ? reinterpret_cast<uint8_t*>(p.q_out_bf16 + q_elem0)
                                        : p.q_out_fp8 + q_elem0;
  constexpr int32_t kQRowBytes = kHeadDim * elem_bytes<kOut>();
#pragma unroll 1
  for (int32_t i = 0; i < seq.q_iters; ++i) {
    float x[8];
    ring.pop(seq, x);
    const int32_t h = seq.first + i * seq.step;
    q_row_out<kHeadDim, kNeox, kNorm, kOut>(
        args, math, row, x, q_out + min(h, p.num_q_heads - 1) * kQRowBytes, h < p.num_q_heads);
  }
}

// Then its k and v rows into the cache slot as kCache. A separate dispatch from the q rows' (not
// one function per (q, cache) dtype pair): the k/v loops exist once per cache dtype, so warps
// with bf16 and with FP8 q rows run the same k/v code (a kernel this short runs its code cold
// from the instruction cache on every SM).
template <int32_t kHeadDim, bool kNeox, bool kNorm, DType kCache>
__device__ __forceinline__ void ring_kv_rows(const FusedArgs& args,
                                             const TokenRowSequence<kHeadDim>& seq,
                                             const RowLane<kHeadDim>& row,
                                             const RowMath<kHeadDim, kNeox, kNorm>& math,
                                             int64_t slot, RowRing<kHeadDim, kNorm>& ring) {
  const RopeQuantAppendParams& p = args.p;
  const int64_t cache0 = cache_row0_bytes<kCache>(args, slot, row);
  const int32_t head_stride_bytes = static_cast<int32_t>(p.kv.head_stride()) * elem_bytes<kCache>();
  // The k rows, then the v rows: is_k picks the scale (k_scale or v_scale) of kv_row_out.
  const auto append_kv_rows = [&](auto is_k, void* cache) {
    uint8_t* out = static_cast<uint8_t*>(cache) + cache0;
#pragma unroll 1
    for (int32_t i = 0; i < seq.kv_iters; ++i) {
      float x[8];
      ring.pop(seq, x);
      const int32_t h = seq.first + i * seq.step;
      const int32_t head = min(h, p.num_kv_heads - 1);
      kv_row_out<kHeadDim, kNeox, kNorm, kCache, decltype(is_k)::value>(
          args, math, row, x, head, out + head * head_stride_bytes, h < p.num_kv_heads);
    }
  };
  append_kv_rows(std::true_type{}, p.k_cache);
  append_kv_rows(std::false_type{}, p.v_cache);
}

// Dynamic shared memory: the row ring, ring_bytes<kNorm>() (the static lane slots and the ring
// together exceed the 48 KB of static shared memory a block may declare).
template <int32_t kHeadDim, bool kNeox, bool kFromCache, bool kNorm>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    rope_quant_append_ring_kernel(const __grid_constant__ FusedArgs args) {
  __shared__ float smem_inv_freq[kFromCache ? 1 : kMaxRopePairs];
  __shared__ float4 smem_lane_slots[lane_slots<kNeox, kNorm>()][kThreads];
  extern __shared__ uint4 smem_ring[];  // [ring_depth<kNorm>()][kThreads]
  if constexpr (!kFromCache) stage_inv_freq(args.angles, smem_inv_freq);
  const RopeQuantAppendParams& p = args.p;
  const int32_t warp =
      static_cast<int32_t>(blockIdx.x) * kWarpsPerBlock + static_cast<int32_t>(threadIdx.x) / 32;
  const int32_t t = warp / args.warps_per_token;
  if (t >= p.num_tokens) return;  // whole warps leave together
  const int32_t split = warp - t * args.warps_per_token;
  RowLane<kHeadDim> row = make_row_lane<kHeadDim>();
  row.mask = 0xffffffffu;  // every lane runs every iteration (see the file comment)
  const TokenRowSequence<kHeadDim> seq =
      make_token_row_sequence<kHeadDim>(p, t, split, args.warps_per_token, row);
  const uint32_t ring_column =
      static_cast<uint32_t>(__cvta_generic_to_shared(&smem_ring[threadIdx.x]));
  RowRing<kHeadDim, kNorm> ring;
  TokenSetupLoads<kHeadDim, kNeox> setup;
  int64_t slot;
  int32_t pos;
  const auto padding = [&] {
    return slot < 0 || slot >= args.cache_slots || pos < 0 ||
           (kFromCache && pos >= args.angles.cache_positions);
  };
  if (args.setup_first) {
    slot = __ldg(p.slot_mapping + t);
    pos = __ldg(p.positions + t);
    if (padding()) return;  // nothing of it is written, and none of its rows is loaded
    // The cos/sin cache loads leave before the rows (in-kernel sincos has no load, and computing
    // it first would only delay them).
    if constexpr (kFromCache)
      setup = load_token_setup<kHeadDim, kNeox, kFromCache, kNorm>(args, smem_inv_freq, pos, row);
    ring.start(ring_column, seq);
    if (args.prefetch_split && args.warps_per_token > 1) {
      prefetch_token_rows(args, t, RowShare{seq.first, seq.step}, row);
    }
    if constexpr (!kFromCache)
      setup = load_token_setup<kHeadDim, kNeox, kFromCache, kNorm>(args, smem_inv_freq, pos, row);
  } else {
    ring.start(ring_column, seq);
    if (args.prefetch_split && args.warps_per_token > 1) {
      prefetch_token_rows(args, t, RowShare{seq.first, seq.step}, row);
    }
    slot = __ldg(p.slot_mapping + t);
    pos = __ldg(p.positions + t);
    if (padding()) {  // nothing of it is written
      RowRing<kHeadDim, kNorm>::drain();
      return;
    }
    setup = load_token_setup<kHeadDim, kNeox, kFromCache, kNorm>(args, smem_inv_freq, pos, row);
  }

  const auto slots = LaneSlots<kThreads>::at(&smem_lane_slots[0][threadIdx.x]);
  const RowMath<kHeadDim, kNeox, kNorm> math =
      finish_row_math<kHeadDim, kNeox, kNorm>(setup, row, slots);
  if (t < p.q_bf16_rows) {
    ring_q_rows<kHeadDim, kNeox, kNorm, DType::kBF16>(args, t, seq, row, math, ring);
  } else if (p.q_fp8_dtype == DType::kFP8E4M3) {
    ring_q_rows<kHeadDim, kNeox, kNorm, DType::kFP8E4M3>(args, t, seq, row, math, ring);
  } else {
    ring_q_rows<kHeadDim, kNeox, kNorm, DType::kFP8E5M2>(args, t, seq, row, math, ring);
  }
  if (p.kv.dtype == DType::kFP8E4M3) {
    ring_kv_rows<kHeadDim, kNeox, kNorm, DType::kFP8E4M3>(args, seq, row, math, slot, ring);
  } else if (p.kv.dtype == DType::kFP8E5M2) {
    ring_kv_rows<kHeadDim, kNeox, kNorm, DType::kFP8E5M2>(args, seq, row, math, slot, ring);
  } else {
    ring_kv_rows<kHeadDim, kNeox, kNorm, DType::kBF16>(args, seq, row, math, slot, ring);
  }
}

}  // namespace

void launch_ring_schedule(const FusedArgs& args, unsigned blocks, cudaStream_t stream) {
  dispatch_fused_variant(args, [&](auto head_dim, auto neox, auto from_cache, auto norm) {
    const auto kernel = rope_quant_append_ring_kernel<head_dim(), neox(), from_cache(), norm()>;
    constexpr int32_t kRingBytes = ring_bytes<norm()>();
    // Once per kernel (as prefill does): the ring past the 48 KB of a block's static shared
    // memory, and the largest carveout so that 4 blocks fit on an SM.
    static const cudaError_t reserved = prefill_common::reserve_shared_memory(
        reinterpret_cast<const void*>(kernel), kRingBytes, true);
    QUENCH_REQUIRE(reserved == cudaSuccess, "rope_quant_append ring kernel: cannot reserve ",
                   kRingBytes, " bytes of shared memory: ", cudaGetErrorString(reserved));
    kernel<<<blocks, kThreads, kRingBytes, stream>>>(args);
  });
}

}  // namespace quench::fused_rope_append
