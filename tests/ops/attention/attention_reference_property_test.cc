// Properties of the attention reference on random paged problems: agreement with an independent
// float64 formula, decode = last prefill row, independence of paging, GQA = repeated KV heads,
// padding, NVFP4 output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "naive_attention.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"
#include "quench/ops/attention/attention_reference.h"

namespace quench::testing_support {
namespace {

// A mixed batch: prefill chunks with cached prefixes, decode steps, and a padding sequence.
std::vector<SeqShape> mixed_seqs() {
  return {{7, 40}, {1, 23}, {0, 0}, {16, 16}, {1, 1}, {3, 70}};
}

struct NamedConfig {
  std::string name;
  AttentionProblemConfig config;
};

std::vector<NamedConfig> naive_cases() {
  std::vector<NamedConfig> cases;
  {
    AttentionProblemConfig c;
    c.seqs = random_decode_seqs(5, 1, 90, 11);
    c.head_dim = 128;
    cases.push_back({"bf16_decode_gqa4_hd128", c});
  }
  {
    AttentionProblemConfig c;
    c.seqs = mixed_seqs();
    c.q_dtype = c.kv_dtype = DType::kFP8E4M3;
    c.q_scale = 0.05f;
    c.k_scale = 0.03f;
    c.v_scale = 0.02f;
    c.layout = KvLayout::kHND;
    c.page_size = 32;
    cases.push_back({"fp8e4m3_mixed_hnd_p32_bf16out", c});
  }
  {
    AttentionProblemConfig c;
    c.seqs = mixed_seqs();
    c.q_dtype = c.kv_dtype = c.out_dtype = DType::kFP8E5M2;
    c.q_scale = 0.3f;
    c.k_scale = 0.2f;
    c.v_scale = 0.1f;
    c.o_scale = 0.01f;
    c.per_head_kv_scales = true;
    c.num_q_heads = 6;
    c.num_kv_heads = 3;
    cases.push_back({"fp8e5m2_perhead_fp8out", c});
  }
  {
    AttentionProblemConfig c;
    c.seqs = mixed_seqs();
    c.q_dtype = DType::kF16;
    c.q_scale = 9.0f;  // must be ignored for a 16-bit query
    c.kv_dtype = c.out_dtype = DType::kFP8E4M3;
    c.k_scale = 0.04f;
    c.v_scale = 0.05f;
    c.o_scale = 0.02f;
    c.sinks = true;
    c.window_left = 5;
    c.page_size = 64;
    cases.push_back({"f16q_fp8kv_sinks_window5_p64", c});
  }
  {
    AttentionProblemConfig c;
    c.seqs = {{5, 30}, {1, 12}, {2, 2}};
    c.kv_dtype = DType::kFP8E5M2;
    c.q_scale = 3.0f;  // must be ignored for a 16-bit query
    c.k_scale = 0.5f;
    c.v_scale = 2.0f;
    c.logit_soft_cap = 2.0f;
    c.window_left = 0;
    c.head_dim = 256;
    c.num_q_heads = 4;
    c.num_kv_heads = 4;
    c.layout = KvLayout::kHND;
    cases.push_back({"bf16q_fp8kv_softcap_window0_hd256", c});
  }
  {
    AttentionProblemConfig c;
    c.seqs = random_prefill_seqs(3, 1, 20, 50, 12);
    c.q_dtype = DType::kFP8E4M3;
    c.kv_dtype = DType::kFP8E5M2;
    c.q_scale = 0.04f;
    c.k_scale = 0.1f;
    c.v_scale = 0.07f;
    c.per_head_kv_scales = true;
    c.sinks = true;
    c.logit_soft_cap = 3.0f;
    c.window_left = 17;
    c.sm_scale = 0.3f;
    c.num_q_heads = 16;
    c.num_kv_heads = 2;
    cases.push_back({"fp8_mixed_formats_everything_on", c});
  }
  return cases;
}

// Rounding of the naive value to the output dtype bounds the difference (half an ulp relative;
// the fp32 reference adds far less).
Tolerance output_rounding(const AttentionProblemConfig& c) {
  switch (c.out_dtype) {
    case DType::kFP8E4M3:
      return {1.0 / 16, 0.001953125 * c.o_scale};
    case DType::kFP8E5M2:
      return {1.0 / 8, 1.52587890625e-05 * c.o_scale};
    default:
      return {1.0 / 256, 1e-5};
  }
}

TEST(AttentionReferenceProperty, MatchesFloat64Naive) {
  for (const NamedConfig& named : naive_cases()) {
    SCOPED_TRACE(named.name);
    AttentionProblem problem(named.config);
    problem.compute_reference();
    const AttentionProblemConfig& c = named.config;
    const int64_t heads = c.num_q_heads;
    std::vector<float> naive_o(static_cast<size_t>(problem.num_tokens() * heads * c.head_dim));
    std::vector<float> naive_lse(static_cast<size_t>(problem.num_tokens() * heads));
    for (int64_t t = 0; t < problem.num_tokens(); ++t) {
      for (int32_t h = 0; h < c.num_q_heads; ++h) {
        const NaiveRow row = naive_attention_row(problem, t, h);
        for (int32_t d = 0; d < c.head_dim; ++d) {
          naive_o[(t * heads + h) * c.head_dim + d] = static_cast<float>(row.o[d]);
        }
        naive_lse[t * heads + h] = static_cast<float>(row.lse);
      }
    }
    const std::vector<float> actual = problem.expected_values();
    const CompareResult o = compare_values(actual.data(), naive_o.data(), problem.num_tokens(),
                                           heads, c.head_dim, output_rounding(c));
    EXPECT_TRUE(o.ok) << o.summary();
    const CompareResult lse = compare_values(problem.expected_lse().data(), naive_lse.data(),
                                             problem.num_tokens(), heads, 1, {1e-5, 1e-5});
    EXPECT_TRUE(lse.ok) << lse.summary();
  }
}

// Runs the reference for query row `token` alone, as a decode step of its sequence (seq_len cut
// to the row's position + 1), and returns the stored output row and lse.
std::pair<std::vector<uint8_t>, std::vector<float>> decode_row(const AttentionProblem& problem,
                                                               int64_t token) {
  const AttentionProblemConfig& c = problem.config();
  const int64_t row_bytes = attention_output_row_bytes(problem.output_format());
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes), 0xff);
  std::vector<float> lse(static_cast<size_t>(c.num_q_heads), NAN);
  AttentionParams p = problem.host_params(out.data(), nullptr, lse.data());
  const int32_t seq = problem.seq_of_token(token);
  const std::vector<int32_t> q_offsets{0, 1};
  const std::vector<int32_t> seq_lens{problem.pos_of_token(token) + 1};
  p.q = problem.q_bytes().data() +
        dtype_bytes(c.q_dtype, static_cast<size_t>(token * c.num_q_heads * c.head_dim));
  p.num_seqs = 1;
  p.num_tokens = 1;
  p.q_offsets = q_offsets.data();
  p.seq_lens = seq_lens.data();
  p.block_table =
      problem.block_table().data() + static_cast<int64_t>(seq) * problem.block_table_stride();
  p.max_q_len = 1;
  attention_reference(p);
  return {out, lse};
}

TEST(AttentionReferenceProperty, DecodeOfTokenTEqualsLastRowOfPrefill) {
  for (DType out_dtype : {DType::kBF16, DType::kFP8E4M3}) {
    AttentionProblemConfig c;
    c.seqs = {{12, 30}, {9, 9}};
    c.q_dtype = c.kv_dtype = DType::kFP8E4M3;
    c.q_scale = 0.05f;
    c.k_scale = 0.03f;
    c.v_scale = 0.02f;
    c.o_scale = 0.01f;
    c.out_dtype = out_dtype;
    c.window_left = 20;
    c.sinks = true;
    c.logit_soft_cap = 4.0f;
    AttentionProblem problem(c);
    problem.compute_reference();
    const int64_t row_bytes = attention_output_row_bytes(problem.output_format());
    for (int64_t t = 0; t < problem.num_tokens(); ++t) {
      SCOPED_TRACE("token " + std::to_string(t) + " out " + dtype_name(out_dtype));
      const auto [out, lse] = decode_row(problem, t);
      EXPECT_EQ(0, std::memcmp(out.data(), problem.expected_out().data() + t * row_bytes,
                               static_cast<size_t>(row_bytes)));
      for (int32_t h = 0; h < c.num_q_heads; ++h) {
        EXPECT_EQ(lse[h], problem.expected_lse()[t * c.num_q_heads + h]) << "head " << h;
      }
    }
  }
}

TEST(AttentionReferenceProperty, IndependentOfPageSizeLayoutAndPermutation) {
  AttentionProblemConfig base;
  base.seqs = mixed_seqs();
  base.q_dtype = base.kv_dtype = DType::kFP8E4M3;
  base.q_scale = 0.05f;
  base.k_scale = 0.03f;
  base.v_scale = 0.02f;
  base.per_head_kv_scales = true;
  AttentionProblem reference(base);
  reference.compute_reference();
  for (int32_t page_size : {16, 32, 64}) {
    for (KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
      for (int32_t spare_pages : {0, 7}) {
        AttentionProblemConfig c = base;
        c.page_size = page_size;
        c.layout = layout;
        c.spare_pages = spare_pages;
        SCOPED_TRACE(std::string(kv_layout_name(layout)) + " page " + std::to_string(page_size) +
                     " spare " + std::to_string(spare_pages));
        AttentionProblem problem(c);
        if (page_size == base.page_size) {
          EXPECT_NE(problem.block_table(), reference.block_table()) << "pages not re-permuted";
        }
        problem.compute_reference();
        EXPECT_EQ(problem.expected_out(), reference.expected_out());
        EXPECT_EQ(problem.expected_lse(), reference.expected_lse());
      }
    }
  }
}

// Copies a cache with num_kv_heads heads into one with num_kv_heads * group heads, where new
// head h holds old head h / group.
std::vector<uint8_t> repeat_kv_heads(const std::vector<uint8_t>& cache, const KvCacheLayout& from,
                                     const KvCacheLayout& to, int32_t group) {
  const size_t elem = dtype_bytes(from.dtype, 1);
  std::vector<uint8_t> out(static_cast<size_t>(to.tensor_bytes()));
  for (int32_t page = 0; page < from.num_pages; ++page) {
    for (int32_t token = 0; token < from.page_size; ++token) {
      for (int32_t h = 0; h < to.num_kv_heads; ++h) {
        std::memcpy(&out[to.offset(page, token, h, 0) * elem],
                    &cache[from.offset(page, token, h / group, 0) * elem],
                    elem * static_cast<size_t>(from.head_dim));
      }
    }
  }
  return out;
}

TEST(AttentionReferenceProperty, GqaGroupOfFourEqualsRepeatedKvHeads) {
  for (KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
    AttentionProblemConfig c;
    c.seqs = mixed_seqs();
    c.num_q_heads = 8;
    c.num_kv_heads = 2;
    c.kv_dtype = DType::kFP8E4M3;
    c.k_scale = 0.03f;
    c.v_scale = 0.02f;
    c.per_head_kv_scales = true;
    c.layout = layout;
    AttentionProblem problem(c);
    problem.compute_reference();

    KvCacheLayout mha = problem.kv_layout();
    mha.num_kv_heads = 8;
    const std::vector<uint8_t> k =
        repeat_kv_heads(problem.k_cache_bytes(), problem.kv_layout(), mha, 4);
    const std::vector<uint8_t> v =
        repeat_kv_heads(problem.v_cache_bytes(), problem.kv_layout(), mha, 4);
    std::vector<float> k_scales, v_scales;
    for (int32_t h = 0; h < 8; ++h) {
      k_scales.push_back(problem.k_head_scales()[h / 4]);
      v_scales.push_back(problem.v_head_scales()[h / 4]);
    }
    std::vector<uint8_t> out = problem.poisoned_out();
    std::vector<float> lse = problem.poisoned_lse();
    AttentionParams p = problem.host_params(out.data(), nullptr, lse.data());
    p.kv = mha;
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.k_scale.per_head = k_scales.data();
    p.v_scale.per_head = v_scales.data();
    attention_reference(p);
    EXPECT_EQ(out, problem.expected_out()) << kv_layout_name(layout);
    EXPECT_EQ(lse, problem.expected_lse()) << kv_layout_name(layout);
  }
}

TEST(AttentionReferenceProperty, AllPaddingBatchWritesNothing) {
  AttentionProblemConfig c;
  c.seqs = {{0, 0}, {0, 0}, {0, 0}};
  AttentionProblem problem(c);
  problem.compute_reference();
  EXPECT_EQ(problem.num_tokens(), 0);
  EXPECT_EQ(problem.expected_out(), problem.poisoned_out());
}

TEST(AttentionReferenceProperty, PaddingSequencesDoNotChangeTheOthers) {
  AttentionProblemConfig c;
  c.seqs = {{4, 20}, {1, 9}};
  AttentionProblem plain(c);
  plain.compute_reference();
  // Padding sequences after the real ones keep the real ones' random values.
  c.seqs = {{4, 20}, {1, 9}, {0, 0}, {0, 0}};
  AttentionProblem padded(c);
  padded.compute_reference();
  EXPECT_EQ(padded.expected_lse(), plain.expected_lse());
  const auto& a = padded.expected_out();
  const auto& b = plain.expected_out();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a, b);
}

TEST(AttentionReferenceProperty, Nvfp4OutputDecodesToTheBf16Result) {
  AttentionProblemConfig c;
  c.seqs = mixed_seqs();
  c.q_dtype = c.kv_dtype = DType::kFP8E4M3;
  c.q_scale = 0.05f;
  c.k_scale = 0.03f;
  c.v_scale = 0.02f;
  c.out_scale_row_offset = 130;  // rows in the second 128-row tile of the swizzled layout
  AttentionProblem bf16_problem(c);
  bf16_problem.compute_reference();
  c.out_dtype = DType::kNVFP4;
  AttentionProblem nvfp4_problem(c);
  nvfp4_problem.compute_reference();

  const std::vector<float> exact = bf16_problem.expected_values();
  const std::vector<float> quantized = nvfp4_problem.expected_values();
  ASSERT_EQ(exact.size(), quantized.size());
  // Per 16-element block the error is at most one e2m1 unit of block_scale / gs ~ amax / 6,
  // times the e4m3 rounding of the block scale (1 + 1/16), plus bf16 rounding of `exact`.
  for (size_t block = 0; block < exact.size() / kNvfp4BlockSize; ++block) {
    float amax = 0.0f;
    for (int i = 0; i < kNvfp4BlockSize; ++i) {
      amax = std::max(amax, std::fabs(exact[block * kNvfp4BlockSize + i]));
    }
    for (int i = 0; i < kNvfp4BlockSize; ++i) {
      const size_t k = block * kNvfp4BlockSize + i;
      ASSERT_LE(std::fabs(quantized[k] - exact[k]), amax / 6 * (1 + 1.0 / 16) + 0.01 * amax)
          << "element " << k << " block amax " << amax;
    }
  }
  // Scale rows of this batch are all written; every other byte of the tensor stays zero.
  const AttentionOutputFormat format = nvfp4_problem.output_format();
  const int64_t cols = format.row_elems / kNvfp4BlockSize;
  std::vector<bool> in_batch(nvfp4_problem.expected_block_scales().size(), false);
  for (int64_t t = 0; t < nvfp4_problem.num_tokens(); ++t) {
    for (int64_t col = 0; col < cols; ++col) {
      const int64_t offset = nvfp4_scale_offset(c.out_scale_row_offset + t, col, cols);
      in_batch[offset] = true;
      EXPECT_FALSE(std::isnan(fp8_e4m3_to_float(nvfp4_problem.expected_block_scales()[offset])));
    }
  }
  for (size_t i = 0; i < in_batch.size(); ++i) {
    if (!in_batch[i]) {
      EXPECT_EQ(nvfp4_problem.expected_block_scales()[i], 0) << "byte " << i;
    }
  }
}

}  // namespace
}  // namespace quench::testing_support
