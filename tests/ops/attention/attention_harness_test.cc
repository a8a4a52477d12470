// The attention harness itself: comparison rules, tolerance table, and the random problems it
// builds (quantization with the configured scales, permuted pages, NaN poison).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"

namespace quench::testing_support {
namespace {

TEST(AttentionHarnessCompare, ToleranceIsAtolPlusRtolTimesExpected) {
  const float expected[3] = {1.0f, -2.0f, 0.0f};
  const float inside[3] = {1.0f + 0.0299f, -2.0f - 0.0399f, 0.0099f};
  EXPECT_TRUE(compare_values(inside, expected, 1, 1, 3, {0.02, 0.01}).ok);
  const float outside[3] = {1.0f, -2.0f - 0.0502f, 0.0f};
  const CompareResult r = compare_values(outside, expected, 1, 1, 3, {0.02, 0.01});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.num_mismatches, 1);
  EXPECT_NEAR(r.max_abs_error, 0.0502, 1e-6);
  EXPECT_NEAR(r.max_rel_error, 0.0251, 1e-6);
}

// FP8 outputs (o_scale 0.02, the stored values 72 and 80 one e4m3 step apart): a whole-step
// difference between the kernel's and the reference's stored values passes only when the
// reference before rounding lies within tolerance plus half a step of the kernel's value, and
// the slack admits nothing without an unrounded reference.
TEST(AttentionHarnessCompare, Fp8RoundingSlackCoversOnlyAFlipAtTheMidpoint) {
  EXPECT_DOUBLE_EQ(fp8_half_step(DType::kFP8E4M3, 1.44, 0.02), 0.5 * 8.0 * 0.02);
  EXPECT_DOUBLE_EQ(fp8_half_step(DType::kFP8E5M2, 1.44, 0.02), 0.5 * 16.0 * 0.02);
  EXPECT_DOUBLE_EQ(fp8_half_step(DType::kFP8E4M3, 0.0, 1.0), 0.5 * std::ldexp(1.0, -9));
  EXPECT_THROW(fp8_half_step(DType::kBF16, 1.0, 1.0), Error);
  const float expected[1] = {1.6f};  // the reference's stored value (80 x 0.02)
  const float actual[1] = {1.44f};   // the kernel's (72 x 0.02)
  const Tolerance tolerance{4e-2, 6e-2};
  EXPECT_FALSE(compare_values(actual, expected, 1, 1, 1, tolerance).ok);
  const float at_midpoint[1] = {1.5201f};  // rounds to 80, a hair above the midpoint 76
  RoundingSlack slack{at_midpoint, DType::kFP8E4M3, 0.02};
  EXPECT_TRUE(compare_values(actual, expected, 1, 1, 1, tolerance, &slack).ok);
  const float two_steps_up[1] = {1.76f};  // the next bin up again: a real error
  slack.unrounded = two_steps_up;
  EXPECT_FALSE(compare_values(actual, expected, 1, 1, 1, tolerance, &slack).ok);
}

// NVFP4 outputs (a block of unit 0.15: codes 2 and 3 are 0.30 and 0.45): a flip between
// neighbouring codes passes only with the reference before rounding near their midpoint 0.375,
// the half step coming from the element's block (e2m1 spacing 0.5 / 1 / 2 below 2 / 4 / 6).
TEST(AttentionHarnessCompare, Nvfp4RoundingSlackCoversOnlyAFlipAtTheMidpoint) {
  EXPECT_DOUBLE_EQ(e2m1_half_step(1.5 * 0.15, 0.15), 0.25 * 0.15);
  EXPECT_DOUBLE_EQ(e2m1_half_step(-3.0 * 0.15, 0.15), 0.5 * 0.15);
  EXPECT_DOUBLE_EQ(e2m1_half_step(6.0 * 0.15, 0.15), 1.0 * 0.15);
  EXPECT_DOUBLE_EQ(e2m1_half_step(1.0, 0.0), 0.0);  // a zero block scale: no slack
  const float expected[1] = {0.45f};                // the reference's code 3
  const float actual[1] = {0.30f};                  // the kernel's code 2
  const float half_steps[1] = {static_cast<float>(e2m1_half_step(0.30, 0.15))};
  const Tolerance tolerance{7e-2, 9e-2};
  EXPECT_FALSE(compare_values(actual, expected, 1, 1, 1, tolerance).ok);
  const float at_midpoint[1] = {0.3751f};
  RoundingSlack slack{at_midpoint, DType::kNVFP4, 1.0, half_steps};
  EXPECT_TRUE(compare_values(actual, expected, 1, 1, 1, tolerance, &slack).ok);
  const float a_step_up[1] = {0.60f};  // code 4's value: a real error
  slack.unrounded = a_step_up;
  EXPECT_FALSE(compare_values(actual, expected, 1, 1, 1, tolerance, &slack).ok);
}

TEST(AttentionHarnessCompare, NanNeverPasses) {
  const float nan_values[2] = {NAN, 1.0f};
  const float values[2] = {1.0f, NAN};
  const float both[2] = {NAN, NAN};
  EXPECT_EQ(compare_values(nan_values, values, 1, 1, 2, {1e9, 1e9}).num_mismatches, 2);
  EXPECT_EQ(compare_values(both, both, 1, 1, 2, {1e9, 1e9}).num_mismatches, 2);
}

TEST(AttentionHarnessCompare, EqualInfinitiesPass) {
  const float a[2] = {INFINITY, -INFINITY};
  const float b[2] = {INFINITY, INFINITY};
  EXPECT_EQ(compare_values(a, b, 1, 1, 2, {0.0, 0.0}).num_mismatches, 1);
}

TEST(AttentionHarnessCompare, ReportsTokenHeadDimOfFirstMismatches) {
  std::vector<float> expected(2 * 3 * 4, 1.0f);
  std::vector<float> actual = expected;
  actual[(1 * 3 + 2) * 4 + 3] = 5.0f;  // token 1, head 2, dim 3
  const CompareResult r = compare_values(actual.data(), expected.data(), 2, 3, 4, {0.01, 0.01});
  ASSERT_EQ(r.first_mismatches.size(), 1u);
  EXPECT_EQ(r.first_mismatches[0].token, 1);
  EXPECT_EQ(r.first_mismatches[0].head, 2);
  EXPECT_EQ(r.first_mismatches[0].dim, 3);
  EXPECT_NE(r.summary().find("token 1 head 2 dim 3: actual 5 expected 1"), std::string::npos)
      << r.summary();
}

TEST(AttentionHarnessCompare, ReportsAtMostEightMismatches) {
  std::vector<float> expected(100, 1.0f), actual(100, 2.0f);
  const CompareResult r = compare_values(actual.data(), expected.data(), 100, 1, 1, {0, 0});
  EXPECT_EQ(r.num_mismatches, 100);
  EXPECT_EQ(r.first_mismatches.size(), 8u);
}

TEST(AttentionHarnessCompare, ToleranceTable) {
  using namespace tolerance;
  auto same = [](Tolerance a, Tolerance b) { return a.rtol == b.rtol && a.atol == b.atol; };
  EXPECT_TRUE(
      same(attention_tolerance(true, DType::kBF16, DType::kBF16, DType::kBF16), kDecodeBf16));
  EXPECT_TRUE(same(attention_tolerance(false, DType::kFP8E4M3, DType::kFP8E4M3, DType::kBF16),
                   {2e-2, 3e-2}));
  EXPECT_TRUE(same(attention_tolerance(true, DType::kFP8E4M3, DType::kFP8E4M3, DType::kFP8E4M3),
                   {3e-2, 4e-2}));
  EXPECT_TRUE(same(attention_tolerance(false, DType::kFP8E4M3, DType::kFP8E4M3, DType::kNVFP4),
                   {3e-1, 4e-1}));
  EXPECT_TRUE(
      same(attention_tolerance(true, DType::kBF16, DType::kFP8E4M3, DType::kBF16), {4e-2, 6e-2}));
}

AttentionProblemConfig fp8_config() {
  AttentionProblemConfig c;
  c.seqs = {{5, 37}, {1, 16}, {0, 0}};
  c.q_dtype = c.kv_dtype = DType::kFP8E4M3;
  c.q_scale = 0.05f;
  c.k_scale = 0.03f;
  c.v_scale = 0.02f;
  c.per_head_kv_scales = true;
  c.out_dtype = DType::kFP8E4M3;
  return c;
}

TEST(AttentionHarnessProblem, QueryIsQuantizedWithQScale) {
  const AttentionProblem p(fp8_config());
  const int32_t dim = p.config().head_dim;
  for (int64_t i = 0; i < 50; ++i) {
    const float stored = fp8_e4m3_to_float(p.q_bytes()[i]);
    EXPECT_EQ(
        p.q_value(i / (8 * dim), static_cast<int32_t>(i / dim % 8), static_cast<int32_t>(i % dim)),
        stored * 0.05f);
  }
  // Values are spread over the FP8 range, not crowded near zero.
  float amax = 0.0f;
  for (uint8_t b : p.q_bytes())
    amax = std::max(amax, std::fabs(fp8_e4m3_to_float(b)));
  EXPECT_GT(amax, 40.0f);
}

TEST(AttentionHarnessProblem, Bf16QueryIsNotScaled) {
  AttentionProblemConfig c;
  c.seqs = {{2, 2}};
  c.q_scale = 100.0f;
  const AttentionProblem p(c);
  uint16_t bits;
  std::memcpy(&bits, p.q_bytes().data(), 2);
  EXPECT_EQ(p.q_value(0, 0, 0), bf16_bits_to_float(bits));
  EXPECT_LT(std::fabs(p.q_value(0, 0, 0)), 10.0f);
}

TEST(AttentionHarnessProblem, CachesHoldScaledValuesInPermutedPagesAndNanElsewhere) {
  const AttentionProblem p(fp8_config());
  const KvCacheLayout& kv = p.kv_layout();
  std::set<int32_t> used_pages;
  std::vector<bool> written(static_cast<size_t>(kv.tensor_elems()), false);
  for (int32_t b = 0; b < p.num_seqs(); ++b) {
    for (int32_t pos = 0; pos < p.seq_lens()[b]; ++pos) {
      const int32_t page = p.block_table()[b * p.block_table_stride() + pos / kv.page_size];
      ASSERT_GE(page, 1);
      used_pages.insert(page);
      for (int32_t h = 0; h < kv.num_kv_heads; ++h) {
        for (int32_t d = 0; d < kv.head_dim; ++d) {
          const int64_t at = kv.offset(page, pos % kv.page_size, h, d);
          written[at] = true;
          EXPECT_EQ(p.k_value(b, pos, h, d),
                    fp8_e4m3_to_float(p.k_cache_bytes()[at]) * p.k_scale_of(h));
          EXPECT_EQ(p.v_value(b, pos, h, d),
                    fp8_e4m3_to_float(p.v_cache_bytes()[at]) * p.v_scale_of(h));
        }
      }
    }
  }
  EXPECT_EQ(used_pages.size(), 4u);  // 3 pages for 37 tokens, 1 for 16
  EXPECT_NE(p.k_scale_of(0), p.k_scale_of(1));
  for (size_t i = 0; i < written.size(); ++i) {
    if (!written[i]) {
      ASSERT_TRUE(std::isnan(fp8_e4m3_to_float(p.k_cache_bytes()[i]))) << "element " << i;
      ASSERT_TRUE(std::isnan(fp8_e4m3_to_float(p.v_cache_bytes()[i]))) << "element " << i;
    }
  }
  // Padding sequence: all-null block table row; every row ends with a spare null entry.
  for (int32_t i = 0; i < p.block_table_stride(); ++i) {
    EXPECT_EQ(p.block_table()[2 * p.block_table_stride() + i], 0);
  }
  EXPECT_EQ(p.block_table()[p.block_table_stride() - 1], 0);
}

TEST(AttentionHarnessProblem, PoisonedOutputFailsAndReferencePasses) {
  AttentionProblem p(fp8_config());
  p.compute_reference();
  const Tolerance loose{1.0, 1.0};
  const CompareResult poisoned = p.compare_output(p.poisoned_out().data(), nullptr, loose);
  EXPECT_EQ(poisoned.num_mismatches, poisoned.num_compared);
  EXPECT_EQ(poisoned.num_compared, int64_t{6} * 8 * 64);
  EXPECT_TRUE(p.compare_output(p.expected_out().data(), nullptr, {0, 0}).ok);
  EXPECT_FALSE(p.compare_lse(p.poisoned_lse().data(), loose).ok);
  EXPECT_TRUE(p.compare_lse(p.expected_lse().data(), {0, 0}).ok);
}

// An NVFP4 output whose every block scale is twice the reference's, its codes taken from that
// coarser unit: each value stays within its own block's rounding of the reference's, which the
// element rule's slack (half steps from the kernel's scales) lets through, so the block-scale
// bounds are what fail it.
TEST(AttentionHarnessProblem, Nvfp4OutputWithDoubledBlockScalesFails) {
  AttentionProblemConfig c = fp8_config();
  c.out_dtype = DType::kNVFP4;
  AttentionProblem p(c);
  p.compute_reference();
  const Tolerance tolerance = tolerance::kDecodeFp8QNvfp4Out;
  EXPECT_TRUE(
      p.compare_output(p.expected_out().data(), p.expected_block_scales().data(), tolerance).ok);

  const AttentionOutputFormat format = p.output_format();
  const std::vector<float> values = p.expected_values();
  std::vector<uint8_t> out = p.expected_out();
  std::vector<uint8_t> scales = p.expected_block_scales();
  const int64_t scale_cols = format.row_elems / kNvfp4BlockSize;
  for (int64_t t = 0; t < p.num_tokens(); ++t) {
    for (int64_t col = 0; col < scale_cols; ++col) {
      const float* block = &values[t * format.row_elems + col * kNvfp4BlockSize];
      float amax = 0.0f;
      for (int i = 0; i < kNvfp4BlockSize; ++i)
        amax = std::max(amax, std::fabs(block[i]));
      const uint8_t scale = nvfp4_block_scale(2.0f * amax, format.nvfp4_global_scale);
      const float factor = nvfp4_element_factor(scale, format.nvfp4_global_scale);
      scales[nvfp4_scale_offset(format.scale_row_offset + t, col, scale_cols)] = scale;
      uint8_t* row = &out[t * format.row_elems / 2];
      for (int i = 0; i < kNvfp4BlockSize; i += 2) {
        const int64_t e = col * kNvfp4BlockSize + i;
        row[e / 2] = static_cast<uint8_t>(float_to_e2m1(block[i] * factor) |
                                          float_to_e2m1(block[i + 1] * factor) << 4);
      }
    }
  }
  const CompareResult coarse = p.compare_output(out.data(), scales.data(), tolerance);
  EXPECT_FALSE(coarse.ok);
  EXPECT_GT(coarse.num_block_scale_mismatches, 0);
  EXPECT_EQ(coarse.num_mismatches, coarse.num_block_scale_mismatches) << coarse.summary();
}

TEST(AttentionHarnessProblem, ExpectedOutputNeedsTheReference) {
  const AttentionProblem p(fp8_config());
  EXPECT_THROW(p.expected_out(), Error);
}

TEST(AttentionHarnessProblem, RejectsQueryLongerThanSequence) {
  AttentionProblemConfig c;
  c.seqs = {{5, 4}};
  try {
    AttentionProblem p(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("{q_len 5, kv_len 4}"), std::string::npos) << e.what();
  }
}

TEST(AttentionHarnessProblem, RandomSeqGenerators) {
  for (const SeqShape& s : random_decode_seqs(20, 3, 9, 1)) {
    EXPECT_EQ(s.q_len, 1);
    EXPECT_GE(s.kv_len, 3);
    EXPECT_LE(s.kv_len, 9);
  }
  for (const SeqShape& s : random_prefill_seqs(20, 2, 5, 7, 1)) {
    EXPECT_GE(s.q_len, 2);
    EXPECT_LE(s.q_len, 5);
    EXPECT_GE(s.kv_len - s.q_len, 0);
    EXPECT_LE(s.kv_len - s.q_len, 7);
  }
}

}  // namespace
}  // namespace quench::testing_support
