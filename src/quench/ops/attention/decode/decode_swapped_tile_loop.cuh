// The decode kernel's tile loop with the tensor-core operands swapped ("swap AB"), for CTAs of at
// most kSwappedMaxRows query rows (GQA group x query tokens <= 8, e.g. Llama's group 4 x 1 token):
// KV tokens are the M = 16 side of mma.sync m16n8k16 and the query rows its N = 8 side, so that
// no MMA, softmax step or accumulator register is spent on the padding rows that the row-major
// loop (M = 16 query rows) carries. Per warp and 16-token tile (hd128): 8 MMAs for S^T = K Q^T
// and 8 for O^T += V^T P^T where the row-major loop issues 16 + 16; four scores per lane instead
// of eight; a 32-float O^T accumulator instead of 64.
//
// Operands, per warp (tile rows [16 w, 16 w + 16)), lane = 4 g + c; the M index m of S^T (and K
// index of P^T) is token row 16 w + 8 (m / 8) + token_of_column(m % 8).
// - S^T = K Q^T: A = K (M = token, K index = head dim), B = Q^T (N = query row), in one dim order
//   for both (a dot product does not depend on the order of its terms); Q^T stays in registers.
//   FP8: k-step 4 cg + j, slots 2c, 2c + 1, 2c + 8, 2c + 9 = dims 16 (4 cg + c) + 4 j + {0..3}:
//   one word of the lane's 16-byte K chunk, two conversions. bf16: natural order (k-step ks =
//   dims 16 ks .. 16 ks + 15), one ldmatrix.x4 per k-step gives the A fragment.
// - The accumulator S^T holds (tokens g, g + 8) x (rows 2c, 2c + 1) per lane; softmax statistics
//   reduce over tokens across lane groups (xor 4, 8, 16).
// - O^T = V^T P^T: A = V^T (M = head dim, K = token in S^T's M order); B = P^T, the packed
//   probabilities transposed by movmatrix (two 8x8 blocks: tokens 0-7, 8-15).
//   FP8: lane (g, c) reads tile rows m = 2c, 2c + 1, 2c + 8, 2c + 9 at
//   DecodeTileLayout::v_column_byte(g, ld) (the row-major loop's conflict-free V reads); one
//   byte permute of two rows' words gives two elements' token pairs. Lane element i (of
//   head_dim / 8) is output column v_output_column(i, g), row g (even i) or g + 8 (odd i) of
//   m-tile i / 2. bf16: one ldmatrix.x4.trans per m-tile; m-tile mt row r is dim 16 mt + r.
//
// kWgmmaQk (FP8 KV, bf16 q, sm_90a; QUENCH_DECODE_QK=wgmma): S^T = K Q^T on the tensor cores'
// FP8 warpgroup MMA straight from the stage, with no K loads, conversions or MMAs in the warps.
// Q is the B operand, as two e4m3 terms per element (numerics/e4m3_two_term.cuh) in kQTermsBytes
// of shared memory (write_q_terms): 16 rows of 128 bytes in the 128-byte swizzle, rows 0-7 the
// hi terms of query rows 0-7 and rows 8-15 their lo terms. One wgmma m64n16k32 per 32 dims (the
// tile's 64 tokens are M) gives K hi^T in accumulator columns 0-7 and K lo^T in 8-15, whose sum
// is S^T. The terms are the f16 rows times 2^-8 (max |q| of a row in [128, 256)), exact for every
// element >= 2^-10 of its row's largest; col_score_mul carries the 2^8 back. Columns 0-7 of the
// m64n16 accumulator are this loop's S^T layout with the tile's tokens in their natural order
// (token_of_column is the identity: no K fragment reads to keep conflict-free, and the V reads
// stay conflict-free with rows 2c, 2c + 1).
#pragma once

#include <cstdint>

#include "quench/core/sm90_async.cuh"
#include "quench/core/sm90_wgmma.cuh"
#include "quench/numerics/e4m3_two_term.cuh"
#include "quench/numerics/fast_math.cuh"
#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench::decode {

// Where the swapped loop's query rows and scores come from (all per CTA, set by the kernel).
struct SwappedRows {
  const uint8_t* q_smem = nullptr;   // [kRowsPerCta][q_stride] f16/bf16 query rows, zero-padded
  const float* q_unscale = nullptr;  // [kRowsPerCta] 2^-e of each row's exact f16 scaling
  int32_t num_rows = 0;              // <= kSwappedMaxRows
  int32_t first_pos = 0;             // absolute position of query token 0 of the request
  int32_t row0 = 0;                  // first query row of the CTA
  int32_t group = 1;                 // q heads per KV head: row r is token (row0 + r) / group
  int32_t window_left = -1;          // -1: no window
  uint32_t q_terms = 0;              // kWgmmaQk: shared address of the Q terms (write_q_terms)
  float score_mul = 0.0f;            // multiplies raw scores (log2 units, or / soft-cap)
  float soft_cap = 0.0f;             // > 0: scores -> tanh(x) * cap_mul
  float cap_mul = 0.0f;
};

// Where the tiles are (the TMA kernel's ring of stages and its barriers).
struct SwappedPipe {
  const uint8_t* ring = nullptr;  // num_stages stages of T::kStageBytes (K tile, then V tile)
  uint32_t full_bars = 0;         // shared addresses of mbarriers full[kMaxStages]
  uint32_t empty_bars = 0;        // and empty[kMaxStages]
  int num_stages = 0;
  int num_tiles = 0;
  int32_t first_tile = 0;            // absolute tile index of tile 0
  int32_t mask_lo = 0, mask_hi = 0;  // tiles inside [lo, hi) need no masking
  int32_t kv_begin = 0, kv_end = 0;  // tokens outside hold untrusted V bytes
};

// Shared memory of kWgmmaQk's Q terms: hi, then lo, each 8 rows x 128 bytes (one swizzle atom),
// together the 16 rows of the B operand.
inline constexpr int kQTermsBytes = 2 * kSwappedMaxRows * 128;

// Writes the Q terms of kWgmmaQk (see the top of this file) from the CTA's f16 query rows
// (q_smem, kQStride bytes apart; rows past num_rows are zero) in the layout of a K tile's first
// 16 rows (T::kv_smem_offset: element d of tile row n at byte d of the row's 128, its 16-byte
// chunk d / 16 stored at chunk (d / 16) ^ (n % 8)), hi terms in rows 0-7, lo in rows 8-15. Run
// by the kThreads compute threads, after the rows are written and synced; the caller syncs them
// again after it (each thread's stores are fenced here for the wgmma's async-proxy reads).
template <class T>
__device__ __forceinline__ void write_q_terms(const uint8_t* q_smem, uint8_t* q_terms, int tid) {
  constexpr int kChunks = T::kRowBytes / 8;  // 8 f16 = 16 source bytes per item
  for (int idx = tid; idx < kSwappedMaxRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks;
    const int ch = idx % kChunks;
    const uint4 v = *reinterpret_cast<const uint4*>(q_smem + r * T::kQStride + ch * 16);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t hi[2] = {0u, 0u}, lo[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      const E4m3x2Terms t = e4m3x2_two_term(e4m3_two_term_input(x.x, 0.00390625f),  // 2^-8
                                            e4m3_two_term_input(x.y, 0.00390625f));
      hi[i / 2] |= static_cast<uint32_t>(t.hi) << (16 * (i % 2));
      lo[i / 2] |= static_cast<uint32_t>(t.lo) << (16 * (i % 2));
    }
    // Bytes 8 ch .. 8 ch + 7 of tile rows r (hi) and 8 + r (lo), placed as TMA places a K tile's
    // rows: the B operand reads with the A operand's kind of descriptor.
    *reinterpret_cast<uint2*>(q_terms + T::kv_smem_offset(r, 8 * ch)) = make_uint2(hi[0], hi[1]);
    *reinterpret_cast<uint2*>(q_terms + T::kv_smem_offset(kSwappedMaxRows + r, 8 * ch)) =
        make_uint2(lo[0], lo[1]);
  }
#ifdef QUENCH_SM90A_ENABLED
  sm90::fence_proxy_async_shared();
#endif
}

template <class T, bool kWgmmaQk = false>
struct SwappedTileLoop {
  static_assert(!kWgmmaQk || (T::kFp8Kv && T::kRowBytes <= 128),
                "FP8 Q K^T on wgmma reads an FP8 K tile of one 128-byte column block");
  static constexpr MmaType kMma = T::kMma;
  // FP8 wgmma k32 steps per tile (head_dim bytes of K).
  static constexpr int kQkSteps32 = T::kRowBytes / 32;
  // Tile row (token) of column n of an 8-token half: the TMA layout's permutation for the K
  // fragment reads, or the natural order that wgmma's accumulator has.
  static __device__ __forceinline__ int token_of_column(int n) {
    return kWgmmaQk ? n : T::token_of_column(n);
  }
  static constexpr int kMTiles = T::kONTiles / 2;  // O^T m-tiles of 16 head-dim rows
  static constexpr int kVWords = T::kVLoadBytes / 4;
  static_assert(kSwappedMaxRows == 8, "query rows are the n8 side of one MMA tile");

  // O^T m-tile mt, element e: query row 2c + e % 2, output column (FP8)
  // v_output_column(2 mt + e / 2, g), (bf16) 16 mt + 8 (e / 2) + g.
  float o_acc[kMTiles][4];
  float row_max[2];  // rows 2c, 2c + 1 (log2 units); every lane group g holds the same value
  float row_sum[2];  // this lane's share (its tokens g, g + 8 of every tile)

  __device__ __forceinline__ void run(const SwappedRows& rows, const SwappedPipe& pipe, int warp,
                                      int lane) {
    const int g = lane / 4;
    const int c = lane % 4;

    // Q^T B fragments (query row g) in K's dim order: FP8: k-step 4 cg + j takes words 2j,
    // 2j + 1 of the row's 32 bytes at (4 cg + c) * 32; bf16: dims 16 ks + 2c, + 1 and
    // 16 ks + 8 + 2c, + 1.
    uint32_t q_frag[T::kKSteps][2];
    const uint8_t* q_row = rows.q_smem + g * T::kQStride;
#pragma unroll
    for (int cg = 0; cg < (kWgmmaQk ? 0 : T::kChunkGroups); ++cg) {
      if constexpr (T::kFp8Kv) {
        uint32_t w[8];
        load_words<32>(q_row + (4 * cg + c) * 32, w);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          q_frag[4 * cg + j][0] = w[2 * j];
          q_frag[4 * cg + j][1] = w[2 * j + 1];
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int ks = 4 * cg + j;
          q_frag[ks][0] = *reinterpret_cast<const uint32_t*>(q_row + 32 * ks + 4 * c);
          q_frag[ks][1] = *reinterpret_cast<const uint32_t*>(q_row + 32 * ks + 16 + 4 * c);
        }
      }
    }
    // Score multiplier and visible key range [lo, hi) of rows 2c, 2c + 1 (rows past num_rows
    // take the last real row's range; their query is zero and they are never written).
    float col_score_mul[2];
    int32_t col_lo[2], col_hi[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      // kWgmmaQk's terms are the f16 rows times 2^-8.
      col_score_mul[i] = rows.score_mul * rows.q_unscale[2 * c + i] * (kWgmmaQk ? 256.0f : 1.0f);
      const int r = min(2 * c + i, rows.num_rows - 1);
      const int32_t pos = rows.first_pos + (rows.row0 + r) / rows.group;
      col_hi[i] = pos + 1;
      col_lo[i] = rows.window_left >= 0 ? pos - rows.window_left : 0;
    }

#pragma unroll
    for (int i = 0; i < kMTiles; ++i)
      o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.0f;

    // Tile rows of this lane's S^T rows (g, g + 8) and P^T k indices (2c, 2c + 1, 2c + 8, 2c + 9).
    const int k_rows[2] = {16 * warp + token_of_column(g), 16 * warp + 8 + token_of_column(g)};
    const int v_rows[4] = {
        16 * warp + token_of_column(2 * c), 16 * warp + token_of_column(2 * c + 1),
        16 * warp + 8 + token_of_column(2 * c), 16 * warp + 8 + token_of_column(2 * c + 1)};
    // Shared-memory offsets of this lane's reads, one per row; the other chunks of the row are
    // offset ^ kv_chunk_delta(constant) (registers: 4 CTAs per SM leave ~100 per thread).
    // FP8: K rows k_rows at chunk c (chunk group cg: + 4 cg), V rows v_rows at v_column_byte.
    // bf16: ldmatrix row addresses, lane 8i + r giving row r of matrix i: K (k-step 0; ks:
    // + 2 ks) matrix i = token rows 8 (i % 2) + r, chunk i / 2; V (m-tile 0; mt: + 2 mt)
    // matrix i = token rows 8 (i / 2) + r, chunk i % 2.
    constexpr int kVLoads = T::kFp8Kv ? T::kVBytesPerLane / T::kVLoadBytes : 1;
    int k_offsets[2], v_offsets[kVLoads][4];
    if constexpr (T::kFp8Kv) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        k_offsets[h] = T::kv_smem_offset(k_rows[h], c * 16);
#pragma unroll
      for (int ld = 0; ld < kVLoads; ++ld) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
          v_offsets[ld][r] = T::kv_smem_offset(v_rows[r], T::v_column_byte(g, ld));
      }
    } else {
      const int i = lane / 8, r = lane % 8;
      const int k_row = 16 * warp + 8 * (i % 2) + T::token_of_column(r);
      const int v_row = 16 * warp + 8 * (i / 2) + T::token_of_column(r);
      k_offsets[0] = T::kv_smem_offset(k_row, i / 2 * 16);
      v_offsets[0][0] = T::kv_smem_offset(v_row, i % 2 * 16);
    }
    const uint32_t ring = smem_address(pipe.ring);
    // FP8 V: this lane's words of load ld of the tile at v_tile (tile_tok0 its first token).
    // V rows of tokens outside [kv_begin, kv_end) hold untrusted bytes (the TMA producer does not
    // zero-fill): their P is 0, and zeroing their words keeps 0 x NaN out of the product. Only
    // tiles that need masking hold such rows.
    auto load_fp8_v_words = [&](const uint8_t* v_tile, int32_t tile_tok0, int ld,
                                uint32_t(&v_words)[4][kVWords], bool need_mask) {
#pragma unroll
      for (int r = 0; r < 4; ++r)
        load_words<T::kVLoadBytes>(v_tile + v_offsets[ld][r], v_words[r]);
      if (need_mask) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int32_t tok = tile_tok0 + v_rows[r];
          if (tok < pipe.kv_begin || tok >= pipe.kv_end) {
#pragma unroll
            for (int w = 0; w < kVWords; ++w)
              v_words[r][w] = 0u;
          }
        }
      }
    };
    // The A fragment of m-tile ld * kVElemsPerLoad / 2 + i from load ld's words: lane elements
    // ld * kVElemsPerLoad + 2i, + 1 (word i / 2, half i % 2) are its rows g and g + 8; a = (row
    // g, tokens 2c, 2c + 1), (row g + 8, the same), (g, 2c + 8, 2c + 9), (g + 8, ..).
    auto fp8_v_fragment = [](const uint32_t(&v_words)[4][kVWords], int i, uint32_t(&a)[4]) {
      fp8_column_pairs_to_mma<T::kFp8, kMma>(v_words[0][i / 2], v_words[1][i / 2], i % 2, a[0],
                                             a[1]);
      fp8_column_pairs_to_mma<T::kFp8, kMma>(v_words[2][i / 2], v_words[3][i / 2], i % 2, a[2],
                                             a[3]);
    };

    int stage = 0;
    uint32_t phase = 0;  // parity of the full[stage] phase that delivers tile `tile`
    for (int tile = 0; tile < pipe.num_tiles; ++tile) {
      sm90_async::mbarrier_wait(pipe.full_bars + 8 * stage, phase);
      const uint8_t* k_tile = pipe.ring + stage * T::kStageBytes;
      const uint8_t* v_tile = k_tile + T::kTileKvBytes;
      const uint32_t stage_addr = ring + static_cast<uint32_t>(stage * T::kStageBytes);
      const int32_t tile_tok0 = (pipe.first_tile + tile) * kTileTokens;

      // S^T, in two independent chains (even and odd k-steps): half the dependent-MMA latency;
      // kWgmmaQk: the K hi^T and K lo^T halves of its accumulator.
      float s_chain[2][4] = {};
      // kWgmmaQk: the V fragments are loaded and widened while the tensor cores run S^T.
      uint32_t v_frag[kWgmmaQk ? kMTiles : 1][4];
      if constexpr (kWgmmaQk) {
        float s_terms[8];
        issue_wgmma_scores(s_terms, stage_addr, rows.q_terms);
        const bool mask_v = tile_tok0 < pipe.mask_lo || tile_tok0 + kTileTokens > pipe.mask_hi;
#pragma unroll
        for (int ld = 0; ld < kVLoads; ++ld) {
          uint32_t v_words[4][kVWords];
          load_fp8_v_words(v_tile, tile_tok0, ld, v_words, mask_v);
#pragma unroll
          for (int i = 0; i < T::kVElemsPerLoad / 2; ++i)
            fp8_v_fragment(v_words, i, v_frag[ld * T::kVElemsPerLoad / 2 + i]);
        }
        wait_wgmma_scores(s_terms);
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s_chain[0][e] = s_terms[e], s_chain[1][e] = s_terms[4 + e];
      } else if constexpr (T::kFp8Kv) {
#pragma unroll
        for (int cg = 0; cg < T::kChunkGroups; ++cg) {
          uint32_t k_words[2][4];
#pragma unroll
          for (int h = 0; h < 2; ++h)
            load_words<16>(k_tile + (k_offsets[h] ^ T::kv_chunk_delta(4 * cg)), k_words[h]);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            uint32_t a[4];  // rows g, g + 8 x slots (2c, 2c + 1), (2c + 8, 2c + 9)
            fp8_quad_to_mma<T::kFp8, kMma>(k_words[0][j], a[0], a[2]);
            fp8_quad_to_mma<T::kFp8, kMma>(k_words[1][j], a[1], a[3]);
            mma_16816<kMma>(s_chain[j % 2], a, q_frag[4 * cg + j][0], q_frag[4 * cg + j][1]);
          }
        }
      } else {
#pragma unroll
        for (int ks = 0; ks < T::kKSteps; ++ks) {
          uint32_t a[4];
          load_matrix_x4<false>(stage_addr + (k_offsets[0] ^ T::kv_chunk_delta(2 * ks)), a);
          mma_16816<kMma>(s_chain[ks % 2], a, q_frag[ks][0], q_frag[ks][1]);
        }
      }
      // s[e]: token row e / 2 (g, g + 8), query row 2c + e % 2.
      float s[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = (s_chain[0][e] + s_chain[1][e]) * col_score_mul[e & 1];
        if (rows.soft_cap > 0.0f) x = fast_tanh(x) * rows.cap_mul;
        s[e] = x;
      }
      // Only the first and last tiles of a window hold invisible keys: a warp-uniform branch.
      const bool need_mask = tile_tok0 < pipe.mask_lo || tile_tok0 + kTileTokens > pipe.mask_hi;
      if (need_mask) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int32_t tok = tile_tok0 + k_rows[e >> 1];
          if (tok < col_lo[e & 1] || tok >= col_hi[e & 1]) s[e] = -INFINITY;
        }
      }

      float alpha[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float mx = fmaxf(s[i], s[2 + i]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float m_new = fmaxf(row_max[i], mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet
        alpha[i] = fast_exp2(row_max[i] - m_use);
        row_max[i] = m_new;
        s[i] = fast_exp2(s[i] - m_use);
        s[2 + i] = fast_exp2(s[2 + i] - m_use);
        row_sum[i] = row_sum[i] * alpha[i] + (s[i] + s[2 + i]);
      }
      // Once the running maxima settle no row's max moves and the warp skips the rescale.
      if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int i = 0; i < kMTiles; ++i) {
          o_acc[i][0] *= alpha[0];
          o_acc[i][1] *= alpha[1];
          o_acc[i][2] *= alpha[0];
          o_acc[i][3] *= alpha[1];
        }
      }
      // P^T B fragment: b0 = tokens 0-7, b1 = tokens 8-15 (k = 2c, 2c + 1 of query row g).
      const uint32_t p_b0 = transpose_8x8_b16(pack_pair<kMma>(s[0], s[1]));
      const uint32_t p_b1 = transpose_8x8_b16(pack_pair<kMma>(s[2], s[3]));
      if constexpr (kWgmmaQk) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
          mma_16816<kMma>(o_acc[mt], v_frag[mt], p_b0, p_b1);
      } else if constexpr (T::kFp8Kv) {
#pragma unroll
        for (int ld = 0; ld < kVLoads; ++ld) {
          uint32_t v_words[4][kVWords];
          load_fp8_v_words(v_tile, tile_tok0, ld, v_words, need_mask);
#pragma unroll
          for (int i = 0; i < T::kVElemsPerLoad / 2; ++i) {
            uint32_t a[4];
            fp8_v_fragment(v_words, i, a);
            mma_16816<kMma>(o_acc[ld * T::kVElemsPerLoad / 2 + i], a, p_b0, p_b1);
          }
        }
      } else {
        // Untrusted V rows (see above): registers 0, 1 hold tokens (2c, 2c + 1) = v_rows[0, 1]
        // in their halves, registers 2, 3 tokens v_rows[2, 3].
        uint32_t keep[2] = {0xffffffffu, 0xffffffffu};
        if (need_mask) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int32_t tok = tile_tok0 + v_rows[r];
            if (tok < pipe.kv_begin || tok >= pipe.kv_end)
              keep[r / 2] &= r % 2 ? 0xffffu : 0xffff0000u;
          }
        }
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          uint32_t a[4];
          load_matrix_x4<true>(
              stage_addr + T::kTileKvBytes + (v_offsets[0][0] ^ T::kv_chunk_delta(2 * mt)), a);
          if (need_mask) {
#pragma unroll
            for (int r = 0; r < 4; ++r)
              a[r] &= keep[r / 2];
          }
          mma_16816<kMma>(o_acc[mt], a, p_b0, p_b1);
        }
      }
      // Every lane's reads of the stage precede the warp's one arrival (empty[s] counts warps).
      __syncwarp();
      if (lane == 0) sm90_async::mbarrier_arrive(pipe.empty_bars + 8 * stage);
      if (++stage == pipe.num_stages) stage = 0, phase ^= 1;
    }
  }

  // kWgmmaQk: s (this thread's m64n16 accumulator: K hi^T in s[0..3], K lo^T in s[4..7]) from
  // the K tile at shared address k_tile (the stage; 1024-aligned, TMA's 128-byte swizzle) and the
  // Q terms at q_terms. Issued by the whole warpgroup (the four compute warps);
  // wait_wgmma_scores waits for it.
  __device__ __forceinline__ void issue_wgmma_scores(float (&s)[8], uint32_t k_tile,
                                                     uint32_t q_terms) {
#ifdef QUENCH_SM90A_ENABLED
    constexpr bool kE5m2 = T::kFp8 == Fp8Kind::kE5M2;
    const uint64_t k_desc = sm90::smem_descriptor_sw128(k_tile);
    const uint64_t q_desc = sm90::smem_descriptor_sw128(q_terms);
    sm90::wgmma_fence();  // the previous tile's reads of s come first
#pragma unroll
    for (int ks = 0; ks < kQkSteps32; ++ks) {
      sm90::wgmma_m64n16k32_f8_e4m3_ss<kE5m2>(s, sm90::descriptor_plus(k_desc, 32 * ks),
                                              sm90::descriptor_plus(q_desc, 32 * ks), ks > 0);
    }
    sm90::wgmma_commit_group();
#else
    __trap();  // the host runs kWgmmaQk on sm_90 only
#endif
  }
  __device__ __forceinline__ void wait_wgmma_scores(float (&s)[8]) {
#ifdef QUENCH_SM90A_ENABLED
    sm90::wgmma_wait_group<0>();
    sm90::fence_registers(s);  // no read of s moves above the wait
#endif
  }

  // Writes the warp's statistics and unnormalised O rows where the kernel's combine step reads
  // them: stat_max / stat_sum [kWarps][kRowsPerCta], combine [kWarps][kRowsPerCta][kCombineStride]
  // (fp32; rows >= kSwappedMaxRows untouched).
  __device__ __forceinline__ void store(float* stat_max, float* stat_sum, float* combine, int warp,
                                        int lane) {
    const int g = lane / 4;
    const int c = lane % 4;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      row_sum[i] += __shfl_xor_sync(0xffffffffu, row_sum[i], 4);
      row_sum[i] += __shfl_xor_sync(0xffffffffu, row_sum[i], 8);
      row_sum[i] += __shfl_xor_sync(0xffffffffu, row_sum[i], 16);
    }
    if (g == 0) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        stat_max[warp * kRowsPerCta + 2 * c + i] = row_max[i];
        stat_sum[warp * kRowsPerCta + 2 * c + i] = row_sum[i];
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = 2 * c + (e & 1);
        const int d =
            T::kFp8Kv ? T::v_output_column(2 * mt + (e >> 1), g) : 16 * mt + 8 * (e >> 1) + g;
        combine[(warp * kRowsPerCta + row) * T::kCombineStride + d] = o_acc[mt][e];
      }
    }
  }
};

}  // namespace quench::decode
