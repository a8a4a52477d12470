// The decode attention kernel: one CTA per (request, KV head, query-row group, KV split).
//
// Design (memory-bound: every KV byte is read once, by one CTA, for all q heads of its group):
// - The CTA's query rows (group heads x query tokens, up to 16) are the M = 16 dimension of
//   mma.sync m16n8k16 tiles; KV tokens are N for S = Q K^T and K for O = P V.
// - KV tiles of 64 tokens stream through a cp.async pipeline of num_stages shared-memory
//   buffers (16-byte copies, whole pages, zero-filled outside the visible range). Each of the 4
//   warps owns 16 tokens of a tile and keeps its own online-softmax state; the warps are merged
//   once at the end through shared memory.
// - FP8 K/V are widened to f16 in registers (one cvt per pair on sm_89+: fp8_quad_to_mma for K,
//   whose pairs are adjacent bytes; fp8_pair_to_mma after a byte permute for V). A
//   bf16 query row is multiplied by a power of two 2^e that puts its largest |q| in
//   [2^15, 2^16), where every bf16 value down to 2^-29 of the row max is exact in f16; the
//   row's scores are multiplied by 2^-e (q_unscale), so the products are unchanged.
//   K's head dimension is permuted (identically for Q and K, so dot products are unchanged) so
//   that one 16-byte shared load feeds four k-steps; V's token pairs are gathered with prmt.
// - fp32 online softmax in log2 units; k_scale folds into the score scale, v_scale into the
//   epilogue. With one split the epilogue writes bf16/FP8/NVFP4 output (and lse); with several
//   it writes fp32 partials that the work item's last split CTA (args.merge_counters: ItemMerge,
//   decode_item_merge.cuh, all rows at once) or decode_merge_kernel (RowMerge,
//   decode_row_merge.cuh) combines.
// - sm_90 variant (kTma, head_dim 64/128): a fifth warp streams the tiles in by tensor TMA, one
//   box per page, KV head and 128-byte column block (decode_kv_tma_producer.cuh); the compute
//   warps wait on a full mbarrier per stage and release it on an empty one, with no CTA-wide
//   barrier in the tile loop. The compute is the same code over the TMA's swizzled layout.
// - sm_90 with at most kSwappedMaxRows query rows (kSwapped): the tile loop of
//   decode_swapped_tile_loop.cuh instead, with KV tokens as the MMA's M side and the query rows
//   as its N = 8 side (half the MMAs and softmax work of padding 4 or 8 rows to 16); the same
//   stages, combine and epilogue.
#pragma once

#include <cstdint>

#include "quench/core/dependent_launch.cuh"
#include "quench/core/sm90_async.cuh"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fast_math.cuh"
#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_item_merge.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_kv_tma_producer.cuh"
#include "quench/ops/attention/decode/decode_output.cuh"
#include "quench/ops/attention/decode/decode_swapped_tile_loop.cuh"
#include "quench/ops/attention/decode/decode_tile_layout.h"

namespace quench::decode {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
// Block-table lines (32 page ids each) of its split's pages that a CTA prefetches into L2: those
// of its first 64 pages (two lines, three when not line-aligned).
inline constexpr int kPrefetchLines = 3;

// kTma: the sm_90 variant (decode_kv_tma_producer.cuh): a fifth warp fills the stages by tensor
// TMA and mbarriers replace cp.async groups and the per-tile __syncthreads.
// The KV tile layout in shared memory is DecodeTileLayout (decode_tile_layout.h).
template <int kHeadDim, DType kKvDtype, DType kQDtype, bool kTma = false>
struct DecodeTraits : DecodeTileLayout<kHeadDim, kKvDtype == DType::kBF16 ? 2 : 1, kTma> {
  using Layout = DecodeTileLayout<kHeadDim, kKvDtype == DType::kBF16 ? 2 : 1, kTma>;
  using Layout::kKvBytes;
  using Layout::kRowBytes;
  using Layout::kTileKvBytes;
  static constexpr int kCtaThreads = kThreads + (kTma ? 32 : 0);
  static constexpr bool kFp8Kv = kKvDtype != DType::kBF16;
  static constexpr MmaType kMma = kFp8Kv ? MmaType::kF16 : MmaType::kBF16;
  // bf16 query rows are scaled by a power of two into f16 range (see the top of this file).
  static constexpr bool kScaleQ = kQDtype == DType::kBF16 && kMma == MmaType::kF16;
  static constexpr Fp8Kind kFp8 = kKvDtype == DType::kFP8E5M2 ? Fp8Kind::kE5M2 : Fp8Kind::kE4M3;

  static constexpr int kChunksPerRow = kRowBytes / 16;
  static constexpr int kChunksPerThread = kTileTokens * kChunksPerRow / kThreads;
  static constexpr int kStageBytes = 2 * kTileKvBytes;  // K tile then V tile

  static constexpr int kQStride = kHeadDim * 2 + 16;
  static constexpr int kQBytes = kRowsPerCta * kQStride;
  static constexpr int kStatsBytes = 2 * kWarps * kRowsPerCta * 4;  // per-warp row max and sum
  // Block-table entries of the prologue's tiles, read in one parallel round.
  static constexpr int kProloguePagesBytes = kTma ? 0 : (kMaxStages - 1) * (kTileTokens / 16) * 4;
  static constexpr int kQUnscaleBytes = kRowsPerCta * 4;  // per row: 2^-e, multiplies scores
  // TMA kernel: mbarriers full[kMaxStages] then empty[kMaxStages], 8 bytes each.
  static constexpr int kBarrierBytes = kTma ? 2 * kMaxStages * 8 : 0;
  static constexpr int kBarrierOffset =
      kQBytes + kStatsBytes + kQUnscaleBytes + kProloguePagesBytes;
  // The ring starts here; the TMA kernel moves it up to the next 1024-byte shared address (the
  // swizzle atom), kAlignSlack bytes reserved for that.
  static constexpr int kPipeOffset = kBarrierOffset + kBarrierBytes;
  static constexpr int kAlignSlack = kTma ? 1024 - 16 : 0;
  static constexpr int kFixedBytes = kPipeOffset + kAlignSlack;  // all but the ring
  static_assert(kBarrierOffset % 16 == 0, "mbarriers need 8, the pipeline 16-byte alignment");
  static constexpr int kCombineStride = kHeadDim + 4;  // floats
  static constexpr int kCombineBytes = kWarps * kRowsPerCta * kCombineStride * 4;

  static constexpr int kChunkGroups = kHeadDim / 64;  // 16-element K chunks per lane per token
  static constexpr int kKSteps = kHeadDim / 16;
  static constexpr int kONTiles = kHeadDim / 8;
  static constexpr bool kQInRegisters = kHeadDim <= 64;  // wider heads re-read Q from smem
  static_assert(kChunksPerThread >= 1 && kTileTokens * kChunksPerRow % kThreads == 0);
};

// CTAs per SM the register allocation must allow. The kernel is latency-bound (one 16-row MMA
// chain per warp, four warps per CTA), so more warps per SM pay. 128 registers per thread let
// four CTAs (16 warps) share an SM, which shared memory allows when a token row is <= 128 bytes
// (hd128 FP8 with its unpadded rows: 4 CTAs x 3 stages; hd64 bf16); hd128 bf16 fits three CTAs
// (168 registers). Measured on the H200: 3 CTAs x 4 stages for hd128 FP8 is no faster.
template <int kHeadDim, int kKvBytes>
inline constexpr int kMinCtasPerSm = kHeadDim > 128 ? 1 : ((kHeadDim * kKvBytes) <= 128 ? 4 : 3);

// Loads one lane's Q A-fragment words for 16-element chunk group `cg`: rows g and g+8, 8 words
// each (4 k-steps x 2 words).
template <int kQStride>
__device__ __forceinline__ void load_q_chunk(const uint8_t* q_smem, int g, int c, int cg,
                                             uint32_t (&lo)[8], uint32_t (&hi)[8]) {
  const uint4* p0 = reinterpret_cast<const uint4*>(q_smem + g * kQStride + (4 * cg + c) * 32);
  const uint4* p1 = reinterpret_cast<const uint4*>(q_smem + (g + 8) * kQStride + (4 * cg + c) * 32);
  const uint4 a = p0[0], b = p0[1], d = p1[0], e = p1[1];
  lo[0] = a.x, lo[1] = a.y, lo[2] = a.z, lo[3] = a.w, lo[4] = b.x, lo[5] = b.y, lo[6] = b.z,
  lo[7] = b.w;
  hi[0] = d.x, hi[1] = d.y, hi[2] = d.z, hi[3] = d.w, hi[4] = e.x, hi[5] = e.y, hi[6] = e.z,
  hi[7] = e.w;
}

// Rewrites one 16-byte chunk of a bf16 query row (8 values) as f16 values times 2^e, where e is
// shared by the row: its kChunksPerRow chunks are held by that many consecutive lanes (the
// caller's loop gives every lane the same trip count), which agree on the row's max |q| by
// shuffles. e puts the max in [2^15, 2^16): bf16 values there are <= 65280 < f16 max, and
// every value >= 2^-29 of the max is an f16 normal, exact (8-bit significand). An all-zero row
// keeps e = 0. unscale = 2^-e.
template <int kChunksPerRow>
__device__ __forceinline__ void scale_bf16_chunk_to_f16(uint4& v, float& unscale) {
  uint32_t* w = reinterpret_cast<uint32_t*>(&v);
  float lo[4], hi[4];
  float max_abs = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo[i] = __uint_as_float(w[i] << 16);
    hi[i] = __uint_as_float(w[i] & 0xffff0000u);
    max_abs = fmaxf(max_abs, fmaxf(fabsf(lo[i]), fabsf(hi[i])));
  }
#pragma unroll
  for (int offset = 1; offset < kChunksPerRow; offset *= 2)
    max_abs = fmaxf(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, offset));
  int e = 0;
  if (max_abs > 0.0f) {
    const int max_exponent = static_cast<int>((__float_as_uint(max_abs) >> 23) & 0xffu) - 127;
    e = min(max(15 - max_exponent, -126), 126);  // 2^e and 2^-e stay fp32 normals
  }
  const float scale = __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
  unscale = __uint_as_float(static_cast<uint32_t>(127 - e) << 23);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = pack_pair<MmaType::kF16>(lo[i] * scale, hi[i] * scale);
}

// The TMA kernel has 160 threads per CTA: three CTAs (<= 136 registers each) fit an SM where the
// cp.async kernel fits four (hd <= 128 FP8). hd256 has no TMA variant. The swapped-operand loop
// holds half the accumulators: four CTAs (<= 102 registers) where a token row is <= 128 bytes
// (shared memory then fits four CTAs x 3 stages of hd128 FP8).
template <int kHeadDim, int kKvBytes, bool kTma, bool kSwapped>
inline constexpr int kMinCtasPerSmFor = kSwapped ? (kHeadDim* kKvBytes <= 128 ? 4 : 3)
                                                 : (kTma ? 3 : kMinCtasPerSm<kHeadDim, kKvBytes>);

// Syncs the four compute warps: all threads in the cp.async kernel, named barrier 1 (not the
// producer warp) in the TMA kernel.
template <bool kTma>
__device__ __forceinline__ void sync_compute_warps() {
  if constexpr (kTma) {
    sm90_async::named_barrier_sync(1, kThreads);
  } else {
    __syncthreads();
  }
}

// The split merge of one work item's rows by its last split CTA (the kThreads compute threads):
// ItemMerge (decode_item_merge.cuh), all rows at once. Not inlined: its loads in flight then
// stay out of the main kernel's register allocation.
template <int kHeadDim, bool kTma>
__device__ __noinline__ void merge_item_rows(const DecodeKernelArgs& args, int32_t q_begin,
                                             int32_t row0, int32_t group, int32_t head_base,
                                             int32_t num_rows,
                                             typename ItemMerge<kHeadDim>::Scratch& scratch,
                                             int tid) {
  ItemMerge<kHeadDim>::merge(args, q_begin, row0, group, head_base, num_rows, scratch, tid,
                             [] { sync_compute_warps<kTma>(); });
}

// maps: TMA maps of p.k_cache and p.v_cache (make_kv_tensor_maps over p.kv) for the TMA kernel;
// unused (any value) by the cp.async kernel.
// kSwapped (TMA kernel only): the tile loop of decode_swapped_tile_loop.cuh, for launches whose
// CTAs hold at most kSwappedMaxRows query rows (the host guarantees it). kWgmmaQk (kSwapped,
// FP8 KV, bf16 q, head_dim <= 128): that loop's Q K^T on FP8 wgmma (the host runs it on sm_90
// only); its Q terms take kQTermsBytes after the ring.
template <int kHeadDim, DType kKvDtype, DType kQDtype, bool kTma, bool kSwapped = false,
          bool kWgmmaQk = false>
__global__ void __launch_bounds__(
    DecodeTraits<kHeadDim, kKvDtype, kQDtype, kTma>::kCtaThreads,
    kMinCtasPerSmFor<kHeadDim, kKvDtype == DType::kBF16 ? 2 : 1, kTma, kSwapped>)
    decode_attention_kernel(const __grid_constant__ DecodeKernelArgs args,
                            const __grid_constant__ KvTensorMaps maps) {
  using T = DecodeTraits<kHeadDim, kKvDtype, kQDtype, kTma>;
  static_assert(kTma || !kSwapped, "the swapped-operand loop reads the TMA kernel's stages");
  static_assert(!kWgmmaQk || (kSwapped && kQDtype == DType::kBF16),
                "FP8 Q K^T on wgmma is a variant of the swapped loop for a bf16 query");
  constexpr MmaType kMma = T::kMma;
  const AttentionParams& p = args.p;

  const int32_t split = static_cast<int32_t>(args.heads_fastest ? blockIdx.y : blockIdx.x);
  const int32_t kv_head = static_cast<int32_t>(args.heads_fastest ? blockIdx.x : blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;

  extern __shared__ __align__(16) uint8_t smem[];
  // The TMA kernel's swizzle works on shared addresses: its ring starts at a multiple of 1024
  // (the window's alignment is not assumed; everything before the ring keeps constant
  // addresses).
  uint8_t* pipe = smem + T::kPipeOffset;
  if constexpr (kTma) pipe += (1024u - smem_address(pipe) % 1024u) % 1024u;
  const int num_stages = args.num_stages;

  // TMA kernel: full[s] completes when stage s holds its tile (the producer's one arrival + the
  // boxes' bytes), empty[s] when the 4 compute warps are done reading it. They are initialised
  // (and the tensor maps, kernel parameters, prefetched) before the wait below: with
  // programmatic dependent launch this prologue overlaps the end of the previous kernel.
  const uint32_t full_bars = smem_address(smem + T::kBarrierOffset);
  const uint32_t empty_bars = full_bars + 8 * kMaxStages;
  if constexpr (kTma) {
    if (tid == kThreads) {
      for (int s = 0; s < num_stages; ++s) {
        sm90_async::mbarrier_init(full_bars + 8 * s, 1);
        sm90_async::mbarrier_init(empty_bars + 8 * s, kWarps);
      }
      sm90_async::mbarrier_init_fence();
      sm90_async::prefetch_tensor_map(&maps.k);
      sm90_async::prefetch_tensor_map(&maps.v);
    }
  }
  // The first reads after the wait, into L2 meanwhile: this request's metadata and the
  // block-table lines of the split's pages (up to kPrefetchLines lines of 32 entries: the
  // producer's first two page batches), guessed from max_seq_len (exact for requests of that
  // length; a wrong guess costs a few lines of L2). Without a programmatic launch the wait is a
  // no-op, and the lines still arrive while the metadata loads are in flight.
  if (tid < kPrefetchLines) {
    const int32_t request = static_cast<int32_t>(blockIdx.z) / args.row_groups;
    if (tid == 0) {
      prefetch_l2(p.q_offsets + request);
      prefetch_l2(p.seq_lens + request);
    }
    const int32_t tiles = (p.max_seq_len + kTileTokens - 1) / kTileTokens;
    const int32_t split_tiles = (tiles + args.num_splits - 1) / args.num_splits;
    const int32_t page_shift = __ffs(p.kv.page_size) - 1;
    const int32_t first_page = (split * split_tiles * kTileTokens) >> page_shift;
    const int32_t last_page =
        min(((split + 1) * split_tiles * kTileTokens >> page_shift) - 1, p.block_table_stride - 1);
    // Entries first_page + {0, 32, 63}: the lines of the producer's first two batches, aligned
    // to a line or not.
    const int32_t offset = tid == kPrefetchLines - 1 ? 63 : 32 * tid;
    if (tid == 0 || first_page + offset <= last_page) {
      const int32_t page_index = min(first_page + offset, last_page);
      prefetch_l2(p.block_table + static_cast<int64_t>(request) * p.block_table_stride +
                  page_index);
    }
  }
  // Everything below may read what the previous kernel in the stream wrote (q, the metadata, the
  // KV cache) or write what it reads (the workspace, the output).
  wait_for_primary_grid();
  // With arrival counters, or an early merge launch (its CTAs warm their code up, then wait for
  // this grid), the merge kernel (a programmatic dependent) may launch once every CTA of this
  // grid got here, i.e. all of them are resident or done: its CTAs never hold a slot this grid
  // needs. Otherwise dependents launch from the end of the tile loop (below).
  if (args.merge_counters != nullptr || args.early_merge_launch) allow_dependent_launch();

  const int32_t seq = static_cast<int32_t>(blockIdx.z) / args.row_groups;
  const int32_t row0 = static_cast<int32_t>(blockIdx.z) % args.row_groups * kRowsPerCta;
  const int32_t q_begin = p.q_offsets[seq];
  const int32_t q_len = p.q_offsets[seq + 1] - q_begin;
  const int32_t seq_len = p.seq_lens[seq];
  const int32_t group = args.group;
  const int32_t num_rows = min(kRowsPerCta, q_len * group - row0);
  // Rows another CTA owns, or a request without keys (seq_len 0: CUDA-graph padding and the
  // graphs' warm-up steps) in an unsplit launch: nothing to do. Split, such a request's CTAs take
  // the empty-split path below (it has no tiles), so its rows' merge still sees every split
  // count in (a merge kernel on arrival waits for them) and writes zeros.
  if (num_rows <= 0 || (seq_len <= 0 && args.num_splits <= 1)) return;

  // Query row R (of this request and KV head) is query token R / group at absolute position
  // first_pos + R / group, q head kv_head * group + R % group.
  const int32_t first_pos = seq_len - q_len;
  const int32_t qi_first = row0 / group;
  const int32_t qi_last = (row0 + num_rows - 1) / group;
  const bool windowed = p.window_left >= 0;
  const int32_t kv_end = first_pos + qi_last + 1;
  const int32_t kv_begin = windowed ? max(0, first_pos + qi_first - p.window_left) : 0;
  const int32_t tile_begin = kv_begin / kTileTokens;
  const int32_t tile_count = (kv_end + kTileTokens - 1) / kTileTokens - tile_begin;
  const int32_t tiles_per_split = (tile_count + args.num_splits - 1) / args.num_splits;
  const int32_t my_tile0 = tile_begin + split * tiles_per_split;
  const int32_t num_tiles = min(tile_count - split * tiles_per_split, tiles_per_split);

  const int g = lane / 4;  // MMA group id: row g / g+8, token or column g
  const int c = lane % 4;  // MMA thread-in-group

  auto row_token = [&](int r) { return q_begin + (row0 + r) / group; };
  auto row_head = [&](int r) { return kv_head * group + (row0 + r) % group; };

  // In-kernel merge (args.last_split_merges): after the CTA's partials are written, it counts
  // itself in; the last of the work item's num_splits CTAs merges the item's rows. Run by the
  // kThreads compute threads; `scratch` is shared memory that nothing reads any more.
  auto merge_if_last_split = [&](uint8_t* scratch_bytes) {
    using Merge = ItemMerge<kHeadDim>;
    static_assert(sizeof(typename Merge::Scratch) <= T::kCombineBytes,
                  "the merge scratch fits where the combine buffer does");
    auto& scratch = *reinterpret_cast<typename Merge::Scratch*>(scratch_bytes);
    // Fences as in cooperative groups' grid sync: the barrier puts every compute thread's
    // partials before the counting thread's fence, which (cumulative) makes them visible
    // GPU-wide before its count; the last CTA's fence after the count puts the other splits'
    // partials (fenced before their counts) before its reads, which the second barrier hands to
    // every thread. (A fence in every thread cost one MEMBAR.SC.GPU drain per thread.)
    sync_compute_warps<kTma>();
    if (tid == 0) {
      const uint32_t item =
          blockIdx.z * static_cast<uint32_t>(p.kv.num_kv_heads) + static_cast<uint32_t>(kv_head);
      const uint32_t last = static_cast<uint32_t>(args.num_splits - 1);
      __threadfence();
      // atomicInc wraps the last arrival's count back to 0: the counters are zero again for the
      // next launch (and the next CUDA graph replay) without another store.
      scratch.is_last = atomicInc(args.merge_counters + item, last) == last ? 1u : 0u;
      if (scratch.is_last != 0u) __threadfence();
    }
    sync_compute_warps<kTma>();
    if (scratch.is_last == 0u) return;
    merge_item_rows<kHeadDim, kTma>(args, q_begin, row0, group, kv_head * group, num_rows, scratch,
                                    tid);
  };

  // Merge kernel on arrival (args.merge_counters, not args.last_split_merges): after the CTA's
  // partials are written, one arrival per query token of its rows on the (token, KV head)
  // counter that the merge kernel's CTAs of those rows wait for.
  auto count_in_tokens = [&]() {
    // One fence per counting thread, after the barrier (see merge_if_last_split).
    sync_compute_warps<kTma>();
    if (tid <= qi_last - qi_first) {
      __threadfence();
      atomicAdd(args.merge_counters +
                    static_cast<int64_t>(q_begin + qi_first + tid) * p.kv.num_kv_heads + kv_head,
                1u);
    }
  };
  auto finish_split = [&](uint8_t* scratch) {
    if (args.merge_counters == nullptr) return;
    if (args.last_split_merges) {
      merge_if_last_split(scratch);
    } else {
      count_in_tokens();
    }
  };

  if (num_tiles <= 0) {           // an empty split: the merge skips it
    if (tid >= kThreads) return;  // the TMA kernel's producer warp: nothing to load
    if (tid < num_rows) {
      args.partial_lse[(static_cast<int64_t>(split) * p.num_tokens + row_token(tid)) *
                           p.num_q_heads +
                       row_head(tid)] = -INFINITY;
    }
    finish_split(pipe);
    return;
  }

  uint8_t* q_smem = smem;
  float* stat_max = reinterpret_cast<float*>(smem + T::kQBytes);  // [warp][row]
  float* stat_sum = stat_max + kWarps * kRowsPerCta;
  float* q_unscale = reinterpret_cast<float*>(smem + T::kQBytes + T::kStatsBytes);  // [row]
  int32_t* prologue_pages =
      reinterpret_cast<int32_t*>(smem + T::kQBytes + T::kStatsBytes + T::kQUnscaleBytes);
  if constexpr (kTma) {
    __syncthreads();  // the barriers are initialised; the last CTA-wide barrier
    if (warp == kWarps) {
      produce_kv_tiles<T>(p, maps, seq, kv_head, pipe, full_bars, empty_bars, num_stages, my_tile0,
                          num_tiles, kv_begin, kv_end, lane);
      return;
    }
  }

  // Visible key range of this lane's two rows (g, g+8); rows past num_rows copy a real row.
  int32_t row_lo[2], row_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = min(g + 8 * i, num_rows - 1);
    const int32_t pos = first_pos + (row0 + r) / group;
    row_hi[i] = pos + 1;
    row_lo[i] = windowed ? pos - p.window_left : 0;
  }
  // Tiles wholly inside [mask_lo, mask_hi) are visible to every row and skip masking.
  const int32_t mask_lo = windowed ? first_pos + qi_last - p.window_left : 0;
  const int32_t mask_hi = first_pos + qi_first + 1;

  const float soft_cap = p.logit_soft_cap;
  const float qk_scale = p.sm_scale * p.k_scale.at(kv_head);
  const float score_mul = soft_cap > 0.0f ? qk_scale / soft_cap : qk_scale * kLog2e;
  const float cap_mul = soft_cap * kLog2e;

  // --- cp.async pipeline ---------------------------------------------------------------
  const uint8_t* k_global = static_cast<const uint8_t*>(p.k_cache);
  const uint8_t* v_global = static_cast<const uint8_t*>(p.v_cache);
  const int32_t* pages_of_seq = p.block_table + static_cast<int64_t>(seq) * p.block_table_stride;
  const int32_t page_size = p.kv.page_size;
  // page_size is 16, 32 or 64 (KvCacheLayout::validate): a shift and a mask replace the integer
  // divisions (~20 instructions each, 8 per thread per tile) of token -> (page, slot).
  const int page_shift = __ffs(page_size) - 1;
  const int32_t page_mask = page_size - 1;
  // Byte strides of KvCacheLayout::offset; a page (<= 64 tokens x all heads) fits in int32.
  const int64_t page_bytes = p.kv.page_elems() * T::kKvBytes;
  const int32_t token_bytes = static_cast<int32_t>(p.kv.token_stride() * T::kKvBytes);
  const int32_t head_bytes = static_cast<int32_t>(kv_head * p.kv.head_stride() * T::kKvBytes);

  // Page of each 16-byte chunk this thread copies for tile `tile` (-1: zero-fill). In the main
  // loop it is loaded one tile ahead, so the block-table latency hides behind a tile of
  // compute; the prologue's tiles take theirs from prologue_pages, filled in one round.
  const int32_t pages_per_tile = kTileTokens >> page_shift;
  const int prologue_tiles = min(num_stages - 1, num_tiles);
  if constexpr (!kTma) {
    for (int i = tid; i < prologue_tiles * pages_per_tile; i += kThreads) {
      const int32_t first_tok =
          (my_tile0 + i / pages_per_tile) * kTileTokens + i % pages_per_tile * page_size;
      // Pages that start at or past kv_end may lie beyond the block-table row: never read them.
      prologue_pages[i] = first_tok < kv_end ? __ldg(pages_of_seq + (first_tok >> page_shift)) : -1;
    }
    __syncthreads();
  }
  int32_t chunk_page[T::kChunksPerThread];
  // Page of each chunk of tile `tile`, or -1 where its token is not visible. The prologue's
  // tiles take theirs from prologue_pages; the loop's read the block table branch-free, the
  // index clamped to the last visible page so that the read stays inside the request's row.
  const int32_t last_page_index = (kv_end - 1) >> page_shift;
  [[maybe_unused]] auto load_pages = [&](int tile, bool from_prologue) {
#pragma unroll
    for (int i = 0; i < T::kChunksPerThread; ++i) {
      const int row = (tid + i * kThreads) / T::kChunksPerRow;
      const int32_t tok = (my_tile0 + tile) * kTileTokens + row;
      const bool visible = tile < num_tiles && tok >= kv_begin && tok < kv_end;
      const int32_t page = from_prologue
                               ? prologue_pages[tile * pages_per_tile + (row >> page_shift)]
                               : __ldg(pages_of_seq + min(tok >> page_shift, last_page_index));
      chunk_page[i] = visible ? page : -1;
    }
  };
  // Stage buffers are used round robin; the tile loop advances these offsets instead of taking
  // tile % num_stages (num_stages is a runtime value: a division per use).
  const int ring_bytes = num_stages * T::kStageBytes;
  // Every tile starts on a page boundary (page_size divides kTileTokens), so a chunk's byte
  // offset inside its page is the same for every tile.
  int32_t chunk_in_page[T::kChunksPerThread];
#pragma unroll
  for (int i = 0; i < T::kChunksPerThread; ++i) {
    const int id = tid + i * kThreads;
    chunk_in_page[i] = ((id / T::kChunksPerRow) & page_mask) * token_bytes + head_bytes +
                       id % T::kChunksPerRow * 16;
  }
  int write_offset = 0;  // stage buffer of the next tile issue_tile loads
  [[maybe_unused]] auto issue_tile = [&](int tile) {
    if (tile < num_tiles) {
      uint8_t* k_tile = pipe + write_offset;
      write_offset =
          write_offset + T::kStageBytes == ring_bytes ? 0 : write_offset + T::kStageBytes;
      uint8_t* v_tile = k_tile + T::kTileKvBytes;
#pragma unroll
      for (int i = 0; i < T::kChunksPerThread; ++i) {
        const int id = tid + i * kThreads;
        const int row = id / T::kChunksPerRow;
        const int col = id % T::kChunksPerRow;
        const bool valid = chunk_page[i] >= 0;
        // = p.kv.offset(page, token % page_size, kv_head, 0) * kKvBytes + col * 16.
        const int64_t offset = valid ? chunk_page[i] * page_bytes + chunk_in_page[i] : 0;
        const int smem_offset = T::kv_smem_offset(row, col * 16);
        cp_async_16(smem_address(k_tile + smem_offset), k_global + offset, valid);
        cp_async_16(smem_address(v_tile + smem_offset), v_global + offset, valid);
      }
    }
    cp_async_commit();  // empty groups too: the wait count below stays uniform
  };

  if constexpr (!kTma) {
    for (int s = 0; s < num_stages - 1; ++s) {
      load_pages(s, /*from_prologue=*/true);
      issue_tile(s);
    }
    load_pages(num_stages - 1, /*from_prologue=*/false);
  }

  // Q rows -> shared memory, while the first KV tiles are in flight (rows past num_rows are
  // zero: their scores are 0 and they are never written).
  {
    constexpr int kQChunksPerRow = kHeadDim * 2 / 16;
    const uint8_t* q_global = static_cast<const uint8_t*>(p.q);
    for (int idx = tid; idx < kRowsPerCta * kQChunksPerRow; idx += kThreads) {
      const int r = idx / kQChunksPerRow;
      const int chunk = idx % kQChunksPerRow;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r < num_rows) {
        const int64_t elem =
            (static_cast<int64_t>(row_token(r)) * p.num_q_heads + row_head(r)) * kHeadDim;
        v = *reinterpret_cast<const uint4*>(q_global + elem * 2 + chunk * 16);
        if constexpr (kQDtype == DType::kF16 && kMma == MmaType::kBF16) {
          // f16 query over a bf16 cache: the MMA needs one type; bf16 keeps the range.
          uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            w[i] = pack_pair<MmaType::kBF16>(f16_bits_to_float(static_cast<uint16_t>(w[i])),
                                             f16_bits_to_float(static_cast<uint16_t>(w[i] >> 16)));
          }
        }
      }
      float unscale = 1.0f;
      if constexpr (T::kScaleQ) scale_bf16_chunk_to_f16<kQChunksPerRow>(v, unscale);
      if (chunk == 0) q_unscale[r] = unscale;
      *reinterpret_cast<uint4*>(q_smem + r * T::kQStride + chunk * 16) = v;
    }
  }

  sync_compute_warps<kTma>();  // Q in shared memory

  // Epilogue (after the warps stored their rows, statistics and O in stat_max, stat_sum and
  // the combine buffer at the ring): one thread per 4 consecutive output elements of a row
  // (write_output_quad), in whole warps; a row's quads are a multiple of 16, so the four lanes
  // of an NVFP4 block are active together.
  auto write_rows = [&]() {
    const float* combine = reinterpret_cast<const float*>(pipe);
    constexpr int kQuadsPerRow = kHeadDim / kOutputQuad;
    const float v_factor = p.v_scale.at(kv_head);
    const int quads = num_rows * kQuadsPerRow;
    for (int warp_quad = tid - lane; warp_quad < quads; warp_quad += kThreads) {
      const bool active = warp_quad + lane < quads;
      const int quad = active ? warp_quad + lane : quads - 1;
      const int r = quad / kQuadsPerRow;
      const int d0 = quad % kQuadsPerRow * kOutputQuad;
      float m = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w)
        m = fmaxf(m, stat_max[w * kRowsPerCta + r]);
      float weight[kWarps];
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        weight[w] = m == -INFINITY ? 0.0f : fast_exp2(stat_max[w * kRowsPerCta + r] - m);
        sum += weight[w] * stat_sum[w * kRowsPerCta + r];
      }
      float v[kOutputQuad] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float4 x = *reinterpret_cast<const float4*>(
            combine + (w * kRowsPerCta + r) * T::kCombineStride + d0);
        v[0] += weight[w] * x.x, v[1] += weight[w] * x.y;
        v[2] += weight[w] * x.z, v[3] += weight[w] * x.w;
      }
      const int32_t token = row_token(r);
      const int32_t head = row_head(r);
      if (args.num_splits == 1) {
        // The sink joins the denominator only: rescale to the larger of the two maxima.
        float total_max = m;
        float denom = sum;
        if (p.sinks != nullptr) {
          const float sink = p.sinks[head] * kLog2e;
          total_max = fmaxf(m, sink);
          denom = sum * fast_exp2(m - total_max) + fast_exp2(sink - total_max);
        }
        const float scale = denom > 0.0f ? fast_exp2(m - total_max) * v_factor / denom : 0.0f;
#pragma unroll
        for (int k = 0; k < kOutputQuad; ++k)
          v[k] *= scale;
        write_output_quad(p, token, head, d0, v, active);
        if (active && d0 == 0 && p.lse != nullptr) {
          p.lse[static_cast<int64_t>(token) * p.num_q_heads + head] =
              (total_max + __log2f(denom)) * kLn2;
        }
      } else if (active) {
        const int64_t row_index =
            (static_cast<int64_t>(split) * p.num_tokens + token) * p.num_q_heads + head;
        if (d0 == 0) args.partial_lse[row_index] = sum > 0.0f ? m + __log2f(sum) : -INFINITY;
        if (sum > 0.0f) {
          const float scale = v_factor / sum;
          *reinterpret_cast<float4*>(args.partial_o + row_index * kHeadDim + d0) =
              make_float4(v[0] * scale, v[1] * scale, v[2] * scale, v[3] * scale);
        }
      }
    }
  };

  if constexpr (kSwapped) {
    SwappedRows rows;
    rows.q_smem = q_smem;
    rows.q_unscale = q_unscale;
    rows.num_rows = num_rows;
    rows.first_pos = first_pos;
    rows.row0 = row0;
    rows.group = group;
    rows.window_left = p.window_left;
    rows.score_mul = score_mul;
    rows.soft_cap = soft_cap;
    rows.cap_mul = cap_mul;
    if constexpr (kWgmmaQk) {
      uint8_t* q_terms = pipe + num_stages * T::kStageBytes;  // 1024-aligned, as the ring
      write_q_terms<T>(q_smem, q_terms, tid);
      sync_compute_warps<kTma>();
      rows.q_terms = smem_address(q_terms);
    }
    SwappedPipe swapped_pipe;
    swapped_pipe.ring = pipe;
    swapped_pipe.full_bars = full_bars;
    swapped_pipe.empty_bars = empty_bars;
    swapped_pipe.num_stages = num_stages;
    swapped_pipe.num_tiles = num_tiles;
    swapped_pipe.first_tile = my_tile0;
    swapped_pipe.mask_lo = mask_lo;
    swapped_pipe.mask_hi = mask_hi;
    swapped_pipe.kv_begin = kv_begin;
    swapped_pipe.kv_end = kv_end;
    SwappedTileLoop<T, kWgmmaQk> loop;
    loop.run(rows, swapped_pipe, warp, lane);
    if (args.merge_counters == nullptr && !args.early_merge_launch) {
      allow_dependent_launch();  // as below
    }
    sync_compute_warps<kTma>();  // every warp is done with the stages: reuse them to combine
    loop.store(stat_max, stat_sum, reinterpret_cast<float*>(pipe), warp, lane);
    sync_compute_warps<kTma>();
    write_rows();
    finish_split(pipe);
    return;
  }

  // Score multiplier of this lane's rows g and g+8 (rows past num_rows hold zeros: 2^0).
  const float row_score_mul[2] = {score_mul * q_unscale[g], score_mul * q_unscale[g + 8]};

  // Heads wider than 64 re-read Q every tile. Rewrite it in fragment order (k-step, lane, the
  // four A registers), so that each k-step is one conflict-free 16-byte load straight into the
  // MMA's operand registers: the row-major pairs would need register moves per tile.
  const uint4* q_frags = reinterpret_cast<const uint4*>(q_smem);
  if constexpr (!T::kQInRegisters) {
    static_assert(T::kKSteps * 32 * 16 <= T::kQBytes, "Q fragments reuse the Q rows' space");
    constexpr int kFragsPerThread = T::kKSteps * 32 / kThreads;
    uint4 frag[kFragsPerThread];
#pragma unroll
    for (int f = 0; f < kFragsPerThread; ++f) {
      const int idx = tid + f * kThreads;  // k-step idx / 32 of lane idx % 32
      const int ks = idx / 32, fg = idx % 32 / 4, fc = idx % 4;
      // Words 2j, 2j+1 (j = ks % 4) of load_q_chunk's lo (row fg) and hi (row fg + 8).
      const int byte = (4 * (ks / 4) + fc) * 32 + 8 * (ks % 4);
      const uint2 lo = *reinterpret_cast<const uint2*>(q_smem + fg * T::kQStride + byte);
      const uint2 hi = *reinterpret_cast<const uint2*>(q_smem + (fg + 8) * T::kQStride + byte);
      frag[f] = make_uint4(lo.x, hi.x, lo.y, hi.y);
    }
    sync_compute_warps<kTma>();  // every row-major read is done before the rewrite
#pragma unroll
    for (int f = 0; f < kFragsPerThread; ++f)
      reinterpret_cast<uint4*>(q_smem)[tid + f * kThreads] = frag[f];
    sync_compute_warps<kTma>();
  }

  uint32_t q_frag[T::kQInRegisters ? T::kKSteps : 1][4];
  if constexpr (T::kQInRegisters) {
#pragma unroll
    for (int cg = 0; cg < T::kChunkGroups; ++cg) {
      uint32_t lo[8], hi[8];
      load_q_chunk<T::kQStride>(q_smem, g, c, cg, lo, hi);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        q_frag[4 * cg + j][0] = lo[2 * j];
        q_frag[4 * cg + j][1] = hi[2 * j];
        q_frag[4 * cg + j][2] = lo[2 * j + 1];
        q_frag[4 * cg + j][3] = hi[2 * j + 1];
      }
    }
  }

  float o_acc[T::kONTiles][4];
#pragma unroll
  for (int i = 0; i < T::kONTiles; ++i)
    o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this lane's share; reduced across the quad at the end

  int read_offset = 0;  // stage buffer of tile `tile`
  int stage = 0;        // its index (TMA kernel: its barriers)
  uint32_t phase = 0;   // parity of the full[stage] phase that delivers tile `tile`
  for (int tile = 0; tile < num_tiles; ++tile) {
    if constexpr (kTma) {
      sm90_async::mbarrier_wait(full_bars + 8 * stage, phase);
    } else {
      cp_async_wait_pending(num_stages - 2);
      __syncthreads();  // tile `tile` landed for all threads; buffer tile-1 is free again
      issue_tile(tile + num_stages - 1);
      load_pages(tile + num_stages, /*from_prologue=*/false);
    }

    const uint8_t* k_tile = pipe + read_offset;
    read_offset = read_offset + T::kStageBytes == ring_bytes ? 0 : read_offset + T::kStageBytes;
    const uint8_t* v_tile = k_tile + T::kTileKvBytes;
    const int32_t tile_tok0 = (my_tile0 + tile) * kTileTokens;

    // S[row][token] for this warp's 16 tokens: two n-tiles of 8, each accumulated in two
    // independent chains (even and odd k-steps) that are summed at the end: half the
    // dependent-MMA latency per tile.
    float s[2][4];
    float s_chain[2][2][4] = {};
#pragma unroll
    for (int cg = 0; cg < T::kChunkGroups; ++cg) {
      // Lane (g, c) reads head-dim elements [(4 cg + c) * 16, + 16) of key row
      // token_of_column(g), 16-byte chunk by chunk. bf16: chunks 2m and 2m + 1 of a row; the TMA
      // swizzle keeps such a pair together, so the second is at the first's offset ^ 16 (saves
      // an address register per pair: ptxas spilled 12 bytes at 128 registers without it).
      uint32_t k_words[2][4 * T::kKvBytes];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int row = 16 * warp + 8 * nt + T::token_of_column(g);
        const int first = T::kv_smem_offset(row, (4 * cg + c) * T::kKvBytes * 16);
#pragma unroll
        for (int h = 0; h < T::kKvBytes; ++h) {
          const int at = kTma ? first ^ (16 * h) : first + 16 * h;
          load_words<16>(k_tile + at, k_words[nt] + 4 * h);
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t a[4];
        if constexpr (T::kQInRegisters) {
          a[0] = q_frag[4 * cg + j][0], a[1] = q_frag[4 * cg + j][1];
          a[2] = q_frag[4 * cg + j][2], a[3] = q_frag[4 * cg + j][3];
        } else {
          const uint4 f = q_frags[(4 * cg + j) * 32 + lane];
          a[0] = f.x, a[1] = f.y, a[2] = f.z, a[3] = f.w;
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          uint32_t b0, b1;
          if constexpr (T::kFp8Kv) {
            fp8_quad_to_mma<T::kFp8, kMma>(k_words[nt][j], b0, b1);
          } else {
            b0 = k_words[nt][2 * j];
            b1 = k_words[nt][2 * j + 1];
          }
          mma_16816<kMma>(s_chain[j % 2][nt], a, b0, b1);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[nt][e] = s_chain[0][nt][e] + s_chain[1][nt][e];
    }

    // Scores -> log2 units, soft-cap, mask; online softmax per row.
    const bool need_mask = tile_tok0 < mask_lo || tile_tok0 + kTileTokens > mask_hi;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[nt][e] * row_score_mul[e >> 1];
        if (soft_cap > 0.0f) x = fast_tanh(x) * cap_mul;
        if (need_mask) {
          const int32_t tok = tile_tok0 + 16 * warp + 8 * nt + T::token_of_column(2 * c + (e & 1));
          if (tok < row_lo[e >> 1] || tok >= row_hi[e >> 1]) x = -INFINITY;
        }
        s[nt][e] = x;
      }
    }
    float alpha[2];
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float mx =
          fmaxf(fmaxf(s[0][2 * ri], s[0][2 * ri + 1]), fmaxf(s[1][2 * ri], s[1][2 * ri + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(row_max[ri], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet
      alpha[ri] = fast_exp2(row_max[ri] - m_use);
      row_max[ri] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pr = fast_exp2(s[nt][2 * ri + e] - m_use);
          s[nt][2 * ri + e] = pr;
          sum += pr;
        }
      }
      row_sum[ri] = row_sum[ri] * alpha[ri] + sum;
    }
    // Once the running maxima settle (after the first tiles) no row's max moves and the warp
    // skips rescaling its accumulators.
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int i = 0; i < T::kONTiles; ++i) {
        o_acc[i][0] *= alpha[0];
        o_acc[i][1] *= alpha[0];
        o_acc[i][2] *= alpha[1];
        o_acc[i][3] *= alpha[1];
      }
    }

    // O[row][d] += P[row][token] V[token][d]. This lane reads the V rows of the P fragment's k
    // indices 2c, 2c+1, 2c+8, 2c+9 (token_of_column of 2c, 2c+1 in both n-tiles of the warp's 16
    // tokens), at the columns of v_column_byte: its n-tile i column is v_output_column(i, g).
    const uint32_t p_frag[4] = {
        pack_pair<kMma>(s[0][0], s[0][1]), pack_pair<kMma>(s[0][2], s[0][3]),
        pack_pair<kMma>(s[1][0], s[1][1]), pack_pair<kMma>(s[1][2], s[1][3])};
    constexpr int kLoads = T::kVBytesPerLane / T::kVLoadBytes;
    constexpr int kElemsPerLoad = T::kVElemsPerLoad;
    const int v_rows[4] = {
        16 * warp + T::token_of_column(2 * c), 16 * warp + T::token_of_column(2 * c + 1),
        16 * warp + 8 + T::token_of_column(2 * c), 16 * warp + 8 + T::token_of_column(2 * c + 1)};
    // V rows of tokens outside [kv_begin, kv_end) hold untrusted bytes (decode_kv_tma_producer.cuh;
    // the cp.async kernel zero-fills them, the TMA kernel does not): their P is 0, and zeroing
    // their words keeps 0 x NaN out of the product. Only masked tiles have such rows.
#pragma unroll
    for (int ld = 0; ld < kLoads; ++ld) {
      uint32_t v_words[4][T::kVLoadBytes / 4];
      const int col_byte = T::v_column_byte(g, ld);
#pragma unroll
      for (int r = 0; r < 4; ++r)
        load_words<T::kVLoadBytes>(v_tile + T::kv_smem_offset(v_rows[r], col_byte), v_words[r]);
      if constexpr (kTma) {
        if (need_mask) {  // a warp-uniform branch: unmasked tiles skip the selects
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int32_t tok = tile_tok0 + v_rows[r];
            if (tok < kv_begin || tok >= kv_end) {
#pragma unroll
              for (int w = 0; w < T::kVLoadBytes / 4; ++w)
                v_words[r][w] = 0u;
            }
          }
        }
      }
#pragma unroll
      for (int k = 0; k < kElemsPerLoad; k += 2) {
        uint32_t b0[2], b1[2];  // elements k and k + 1
        if constexpr (T::kFp8Kv) {
          fp8_column_pairs_to_mma<T::kFp8, kMma>(v_words[0][k / 4], v_words[1][k / 4], k % 4 / 2,
                                                 b0[0], b0[1]);
          fp8_column_pairs_to_mma<T::kFp8, kMma>(v_words[2][k / 4], v_words[3][k / 4], k % 4 / 2,
                                                 b1[0], b1[1]);
        } else {
          b0[0] = byte_perm(v_words[0][k / 2], v_words[1][k / 2], 0x5410u);
          b0[1] = byte_perm(v_words[0][k / 2], v_words[1][k / 2], 0x7632u);
          b1[0] = byte_perm(v_words[2][k / 2], v_words[3][k / 2], 0x5410u);
          b1[1] = byte_perm(v_words[2][k / 2], v_words[3][k / 2], 0x7632u);
        }
        mma_16816<kMma>(o_acc[ld * kElemsPerLoad + k], p_frag, b0[0], b1[0]);
        mma_16816<kMma>(o_acc[ld * kElemsPerLoad + k + 1], p_frag, b0[1], b1[1]);
      }
    }
    if constexpr (kTma) {
      // Every lane's reads of the stage precede the warp's one arrival (empty[s] counts warps).
      __syncwarp();
      if (lane == 0) sm90_async::mbarrier_arrive(empty_bars + 8 * stage);
      if (++stage == num_stages) stage = 0, phase ^= 1;
    }
  }
  if constexpr (!kTma) cp_async_wait_pending(0);
  // Without arrival counters (nor an early merge launch) the split merge (launched as a
  // programmatic dependent of this grid) may start now: its launch overlaps this epilogue, and
  // it waits for this grid's completion before reading.
  if (args.merge_counters == nullptr && !args.early_merge_launch) allow_dependent_launch();
  // Every warp is done with the pipeline buffers (and every bulk copy has landed: each tile's
  // full barrier completed): reuse them to combine.
  sync_compute_warps<kTma>();

#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    row_sum[ri] += __shfl_xor_sync(0xffffffffu, row_sum[ri], 1);
    row_sum[ri] += __shfl_xor_sync(0xffffffffu, row_sum[ri], 2);
  }
  float* combine = reinterpret_cast<float*>(pipe);  // [warp][row][kCombineStride]
  if (c == 0) {
    stat_max[warp * kRowsPerCta + g] = row_max[0];
    stat_max[warp * kRowsPerCta + g + 8] = row_max[1];
    stat_sum[warp * kRowsPerCta + g] = row_sum[0];
    stat_sum[warp * kRowsPerCta + g + 8] = row_sum[1];
  }
#pragma unroll
  for (int i = 0; i < T::kONTiles; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e >> 1);
      const int d = T::v_output_column(i, 2 * c + (e & 1));
      combine[(warp * kRowsPerCta + row) * T::kCombineStride + d] = o_acc[i][e];
    }
  }
  sync_compute_warps<kTma>();

  write_rows();
  finish_split(pipe);
}

}  // namespace quench::decode
