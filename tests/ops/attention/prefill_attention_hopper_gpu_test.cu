// GPU tests of the Hopper (sm_90a, wgmma) prefill kernel against the CPU reference, at the SPEC §3
// prefill tolerances (FP8 Q, bf16 out: rtol 2e-2, atol 3e-2), for each operand kind (FP8 q over
// FP8 KV, bf16 over bf16, bf16 q over FP8 KV): small hand-sized shapes first (one key, one tile,
// two tiles: a failure there points at the operand layouts), then a grid over output dtype x
// page size x layout x GQA group x chunk/prefix lengths with non-unit scales; head_dim 64/256
// for the bf16 kinds; window, soft-cap, sinks, per-head scales, padding sequences, long
// prefixes, decode consistency. Skipped unless the device is sm_90. Failures print the first
// mismatches, the maxima and an error map (by accumulator row, head-dim block, number of key
// tiles).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/device_buffer.h"
#include "harness/random_inputs.h"
#include "prefill_test_support.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"

namespace quench::testing_support {
namespace {

constexpr DtypeCase kFp8Bf16Out{DType::kFP8E4M3, DType::kFP8E4M3, DType::kBF16};
// The three q/KV dtype combinations, bf16 output (FP8 q runs both P·V precisions).
constexpr DtypeCase kKinds[] = {kFp8Bf16Out,
                                {DType::kBF16, DType::kBF16, DType::kBF16},
                                {DType::kBF16, DType::kFP8E4M3, DType::kBF16}};

void expect_hopper_matches_reference(const AttentionProblemConfig& config) {
  SCOPED_TRACE(describe(config));
  expect_matches_reference(config, run_hopper_bf16_pv);
  if (config.q_dtype == DType::kFP8E4M3) {
    SCOPED_TRACE("FP8 P·V");
    expect_matches_reference(config, run_hopper_fp8_pv);
  }
}

// One query row over one key (P = 1: checks the V^T copy and the epilogue alone), one full tile
// of 128 rows x 128 keys (the causal diagonal inside one tile), and rows that see 1 to 3 tiles.
TEST(PrefillAttentionHopper, SmallShapes) {
  SKIP_UNLESS_SM90();
  const std::vector<std::vector<SeqShape>> shapes = {{{1, 1}},   {{1, 128}},  {{128, 128}},
                                                     {{1, 129}}, {{64, 300}}, {{200, 333}}};
  uint64_t seed = 1;
  for (const DtypeCase& kind : kKinds) {
    for (const std::vector<SeqShape>& seqs : shapes) {
      AttentionProblemConfig c = base_config(kind, 128, seed++);
      c.num_q_heads = 1;
      c.num_kv_heads = 1;
      c.seqs = seqs;
      expect_hopper_matches_reference(c);
    }
  }
}

// bf16 q over FP8 KV runs Q K^T on f16 operands, its Q tile scaled per warp by a power of two
// where bf16 values exceed f16's range (q_rows_to_f16): queries around 2^17 (up to ~2^19), with
// sm_scale bringing the scores back to the usual range, must match the reference as ordinary
// ones do, at every head_dim.
TEST(PrefillAttentionHopper, Bf16QueryBeyondF16Range) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 900;
  for (const int head_dim : {64, 128, 256}) {
    for (const float magnitude : {1.0f, 131072.0f}) {
      AttentionProblemConfig c = base_config(kKinds[2], head_dim, seed++);
      c.seqs = {{150, 420}, {70, 70}};
      c.q_magnitude = magnitude;
      c.sm_scale = 1.0f / (std::sqrt(static_cast<float>(head_dim)) * magnitude);
      SCOPED_TRACE(str_cat("q magnitude ", magnitude));
      expect_hopper_matches_reference(c);
    }
  }
}

// One NaN in a bf16 query (a broken upstream value) over FP8 KV: its own row comes out NaN, and
// every other row, those that share its warp's f16 scale included, still matches the reference
// (q_rows_to_f16 takes the warp's scale from its finite values).
TEST(PrefillAttentionHopper, Bf16QueryNanStaysInItsRow) {
  SKIP_UNLESS_SM90();
  AttentionProblemConfig c = base_config(kKinds[2], 128, 950);
  c.seqs = {{40, 200}};
  c.lse = false;
  AttentionProblem problem(c);
  problem.compute_reference();
  AttentionDeviceProblem device(problem);
  const int64_t nan_token = 9;
  const int nan_head = 5;
  const uint16_t nan_bits = 0x7fc0;  // bf16 quiet NaN
  unsigned char* q = static_cast<unsigned char*>(const_cast<void*>(device.params().q));
  QUENCH_CUDA_CHECK(
      cudaMemcpy(q + ((nan_token * c.num_q_heads + nan_head) * c.head_dim + 17) * sizeof(uint16_t),
                 &nan_bits, sizeof(nan_bits), cudaMemcpyHostToDevice));
  run_hopper_bf16_pv(device.params(), nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> bytes = device.download_out();
  const std::vector<float> actual =
      decode_outputs(problem.output_format(), problem.num_tokens(), bytes.data(), nullptr);
  const std::vector<float> expected = problem.expected_values();
  const Tolerance tol = attention_tolerance(false, c.q_dtype, c.kv_dtype, c.out_dtype);
  int64_t bad = 0;
  int64_t nan_row_nans = 0;
  for (int64_t t = 0; t < problem.num_tokens(); ++t) {
    for (int h = 0; h < c.num_q_heads; ++h) {
      for (int d = 0; d < c.head_dim; ++d) {
        const size_t i = static_cast<size_t>((t * c.num_q_heads + h) * c.head_dim + d);
        if (t == nan_token && h == nan_head) {
          nan_row_nans += std::isnan(actual[i]) ? 1 : 0;
          continue;
        }
        if (!(std::fabs(actual[i] - expected[i]) <= tol.atol + tol.rtol * std::fabs(expected[i]))) {
          ++bad;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0) << "rows other than the NaN query's left the tolerance";
  EXPECT_EQ(nan_row_nans, c.head_dim) << "the NaN query's own row";
}

// Grid: each operand kind meets every page size, layout, GQA group and output dtype; sequences
// are ragged chunks after cached prefixes, plus one exact 128-row tile.
TEST(PrefillAttentionHopper, Grid) {
  SKIP_UNLESS_SM90();
  const DType outs[] = {DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2, DType::kNVFP4};
  const int pages[] = {16, 32, 64};
  const int groups[] = {1, 4, 8};
  int index = 0;
  for (const DType out : outs) {
    for (const int page : pages) {
      for (const KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
        AttentionProblemConfig c = base_config({DType::kFP8E4M3, DType::kFP8E4M3, out}, 128,
                                               700 + static_cast<uint64_t>(index));
        c.page_size = page;
        c.layout = layout;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * groups[index % 3];
        c.seqs = random_prefill_seqs(3, 1, 150, 300, 17 + static_cast<uint64_t>(index));
        c.seqs.push_back(SeqShape{128, 128});
        // FP8 outputs too: one-code flips pass by the rounding slack (compare.h), and short
        // prefixes keep the outputs of order one, above the absolute tolerance.
        expect_hopper_matches_reference(c);
        ++index;
      }
    }
  }
}

TEST(PrefillAttentionHopper, SlidingWindowSoftCapSinksPerHeadScales) {
  SKIP_UNLESS_SM90();
  for (const DtypeCase& kind : kKinds) {
    for (const int window : {37, 200}) {
      AttentionProblemConfig c = base_config(kind, 128, 800 + static_cast<uint64_t>(window));
      c.num_q_heads = 8;
      c.num_kv_heads = 2;
      c.page_size = window == 37 ? 16 : 64;
      c.layout = window == 37 ? KvLayout::kNHD : KvLayout::kHND;
      c.window_left = window;
      c.logit_soft_cap = 30.0f;
      c.sm_scale = 0.3f;  // scores large enough for the cap to bend them
      c.sinks = true;
      c.per_head_kv_scales = true;
      c.seqs = {{90, 300}, {1, 77}, {200, 200}, {150, 700}};
      expect_hopper_matches_reference(c);
    }
  }
}

// head_dim 64 and 256 (bf16 operand kinds only; 64-key tiles at 256): ragged chunks over
// prefixes, every page size and layout, one case with window, soft-cap, sinks and per-head
// scales, one with FP8 output. The default kernel: at 256 the warp-specialized ones (unless
// QUENCH_PREFILL_HD256=sync; prefill_hopper_ws_gpu_test.cu also names the synchronous one).
TEST(PrefillAttentionHopper, Bf16HeadDims64And256) {
  SKIP_UNLESS_SM90();
  int index = 0;
  for (const DtypeCase& kind : {kKinds[1], kKinds[2]}) {
    for (const int head_dim : {64, 256}) {
      for (const int page : {16, 32, 64}) {
        AttentionProblemConfig c = base_config(kind, head_dim, 1200 + static_cast<uint64_t>(index));
        c.page_size = page;
        c.layout = index % 2 == 0 ? KvLayout::kNHD : KvLayout::kHND;
        c.num_kv_heads = 2;
        c.num_q_heads = 8;
        c.seqs = random_prefill_seqs(3, 1, 150, 300, 31 + static_cast<uint64_t>(index));
        c.seqs.push_back(SeqShape{128, 128});
        if (page == 32) {
          c.window_left = 50;
          c.logit_soft_cap = 30.0f;
          c.sm_scale = 0.3f;
          c.sinks = true;
          c.per_head_kv_scales = true;
        }
        if (page == 64) c.out_dtype = DType::kFP8E4M3;
        expect_hopper_matches_reference(c);
        ++index;
      }
    }
  }
}

TEST(PrefillAttentionHopper, GraphPaddingAndNvfp4RowOffset) {
  SKIP_UNLESS_SM90();
  AttentionProblemConfig c =
      base_config({DType::kFP8E4M3, DType::kFP8E4M3, DType::kNVFP4}, 128, 901);
  c.seqs = {{0, 0}, {33, 100}, {0, 0}, {70, 70}};
  c.out_scale_row_offset = 5;
  c.num_q_heads = 4;
  c.num_kv_heads = 4;
  expect_hopper_matches_reference(c);
}

TEST(PrefillAttentionHopper, ManyTilesLongPrefix) {
  SKIP_UNLESS_SM90();
  for (const DtypeCase& kind : kKinds) {
    AttentionProblemConfig c = base_config(kind, 128, 1001);
    c.num_q_heads = 8;
    c.num_kv_heads = 1;
    c.page_size = 16;
    c.seqs = {{300, 3000}, {257, 257}, {1, 4097}};
    expect_hopper_matches_reference(c);
  }
}

// FP8 P·V (e4m3 P, two-term on each item's last two tiles, two-level accumulation) with every
// output dtype, on rows over short and long prefixes; its long-context accuracy is the needle
// test's.
TEST(PrefillAttentionHopper, Fp8PvEveryOutputDtype) {
  SKIP_UNLESS_SM90();
  const DType outs[] = {DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2, DType::kNVFP4};
  int index = 0;
  for (const DType out : outs) {
    AttentionProblemConfig c = base_config({DType::kFP8E4M3, DType::kFP8E4M3, out}, 128,
                                           1300 + static_cast<uint64_t>(index));
    c.page_size = 16 << (index % 3);
    c.layout = index % 2 == 0 ? KvLayout::kNHD : KvLayout::kHND;
    c.num_kv_heads = 2;
    c.num_q_heads = 8;
    c.seqs = {{96, 1100}, {1, 1000}, {130, 130}, {128, 1128}, {70, 90}};
    if (index == 0) {
      c.window_left = 700;
      c.logit_soft_cap = 30.0f;
      c.sinks = true;
      c.per_head_kv_scales = true;
    }
    SCOPED_TRACE("FP8 P·V");
    expect_matches_reference(c, run_hopper_fp8_pv);
    ++index;
  }
}

// FP8 P·V rows next to the first tile boundary: GQA groups 2 and 4 take two-term P on each
// item's last tile only (two_term_prev_tile), so rows over 65-128 keys from the sequence's start
// (prefixes of 40-100 tokens, items straddling key 128) can be all one-term; MHA (group 1) takes
// both tiles, where a row after a 10-token prefix has a handful of keys in the second-to-last.
TEST(PrefillAttentionHopper, Fp8PvRowsNearTheFirstTileBoundary) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 1400;
  for (const int group : {1, 2, 4}) {
    AttentionProblemConfig c = base_config(kFp8Bf16Out, 128, seed++);
    c.num_kv_heads = 2;
    c.num_q_heads = 2 * group;
    c.seqs = {{64, 164}, {96, 156}, {40, 140}, {128, 138}, {1, 129}};
    SCOPED_TRACE(str_cat("FP8 P·V, group ", group));
    expect_matches_reference(c, run_hopper_fp8_pv);
  }
}

// Host-side checks: every unserved configuration has a reason naming the bad value.
TEST(PrefillAttentionHopper, RejectsUnsupportedConfigurations) {
  AttentionParams p;
  p.q_dtype = DType::kFP8E4M3;
  p.kv.dtype = DType::kFP8E4M3;
  p.kv.head_dim = 128;
  p.kv.page_size = 16;
  p.kv.num_kv_heads = 1;
  p.num_q_heads = 1;
  const auto reason_contains = [&](const char* text) {
    const std::string reason = prefill_attention_hopper_unsupported_reason(p);
    return reason.find(text) != std::string::npos;
  };
  p.q_dtype = DType::kF16;
  EXPECT_TRUE(reason_contains("q dtype f16 over kv dtype fp8_e4m3"));
  p.q_dtype = DType::kFP8E4M3;
  p.kv.dtype = DType::kBF16;
  EXPECT_TRUE(reason_contains("q dtype fp8_e4m3 over kv dtype bf16"));
  p.kv.dtype = DType::kFP8E5M2;
  EXPECT_TRUE(reason_contains("kv dtype fp8_e5m2"));
  p.kv.dtype = DType::kFP8E4M3;
  p.kv.head_dim = 64;
  EXPECT_TRUE(reason_contains("head_dim=64"));
  p.kv.head_dim = 128;
  p.kv.page_size = 8;
  EXPECT_TRUE(reason_contains("page_size=8"));
  p.kv.page_size = 16;
  p.num_q_heads = 3;
  p.kv.num_kv_heads = 2;
  EXPECT_TRUE(reason_contains("num_q_heads=3"));
  EXPECT_THROW(prefill_attention_hopper(p, nullptr), Error);
  p.num_q_heads = 2;
  p.kv.num_kv_heads = 1;
  EXPECT_EQ(prefill_attention_hopper_unsupported_reason(p).empty(), device_is_sm90());
}

TEST(PrefillAttentionHopper, LastPrefillRowEqualsDecode) {
  SKIP_UNLESS_SM90();
  for (const DtypeCase& kind : kKinds) {
    expect_last_prefill_row_equals_decode(kind, run_hopper_bf16_pv, "16-bit P V", 1101, false);
    if (is_fp8(kind.q) && is_fp8(kind.kv)) {
      expect_last_prefill_row_equals_decode(kind, run_hopper_fp8_pv, "FP8 P V", 1101, true);
    }
  }
}

}  // namespace
}  // namespace quench::testing_support
