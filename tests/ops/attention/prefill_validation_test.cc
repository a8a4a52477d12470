// The prefill launchers' host checks, on host buffers: every case here is rejected before any
// CUDA call, so the test needs no GPU (and never launches a kernel on host pointers). Bad input
// gets the CPU reference's verdict; an empty batch may still pass null arrays.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "harness/attention_problem.h"
#include "quench/core/error.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/attention/prefill/generic/prefill_attention_generic.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"

namespace quench::testing_support {
namespace {

using Launcher = std::function<void(const AttentionParams&)>;

const std::vector<std::pair<std::string, Launcher>>& launchers() {
  static const std::vector<std::pair<std::string, Launcher>> all = {
      {"generic", [](const AttentionParams& p) { prefill_attention_generic(p, nullptr); }},
      {"hopper", [](const AttentionParams& p) { prefill_attention_hopper(p, nullptr); }},
  };
  return all;
}

// A bf16 chunk after a cached prefix: served by both kernels (Hopper on an sm_90 device).
AttentionProblemConfig prefill_config(DType out_dtype) {
  AttentionProblemConfig c;
  c.seqs = {{5, 21}, {3, 3}};
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.out_dtype = out_dtype;
  c.lse = false;
  return c;
}

std::string rejection(const Launcher& launch, const AttentionParams& p) {
  try {
    launch(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PrefillAttentionValidation, NoQueryHeadsIsUnsupported) {
  AttentionParams p;
  p.q_dtype = DType::kBF16;
  p.kv.dtype = DType::kBF16;
  p.kv.head_dim = 128;
  p.kv.page_size = 16;
  p.kv.num_kv_heads = 2;
  for (const int32_t heads : {0, -2}) {
    p.num_q_heads = heads;
    const std::string expected = "num_q_heads=" + std::to_string(heads);
    EXPECT_NE(prefill_attention_generic_unsupported_reason(p).find(expected), std::string::npos)
        << prefill_attention_generic_unsupported_reason(p);
    EXPECT_NE(prefill_attention_hopper_unsupported_reason(p).find(expected), std::string::npos)
        << prefill_attention_hopper_unsupported_reason(p);
  }
}

// Each bad scalar is rejected by both launchers and by the CPU reference, naming the field.
TEST(PrefillAttentionValidation, ScalesSoftCapWindowAndScaleRowsAreCheckedAsTheReferenceDoes) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  struct Case {
    DType out_dtype;
    std::function<void(AttentionParams&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {DType::kBF16, [](AttentionParams& p) { p.sm_scale = 0.0f; }, "sm_scale 0"},
      {DType::kBF16, [&](AttentionParams& p) { p.sm_scale = kInf; }, "sm_scale inf"},
      {DType::kBF16, [&](AttentionParams& p) { p.sm_scale = kNan; }, "sm_scale nan"},
      {DType::kBF16, [](AttentionParams& p) { p.logit_soft_cap = -1.0f; }, "logit_soft_cap -1"},
      {DType::kBF16, [&](AttentionParams& p) { p.logit_soft_cap = kInf; }, "logit_soft_cap inf"},
      {DType::kBF16, [](AttentionParams& p) { p.window_left = -2; }, "window_left -2"},
      {DType::kBF16, [](AttentionParams& p) { p.k_scale.per_tensor = 0.0f; },
       "k_scale.per_tensor 0"},
      {DType::kBF16, [&](AttentionParams& p) { p.v_scale.per_tensor = kNan; },
       "v_scale.per_tensor nan"},
      {DType::kFP8E4M3, [&](AttentionParams& p) { p.o_scale = kInf; }, "o_scale inf"},
      {DType::kFP8E5M2, [](AttentionParams& p) { p.o_scale = 0.0f; }, "o_scale 0"},
      {DType::kNVFP4, [](AttentionParams& p) { p.nvfp4_global_scale = -1.0f; },
       "nvfp4_global_scale -1"},
      {DType::kNVFP4, [](AttentionParams& p) { p.out_scale_row_offset = -1; },
       "out_scale_row_offset -1"},
      {DType::kNVFP4,
       [&](AttentionParams& p) {
         p.out_scale_rows = kMax;
         p.out_scale_row_offset = kMax;
       },
       "out_scale_row_offset 2147483647 + num_tokens 8 exceeds out_scale_rows"},
  };
  for (const Case& c : cases) {
    const AttentionProblem problem(prefill_config(c.out_dtype));
    std::vector<uint8_t> out = problem.poisoned_out();
    std::vector<uint8_t> scales = problem.poisoned_block_scales();
    AttentionParams p = problem.host_params(out.data(), scales.data(), nullptr);
    ASSERT_NO_THROW(validate_attention_params(p)) << c.expected;
    c.edit(p);
    EXPECT_THROW(validate_attention_params(p), Error) << c.expected;
    for (const auto& [name, launch] : launchers()) {
      const std::string message = rejection(launch, p);
      EXPECT_NE(message.find(c.expected), std::string::npos)
          << name << ": expected '" << c.expected << "', got '" << message << "'";
    }
  }
}

TEST(PrefillAttentionValidation, NullArraysAndNegativeSizesAreRejectedByName) {
  const AttentionProblem problem(prefill_config(DType::kBF16));
  std::vector<uint8_t> out = problem.poisoned_out();
  const AttentionParams valid = problem.host_params(out.data(), nullptr, nullptr);
  const std::vector<std::pair<std::string, std::function<void(AttentionParams&)>>> cases = {
      {"q is null", [](AttentionParams& p) { p.q = nullptr; }},
      {"k_cache is null", [](AttentionParams& p) { p.k_cache = nullptr; }},
      {"v_cache is null", [](AttentionParams& p) { p.v_cache = nullptr; }},
      {"out is null", [](AttentionParams& p) { p.out = nullptr; }},
      {"q_offsets is null", [](AttentionParams& p) { p.q_offsets = nullptr; }},
      {"seq_lens is null", [](AttentionParams& p) { p.seq_lens = nullptr; }},
      {"block_table is null", [](AttentionParams& p) { p.block_table = nullptr; }},
      {"block_table_stride 0", [](AttentionParams& p) { p.block_table_stride = 0; }},
      {"negative size (num_seqs -1", [](AttentionParams& p) { p.num_seqs = -1; }},
      {"max_q_len -5", [](AttentionParams& p) { p.max_q_len = -5; }},
      {"max_seq_len 2147483600 is too long",
       [](AttentionParams& p) { p.max_seq_len = 2147483600; }},
  };
  for (const auto& [expected, edit] : cases) {
    AttentionParams p = valid;
    edit(p);
    for (const auto& [name, launch] : launchers()) {
      const std::string message = rejection(launch, p);
      EXPECT_NE(message.find(expected), std::string::npos)
          << name << ": expected '" << expected << "', got '" << message << "'";
    }
  }
}

// The KV cache layout is checked as the reference checks it (KvCacheLayout::validate), named with
// the launcher: a corrupt layout enum or a cache without its null page never reaches a kernel.
TEST(PrefillAttentionValidation, KvLayoutIsCheckedAsTheReferenceDoes) {
  const AttentionProblem problem(prefill_config(DType::kBF16));
  std::vector<uint8_t> out = problem.poisoned_out();
  const AttentionParams valid = problem.host_params(out.data(), nullptr, nullptr);
  const std::vector<std::pair<std::string, std::function<void(AttentionParams&)>>> cases = {
      {"KV layout 2", [](AttentionParams& p) { p.kv.layout = static_cast<KvLayout>(2); }},
      {"num_pages 1", [](AttentionParams& p) { p.kv.num_pages = 1; }},
  };
  for (const auto& [expected, edit] : cases) {
    AttentionParams p = valid;
    edit(p);
    EXPECT_THROW(validate_attention_params(p), Error) << expected;
    for (const auto& [name, launch] : launchers()) {
      const std::string message = rejection(launch, p);
      EXPECT_NE(message.find(expected), std::string::npos)
          << name << ": expected '" << expected << "', got '" << message << "'";
      EXPECT_EQ(message.rfind("prefill_attention_", 0), 0u) << message;
    }
  }
}

// An empty batch launches nothing, so it may leave every array null (as graph padding does).
TEST(PrefillAttentionValidation, EmptyBatchMayHaveNullArrays) {
  AttentionParams p;
  p.kv.num_kv_heads = 2;
  p.num_q_heads = 4;
  p.sm_scale = 0.125f;
  EXPECT_NO_THROW(prefill_attention_generic(p, nullptr));
}

}  // namespace
}  // namespace quench::testing_support
