// Parameters of paged attention over a ragged batch, shared by the CPU reference and every GPU
// kernel (pointers are host memory for the reference, device memory for kernels).
//
// The batch holds num_seqs sequences; sequence b owns query rows [q_offsets[b], q_offsets[b+1])
// (q_len_b rows: 1 for a decode step, a chunk for prefill) and attends to its first seq_lens[b]
// cached tokens (the new tokens included, already appended to the cache). Query row i of b sits
// at absolute position p = seq_lens[b] - q_len_b + i and sees key positions j with
//   j <= p                  (causal; the cached prefix is visible to every new row)
//   j >= p - window_left    (only when window_left >= 0: a sliding window of window_left + 1)
// A sequence with seq_lens[b] == 0 and q_len_b == 0 is graph padding: nothing is read or written.
//
// Scores and output (SPEC §1.2):
//   s_j = dot(q, k_j) * sm_scale * q_scale_eff * k_scale(h_kv)
//         q_scale_eff = q_scale for an FP8 query, 1 for bf16/f16 (q_scale is then ignored)
//   s_j = soft_cap * tanh(s_j / soft_cap)          when logit_soft_cap > 0
//   o   = sum_j softmax(s)_j * v_j * v_scale(h_kv)  (softmax includes exp(sink - max) in its
//                                                   denominator when sinks != nullptr)
//   output bf16: o;  FP8: fp8(o / o_scale);  NVFP4: SPEC §1.3 with nvfp4_global_scale;
//   out_fp8 (bf16 output): e4m3(bf16(o) / s) with s = amax / 448 over each group of a row.
#pragma once

#include <cstdint>

#include "quench/core/dtype.h"
#include "quench/core/head_scales.h"
#include "quench/kv_cache/kv_cache_layout.h"
#include "quench/ops/quantize/fp8_rows_out.h"

namespace quench {

struct AttentionParams {
  // Query: [num_tokens, num_q_heads, head_dim], row-major, dtype q_dtype (bf16, f16, fp8_e4m3,
  // fp8_e5m2). An FP8 query holds fp8(q / q_scale).
  const void* q = nullptr;
  DType q_dtype = DType::kBF16;
  float q_scale = 1.0f;  // multiplies (dequantizes) an FP8 query; unused for bf16/f16

  // Paged cache, layout `kv` (see kv_cache_layout.h). Dequantized = stored * scale.
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  KvCacheLayout kv;
  HeadScales k_scale;
  HeadScales v_scale;

  int32_t num_q_heads = 0;  // multiple of kv.num_kv_heads; q head h reads KV head h / group
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;                // q_offsets[num_seqs]
  const int32_t* q_offsets = nullptr;    // [num_seqs + 1], non-decreasing, q_offsets[0] == 0
  const int32_t* seq_lens = nullptr;     // [num_seqs], KV tokens incl. the new ones
  const int32_t* block_table = nullptr;  // [num_seqs, block_table_stride] page ids
  int32_t block_table_stride = 0;
  int32_t max_q_len = 0;    // max over b of q_len_b (kernels size their grids with it)
  int32_t max_seq_len = 0;  // max over b of seq_lens[b]

  float sm_scale = 0.0f;         // typically 1/sqrt(head_dim)
  int32_t window_left = -1;      // -1: no sliding window
  float logit_soft_cap = 0.0f;   // 0: no soft-cap
  const float* sinks = nullptr;  // [num_q_heads] attention-sink logits, or nullptr

  // Output: [num_tokens, num_q_heads, head_dim] in out_dtype (bf16, fp8_e4m3, fp8_e5m2), or for
  // nvfp4 packed bytes [num_tokens, num_q_heads*head_dim/2] plus out_block_scales. A buffer of
  // its own: it never overlaps q (the decode kernel rejects that).
  void* out = nullptr;
  DType out_dtype = DType::kBF16;
  float o_scale = 1.0f;  // FP8 output: stored = fp8(o / o_scale) (divides)
  // NVFP4 output: swizzled e4m3 scales [round_up(rows,128), round_up(H*D/16,4)] (SPEC §1.3);
  // this batch's token t writes scale row out_scale_row_offset + t.
  uint8_t* out_block_scales = nullptr;
  int32_t out_scale_rows = 0;  // total rows of the shared scale tensor
  int32_t out_scale_row_offset = 0;
  float nvfp4_global_scale = 1.0f;  // multiplies before quantization
  // Optional, with bf16 output: the output rows also (or only, where out is null) as the e4m3
  // rows and scales of an FP8 GEMM's input (fp8_rows_out.h), the codes quantize_fp8_dynamic would
  // write from the bf16 output, bit for bit; so the o projection's input needs no pass of its
  // own. Padded rows, if any, equal num_tokens (attention writes no padding rows). Kernels that
  // cannot write it refuse it (the CPU reference writes any group; the decode kernel 128-column
  // groups at head_dim 128, one group per q head).
  Fp8RowsOut out_fp8;

  // Optional: log-sum-exp per [num_tokens, num_q_heads] (natural log of the softmax denominator
  // plus the max), written when non-null; used to merge split-KV partials.
  float* lse = nullptr;
};

}  // namespace quench
