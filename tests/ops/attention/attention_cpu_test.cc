// The CPU backend's attention against the reference on random problems: every dtype, head dim,
// GQA group (odd ones leave the 2-head tile's remainder), page size and layout, window, soft-cap,
// sinks, per-head scales and output format, with prefill chunks that span several row blocks and
// key chunks. The output must meet SPEC §3's tolerance and, computed in fp32 from the same
// stored inputs, sit within one rounding of the output format of the reference's; lse within
// fp32 error.
#include "quench/ops/attention/attention_cpu.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/expect_error.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"

namespace quench::testing_support {
namespace {

struct RunResult {
  std::vector<uint8_t> out, block_scales;
  std::vector<float> lse;
};

RunResult run_cpu(const AttentionProblem& problem) {
  RunResult r{problem.poisoned_out(), problem.poisoned_block_scales(), problem.poisoned_lse()};
  const bool nvfp4 = problem.config().out_dtype == DType::kNVFP4;
  attention_cpu(problem.host_params(r.out.data(), nvfp4 ? r.block_scales.data() : nullptr,
                                    r.lse.empty() ? nullptr : r.lse.data()));
  return r;
}

// bf16 output: within one bf16 step (2^-8 relative) of the reference. FP8 and NVFP4 outputs
// round coarser, and a value near a midpoint may go either way: SPEC §3's tolerance with the
// harness's rounding slack.
Tolerance output_bound(const AttentionProblemConfig& c, bool decode) {
  if (c.out_dtype == DType::kBF16) return {8e-3, 1e-5};
  return attention_tolerance(decode, c.q_dtype, c.kv_dtype, c.out_dtype);
}

void expect_matches_reference(const AttentionProblemConfig& c, const std::string& label) {
  SCOPED_TRACE(label);
  AttentionProblem problem(c);
  problem.compute_reference();
  const RunResult r = run_cpu(problem);
  bool decode = true;
  for (const SeqShape& s : c.seqs)
    decode = decode && s.q_len <= 1;
  const CompareResult o =
      problem.compare_output(r.out.data(), r.block_scales.data(), output_bound(c, decode));
  EXPECT_TRUE(o.ok) << o.summary();
  const CompareResult spec =
      problem.compare_output(r.out.data(), r.block_scales.data(),
                             attention_tolerance(decode, c.q_dtype, c.kv_dtype, c.out_dtype));
  EXPECT_TRUE(spec.ok) << spec.summary();
  if (c.lse) {
    const CompareResult lse = problem.compare_lse(r.lse.data(), {1e-5, 1e-4});
    EXPECT_TRUE(lse.ok) << lse.summary();
  }
}

AttentionProblemConfig base_config(uint64_t seed) {
  AttentionProblemConfig c;
  c.k_scale = 0.7f;
  c.v_scale = 1.3f;
  c.q_scale = 0.9f;
  c.o_scale = 0.02f;
  c.seed = seed;
  return c;
}

// Decode steps and prefill chunks together: a chunk of 40 rows (three row blocks) after a
// 500-token prefix (three key chunks), a short fresh prefill, decode steps up to 700 tokens, and
// a graph-padding sequence.
std::vector<SeqShape> mixed_batch() {
  return {{40, 540}, {1, 700}, {0, 0}, {7, 7}, {1, 1}, {1, 257}, {17, 300}};
}

TEST(AttentionCpu, EveryDtypeAndHeadDimMatchesTheReference) {
  struct Dtypes {
    DType q, kv, out;
  };
  const Dtypes dtypes[] = {
      {DType::kBF16, DType::kBF16, DType::kBF16},
      {DType::kBF16, DType::kFP8E4M3, DType::kBF16},
      {DType::kBF16, DType::kFP8E5M2, DType::kFP8E4M3},
      {DType::kF16, DType::kFP8E4M3, DType::kBF16},
      {DType::kFP8E4M3, DType::kFP8E4M3, DType::kFP8E4M3},
      {DType::kFP8E5M2, DType::kFP8E5M2, DType::kNVFP4},
  };
  uint64_t seed = 100;
  for (const Dtypes& d : dtypes) {
    for (int32_t head_dim : {64, 128, 256}) {
      AttentionProblemConfig c = base_config(++seed);
      c.seqs = mixed_batch();
      c.q_dtype = d.q;
      c.kv_dtype = d.kv;
      c.out_dtype = d.out;
      c.head_dim = head_dim;
      c.num_q_heads = 8;
      c.num_kv_heads = 2;
      expect_matches_reference(c, str_cat("q ", dtype_name(d.q), " kv ", dtype_name(d.kv), " out ",
                                          dtype_name(d.out), " hd ", head_dim));
    }
  }
}

TEST(AttentionCpu, EveryGroupPageSizeAndLayoutMatchesTheReference) {
  struct Heads {
    int32_t q, kv;
  };
  uint64_t seed = 200;
  for (const Heads h : {Heads{4, 4}, Heads{6, 2}, Heads{8, 1}, Heads{15, 5}}) {
    for (int32_t page_size : {16, 32, 64}) {
      for (KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
        AttentionProblemConfig c = base_config(++seed);
        c.seqs = mixed_batch();
        c.kv_dtype = DType::kFP8E4M3;
        c.num_q_heads = h.q;
        c.num_kv_heads = h.kv;
        c.page_size = page_size;
        c.layout = layout;
        c.per_head_kv_scales = true;
        expect_matches_reference(
            c, str_cat(h.q, "/", h.kv, " heads, page ", page_size, " ", kv_layout_name(layout)));
      }
    }
  }
}

TEST(AttentionCpu, WindowSoftCapAndSinksMatchTheReference) {
  uint64_t seed = 300;
  for (int32_t window_left : {-1, 0, 5, 100, 300}) {
    for (float soft_cap : {0.0f, 4.0f}) {
      for (bool sinks : {false, true}) {
        AttentionProblemConfig c = base_config(++seed);
        c.seqs = mixed_batch();
        c.kv_dtype = DType::kFP8E4M3;
        c.num_q_heads = 12;
        c.num_kv_heads = 4;
        c.window_left = window_left;
        c.nan_before_window = window_left >= 0;
        c.logit_soft_cap = soft_cap;
        c.sinks = sinks;
        c.q_magnitude = 4.0f;  // peaked softmaxes, where a wrong max or rescale shows
        expect_matches_reference(
            c, str_cat("window ", window_left, " cap ", soft_cap, sinks ? " sinks" : ""));
      }
    }
  }
}

// Many decode sequences of random lengths (the engine's decode step) and long prefill chunks.
TEST(AttentionCpu, RandomBatchesMatchTheReference) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    AttentionProblemConfig c = base_config(400 + seed);
    c.seqs = random_decode_seqs(24, 1, 1200, seed);
    for (const SeqShape& s : random_prefill_seqs(3, 1, 90, 600, seed))
      c.seqs.push_back(s);
    c.kv_dtype = seed % 2 == 0 ? DType::kFP8E4M3 : DType::kBF16;
    c.num_q_heads = 32;
    c.num_kv_heads = 8;
    c.head_dim = 64;
    expect_matches_reference(c, str_cat("seed ", seed));
  }
}

// The o projection's e4m3 rows (AttentionParams::out_fp8) from the CPU kernel: the codes and
// scales of its own bf16 output quantized by the reference, per 128 columns (group-major) and per
// row, with out null; and the bf16 output beside them unchanged.
TEST(AttentionCpu, Fp8RowsAreItsBf16OutputQuantized) {
  AttentionProblemConfig c = base_config(91);
  c.head_dim = 128;
  c.kv_dtype = DType::kFP8E4M3;
  c.seqs = mixed_batch();
  AttentionProblem problem(c);
  const RunResult plain = run_cpu(problem);
  const int32_t rows = problem.num_tokens();
  const int32_t width = c.num_q_heads * c.head_dim;
  std::vector<float> bf16(static_cast<size_t>(rows) * width);
  for (size_t i = 0; i < bf16.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, plain.out.data() + 2 * i, 2);
    bf16[i] = bf16_bits_to_float(bits);
  }
  for (const auto& [group, by_group] : {std::pair{128, true}, std::pair{width, false}}) {
    SCOPED_TRACE(str_cat("group ", group));
    const size_t scale_count = static_cast<size_t>(rows) * (width / group);
    std::vector<uint8_t> want_codes(bf16.size()), codes(bf16.size(), 0x7f);
    std::vector<float> want_scales(scale_count), scales(scale_count, -1.0f);
    quantize_fp8_dynamic_rows_reference(bf16.data(), rows, width, group, want_codes.data(),
                                        want_scales.data(), by_group);
    for (const bool with_out : {true, false}) {
      RunResult r{problem.poisoned_out(), {}, problem.poisoned_lse()};
      AttentionParams p = problem.host_params(r.out.data(), nullptr, r.lse.data());
      if (!with_out) p.out = nullptr;
      p.out_fp8 = Fp8RowsOut{codes.data(), scales.data(), group, {0, by_group}};
      attention_cpu(p);
      EXPECT_EQ(codes, want_codes) << (with_out ? "with out" : "out null");
      EXPECT_EQ(scales, want_scales) << (with_out ? "with out" : "out null");
      if (with_out) EXPECT_EQ(r.out, plain.out);
    }
  }
}

TEST(AttentionCpu, BadParamsGetTheReferencesErrors) {
  AttentionProblemConfig c = base_config(500);
  c.seqs = {{3, 10}};
  AttentionProblem problem(c);
  std::vector<uint8_t> out = problem.poisoned_out();
  AttentionParams p = problem.host_params(out.data(), nullptr, nullptr);
  p.sm_scale = -1.0f;
  EXPECT_QUENCH_ERROR(attention_cpu(p),
                      {"attention sm_scale -1 is invalid", "allowed: finite and > 0"});
  p = problem.host_params(out.data(), nullptr, nullptr);
  p.num_q_heads = 7;
  EXPECT_QUENCH_ERROR(attention_cpu(p),
                      {"attention num_q_heads 7 is invalid", "allowed: a positive multiple"});
}

}  // namespace
}  // namespace quench::testing_support
