#include "quench/ops/attention/attention_reference.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/kv_cache/block_table.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/attention/attention_output.h"

namespace quench {
namespace {

bool is_positive_finite(float x) {
  return std::isfinite(x) && x > 0.0f;
}

void validate_dtypes(const AttentionParams& p) {
  const DType q = p.q_dtype;
  QUENCH_REQUIRE(q == DType::kBF16 || q == DType::kF16 || is_fp8(q), "attention q_dtype ",
                 dtype_name(q), " is not supported; allowed: bf16, f16, fp8_e4m3, fp8_e5m2");
  // No kernel multiplies an FP8 query with a 16-bit cache, or f16 with bf16.
  QUENCH_REQUIRE(!is_fp8(q) || is_fp8(p.kv.dtype), "attention q_dtype ", dtype_name(q),
                 " with KV dtype ", dtype_name(p.kv.dtype),
                 " is not supported; an FP8 query needs KV dtype fp8_e4m3 or fp8_e5m2");
  QUENCH_REQUIRE(q != DType::kF16 || is_fp8(p.kv.dtype), "attention q_dtype f16 with KV dtype ",
                 dtype_name(p.kv.dtype),
                 " is not supported; an f16 query needs KV dtype fp8_e4m3 or fp8_e5m2");
  const DType o = p.out_dtype;
  QUENCH_REQUIRE(o == DType::kBF16 || is_fp8(o) || o == DType::kNVFP4, "attention out_dtype ",
                 dtype_name(o), " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2, nvfp4");
}

// The per-tensor value only: a per_head array may be device memory (GPU launchers).
void validate_per_tensor_scale(const char* name, const HeadScales& scales) {
  if (scales.per_head != nullptr) return;
  QUENCH_REQUIRE(is_positive_finite(scales.per_tensor), "attention ", name, ".per_tensor ",
                 scales.per_tensor, " is invalid; allowed: finite and > 0");
}

void validate_per_head_scales(const char* name, const HeadScales& scales, int32_t num_kv_heads) {
  if (scales.per_head == nullptr) return;
  for (int32_t h = 0; h < num_kv_heads; ++h) {
    QUENCH_REQUIRE(is_positive_finite(scales.per_head[h]), "attention ", name, ".per_head[", h,
                   "] ", scales.per_head[h], " is invalid; allowed: finite and > 0");
  }
}

void validate_sinks(const AttentionParams& p) {
  if (p.sinks == nullptr) return;
  for (int32_t h = 0; h < p.num_q_heads; ++h) {
    QUENCH_REQUIRE(std::isfinite(p.sinks[h]), "attention sinks[", h, "] ", p.sinks[h],
                   " is invalid; allowed: finite");
  }
}

void validate_sequence(const AttentionParams& p, int32_t b) {
  const int32_t q_len = p.q_offsets[b + 1] - p.q_offsets[b];
  QUENCH_REQUIRE(q_len >= 0, "attention q_offsets is not non-decreasing at seq ", b, ": q_offsets[",
                 b, "] = ", p.q_offsets[b], " > q_offsets[", b + 1, "] = ", p.q_offsets[b + 1]);
  const int32_t seq_len = p.seq_lens[b];
  QUENCH_REQUIRE(seq_len >= 0, "attention seq_lens[", b, "] ", seq_len,
                 " is invalid; allowed: >= 0");
  QUENCH_REQUIRE(q_len <= seq_len, "attention seq ", b, " has q_len ", q_len, " > seq_lens[", b,
                 "] ", seq_len, "; allowed: q_len <= seq_len (new tokens are in the cache)");
  QUENCH_REQUIRE(q_len <= p.max_q_len, "attention seq ", b, " has q_len ", q_len, " > max_q_len ",
                 p.max_q_len, "; allowed: max_q_len >= every q_len");
  QUENCH_REQUIRE(seq_len <= p.max_seq_len, "attention seq_lens[", b, "] ", seq_len,
                 " > max_seq_len ", p.max_seq_len, "; allowed: max_seq_len >= every seq_len");
  // In int64: seq_len + page_size - 1 overflows int32 for the longest seq_lens.
  const int64_t pages = pages_for_tokens(seq_len, p.kv.page_size);
  QUENCH_REQUIRE(pages <= p.block_table_stride, "attention seq ", b, " with seq_len ", seq_len,
                 " needs ", pages, " pages of ", p.kv.page_size,
                 " tokens but block_table_stride is ", p.block_table_stride,
                 "; allowed: block_table_stride >= ", pages);
  for (int32_t i = 0; i < pages; ++i) {
    const int32_t page = p.block_table[static_cast<int64_t>(b) * p.block_table_stride + i];
    QUENCH_REQUIRE(page >= 1 && page < p.kv.num_pages, "attention block_table[", b, "][", i,
                   "] = page ", page, " is out of range; allowed: 1..", p.kv.num_pages - 1,
                   " (page 0 is the reserved null page)");
  }
}

// The sequence a query row belongs to and its absolute position in that sequence.
struct RowContext {
  int32_t seq;
  int32_t pos;
};

float load_element(const void* base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kBF16:
      return to_float(static_cast<const bf16*>(base)[index]);
    case DType::kF16:
      return to_float(static_cast<const f16*>(base)[index]);
    case DType::kFP8E4M3:
      return fp8_e4m3_to_float(static_cast<const uint8_t*>(base)[index]);
    default:
      return fp8_e5m2_to_float(static_cast<const uint8_t*>(base)[index]);
  }
}

// Attention of one (token, q head): writes head_dim floats to o and returns the log-sum-exp.
float attend_one(const AttentionParams& p, const RowContext& row, int64_t token, int32_t q_head,
                 float* o) {
  const int32_t head_dim = p.kv.head_dim;
  const int32_t kv_head = q_head / (p.num_q_heads / p.kv.num_kv_heads);
  // Scores are dot(stored q, stored k) times one combined scale, as kernels compute them
  // (SPEC §1.2); the sums over keys are double so that the oracle's own error stays negligible.
  const float q_scale_eff = is_fp8(p.q_dtype) ? p.q_scale : 1.0f;
  const float score_scale = p.sm_scale * q_scale_eff * p.k_scale.at(kv_head);

  std::vector<float> q(static_cast<size_t>(head_dim));
  const int64_t q_base = (token * p.num_q_heads + q_head) * head_dim;
  for (int32_t d = 0; d < head_dim; ++d)
    q[d] = load_element(p.q, p.q_dtype, q_base + d);

  const int32_t first = p.window_left >= 0 ? std::max(0, row.pos - p.window_left) : 0;
  const int32_t last = row.pos;
  const int32_t* pages = p.block_table + static_cast<int64_t>(row.seq) * p.block_table_stride;
  auto kv_row = [&](int32_t j) {  // element offset of key/value position j, dim 0
    return p.kv.offset(pages[j / p.kv.page_size], j % p.kv.page_size, kv_head, 0);
  };

  std::vector<float> scores(static_cast<size_t>(last - first + 1));
  float max_score = p.sinks != nullptr ? p.sinks[q_head] : -INFINITY;
  for (int32_t j = first; j <= last; ++j) {
    const int64_t k_row = kv_row(j);
    float dot = 0.0f;
    for (int32_t d = 0; d < head_dim; ++d) {
      dot += q[d] * load_element(p.k_cache, p.kv.dtype, k_row + d);
    }
    float s = dot * score_scale;
    if (p.logit_soft_cap > 0.0f) s = p.logit_soft_cap * std::tanh(s / p.logit_soft_cap);
    scores[j - first] = s;
    max_score = std::max(max_score, s);
  }

  double denominator = p.sinks != nullptr ? std::exp(double{p.sinks[q_head]} - max_score) : 0.0;
  std::vector<double> acc(static_cast<size_t>(head_dim), 0.0);
  for (int32_t j = first; j <= last; ++j) {
    const double weight = std::exp(double{scores[j - first]} - max_score);
    denominator += weight;
    const int64_t v_row = kv_row(j);
    for (int32_t d = 0; d < head_dim; ++d) {
      acc[d] += weight * load_element(p.v_cache, p.kv.dtype, v_row + d);
    }
  }
  const double v_scale = p.v_scale.at(kv_head);
  for (int32_t d = 0; d < head_dim; ++d)
    o[d] = static_cast<float>(acc[d] * v_scale / denominator);
  return static_cast<float>(std::log(denominator) + max_score);
}

}  // namespace

void validate_attention_scalars(const AttentionParams& p) {
  QUENCH_REQUIRE(is_positive_finite(p.sm_scale), "attention sm_scale ", p.sm_scale,
                 " is invalid; allowed: finite and > 0 (typically 1/sqrt(head_dim))");
  if (is_fp8(p.q_dtype)) {
    QUENCH_REQUIRE(is_positive_finite(p.q_scale), "attention q_scale ", p.q_scale,
                   " is invalid for an FP8 query; allowed: finite and > 0");
  }
  validate_per_tensor_scale("k_scale", p.k_scale);
  validate_per_tensor_scale("v_scale", p.v_scale);
  QUENCH_REQUIRE(p.window_left >= -1, "attention window_left ", p.window_left,
                 " is invalid; allowed: -1 (no window) or >= 0");
  QUENCH_REQUIRE(std::isfinite(p.logit_soft_cap) && p.logit_soft_cap >= 0.0f,
                 "attention logit_soft_cap ", p.logit_soft_cap,
                 " is invalid; allowed: 0 (off) or finite and > 0");
  if (is_fp8(p.out_dtype)) {
    QUENCH_REQUIRE(is_positive_finite(p.o_scale), "attention o_scale ", p.o_scale,
                   " is invalid for FP8 output; allowed: finite and > 0");
  }
  if (p.out_fp8.requested()) {
    QUENCH_REQUIRE(p.out_dtype == DType::kBF16, "attention out_fp8 needs bf16 output (its codes ",
                   "quantize the bf16 rows); out_dtype is ", dtype_name(p.out_dtype),
                   "; allowed: bf16");
    const int64_t width = static_cast<int64_t>(p.num_q_heads) * p.kv.head_dim;
    QUENCH_REQUIRE(width <= INT32_MAX, "attention out_fp8: rows of ", width,
                   " elements are too wide; allowed: at most 2^31 - 1");
    check_fp8_rows_out("attention out_fp8", p.out_fp8, p.num_tokens, static_cast<int32_t>(width));
    QUENCH_REQUIRE(p.out_fp8.padded_rows(p.num_tokens) == p.num_tokens,
                   "attention out_fp8: padded_rows ", p.out_fp8.layout.padded_rows,
                   " differs from num_tokens ", p.num_tokens,
                   "; allowed: 0 or num_tokens (attention writes no padding rows)");
  }
  if (p.out_dtype != DType::kNVFP4) return;
  // head_dim in {64, 128, 256} makes every row a whole number of 16-element NVFP4 blocks.
  QUENCH_REQUIRE(p.out_block_scales != nullptr,
                 "attention out_block_scales is null; NVFP4 output needs the scale tensor");
  QUENCH_REQUIRE(is_positive_finite(p.nvfp4_global_scale), "attention nvfp4_global_scale ",
                 p.nvfp4_global_scale, " is invalid; allowed: finite and > 0");
  QUENCH_REQUIRE(p.out_scale_row_offset >= 0, "attention out_scale_row_offset ",
                 p.out_scale_row_offset, " is invalid; allowed: >= 0");
  QUENCH_REQUIRE(static_cast<int64_t>(p.out_scale_row_offset) + p.num_tokens <= p.out_scale_rows,
                 "attention out_scale_row_offset ", p.out_scale_row_offset, " + num_tokens ",
                 p.num_tokens, " exceeds out_scale_rows ", p.out_scale_rows,
                 "; allowed: offset + num_tokens <= out_scale_rows");
}

void validate_attention_params(const AttentionParams& p) {
  QUENCH_REQUIRE(p.q != nullptr, "attention q is null; allowed: a query tensor");
  QUENCH_REQUIRE(p.k_cache != nullptr, "attention k_cache is null; allowed: a paged K tensor");
  QUENCH_REQUIRE(p.v_cache != nullptr, "attention v_cache is null; allowed: a paged V tensor");
  QUENCH_REQUIRE(p.out != nullptr || p.out_fp8.requested(),
                 "attention out is null; allowed: an output tensor (null only with out_fp8)");
  QUENCH_REQUIRE(p.q_offsets != nullptr, "attention q_offsets is null; allowed: [num_seqs + 1]");
  QUENCH_REQUIRE(p.seq_lens != nullptr, "attention seq_lens is null; allowed: [num_seqs]");
  QUENCH_REQUIRE(p.block_table != nullptr,
                 "attention block_table is null; allowed: [num_seqs, block_table_stride]");
  p.kv.validate();
  validate_dtypes(p);
  QUENCH_REQUIRE(p.num_q_heads >= 1 && p.num_q_heads % p.kv.num_kv_heads == 0,
                 "attention num_q_heads ", p.num_q_heads,
                 " is invalid; allowed: a positive multiple of num_kv_heads ", p.kv.num_kv_heads);
  QUENCH_REQUIRE(p.num_seqs >= 1, "attention num_seqs ", p.num_seqs, " is invalid; allowed: >= 1");
  QUENCH_REQUIRE(p.q_offsets[0] == 0, "attention q_offsets[0] ", p.q_offsets[0],
                 " is invalid; allowed: 0");
  QUENCH_REQUIRE(p.q_offsets[p.num_seqs] == p.num_tokens,
                 "attention q_offsets[num_seqs=", p.num_seqs, "] ", p.q_offsets[p.num_seqs],
                 " != num_tokens ", p.num_tokens, "; allowed: equal");
  QUENCH_REQUIRE(p.block_table_stride >= 1, "attention block_table_stride ", p.block_table_stride,
                 " is invalid; allowed: >= 1");
  for (int32_t b = 0; b < p.num_seqs; ++b)
    validate_sequence(p, b);
  validate_attention_scalars(p);
  validate_per_head_scales("k_scale", p.k_scale, p.kv.num_kv_heads);
  validate_per_head_scales("v_scale", p.v_scale, p.kv.num_kv_heads);
  validate_sinks(p);
}

void attention_reference(const AttentionParams& p) {
  validate_attention_params(p);
  std::vector<RowContext> rows(static_cast<size_t>(p.num_tokens));
  for (int32_t b = 0; b < p.num_seqs; ++b) {
    const int32_t q_len = p.q_offsets[b + 1] - p.q_offsets[b];
    for (int32_t i = 0; i < q_len; ++i) {
      rows[p.q_offsets[b] + i] = RowContext{b, p.seq_lens[b] - q_len + i};
    }
  }

  const int64_t row_elems = static_cast<int64_t>(p.num_q_heads) * p.kv.head_dim;
  std::vector<float> o(static_cast<size_t>(p.num_tokens * row_elems));
  parallel_for(static_cast<int64_t>(p.num_tokens) * p.num_q_heads, [&](int64_t i) {
    const int64_t token = i / p.num_q_heads;
    const int32_t head = static_cast<int32_t>(i % p.num_q_heads);
    const float lse = attend_one(p, rows[token], token, head, &o[i * p.kv.head_dim]);
    if (p.lse != nullptr) p.lse[i] = lse;
  });

  write_attention_outputs(p, o);
}

}  // namespace quench
