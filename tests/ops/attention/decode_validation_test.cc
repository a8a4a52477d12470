// validate_decode_attention_params on host buffers (it only checks pointers and sizes, never
// dereferences them): the output must be a buffer of its own, since the split merge may write it
// while the main kernel still reads q (decode_merge.cu's warm-up pass).
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
#include "quench/ops/attention/decode/decode_attention.h"

namespace quench::testing_support {
namespace {

AttentionProblemConfig decode_config(DType out_dtype) {
  AttentionProblemConfig c;
  c.seqs = {{1, 40}, {1, 17}};  // one query token each
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.q_dtype = DType::kBF16;
  c.kv_dtype = DType::kFP8E4M3;
  c.out_dtype = out_dtype;
  return c;
}

std::string rejection(const AttentionParams& p) {
  try {
    validate_decode_attention_params(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DecodeAttentionValidation, OutputApartFromTheQueryIsAccepted) {
  const AttentionProblem problem(decode_config(DType::kBF16));
  std::vector<uint8_t> out = problem.poisoned_out();
  EXPECT_EQ(rejection(problem.host_params(out.data(), nullptr, nullptr)), "");
}

TEST(DecodeAttentionValidation, OutputOverlappingTheQueryIsRejected) {
  for (const DType out_dtype : {DType::kBF16, DType::kFP8E4M3}) {
    const AttentionProblem problem(decode_config(out_dtype));
    std::vector<uint8_t> out = problem.poisoned_out();
    AttentionParams p = problem.host_params(out.data(), nullptr, nullptr);
    const auto* q = static_cast<const uint8_t*>(p.q);
    const size_t q_bytes = static_cast<size_t>(p.num_tokens) * p.num_q_heads * p.kv.head_dim * 2;
    // In place, and overlapping by the last 16 bytes of q.
    for (const uint8_t* at : {q, q + q_bytes - 16}) {
      p.out = const_cast<uint8_t*>(at);
      const std::string message = rejection(p);
      EXPECT_NE(message.find("out overlaps q"), std::string::npos)
          << dtype_name(out_dtype) << ": " << message;
    }
    // Right after q: apart.
    std::vector<uint8_t> both(q_bytes + out.size() + 16);
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(both.data()) + 15) &
                                            ~uintptr_t{15});
    p.q = base;
    p.out = base + q_bytes;
    EXPECT_EQ(rejection(p), "") << dtype_name(out_dtype);
  }
}

// Kernels round lengths up to whole tiles in int32: a max_seq_len within a tile of 2^31 is refused.
TEST(DecodeAttentionValidation, MaxSeqLenNearTheInt32LimitIsRejected) {
  const AttentionProblem problem(decode_config(DType::kBF16));
  std::vector<uint8_t> out = problem.poisoned_out();
  AttentionParams p = problem.host_params(out.data(), nullptr, nullptr);
  p.max_seq_len = std::numeric_limits<int32_t>::max() - 40;
  EXPECT_NE(rejection(p).find("decode attention: max_seq_len 2147483607 is too long; allowed: at "
                              "most 2^31 - 256 tokens"),
            std::string::npos)
      << rejection(p);
}

// The launcher accepts exactly the scalars the CPU reference accepts: each bad value is rejected
// by both, with the reference's message (field, value, allowed range).
TEST(DecodeAttentionValidation, ScalesSoftCapAndScaleRowsAreCheckedAsTheReferenceDoes) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  using Edit = std::function<void(AttentionParams&)>;
  struct Case {
    DType out_dtype;
    Edit edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {DType::kBF16, [](AttentionParams& p) { p.sm_scale = 0.0f; }, "sm_scale 0"},
      {DType::kBF16, [](AttentionParams& p) { p.sm_scale = -0.125f; }, "sm_scale -0.125"},
      {DType::kBF16, [&](AttentionParams& p) { p.sm_scale = kInf; }, "sm_scale inf"},
      {DType::kBF16, [&](AttentionParams& p) { p.sm_scale = kNan; }, "sm_scale nan"},
      {DType::kBF16, [](AttentionParams& p) { p.logit_soft_cap = -1.0f; }, "logit_soft_cap -1"},
      {DType::kBF16, [&](AttentionParams& p) { p.logit_soft_cap = kInf; }, "logit_soft_cap inf"},
      {DType::kBF16, [&](AttentionParams& p) { p.logit_soft_cap = kNan; }, "logit_soft_cap nan"},
      {DType::kFP8E4M3, [&](AttentionParams& p) { p.o_scale = kInf; }, "o_scale inf"},
      {DType::kFP8E5M2, [&](AttentionParams& p) { p.o_scale = kNan; }, "o_scale nan"},
      {DType::kNVFP4, [](AttentionParams& p) { p.nvfp4_global_scale = 0.0f; },
       "nvfp4_global_scale 0"},
      {DType::kNVFP4, [&](AttentionParams& p) { p.nvfp4_global_scale = kInf; },
       "nvfp4_global_scale inf"},
      {DType::kNVFP4, [&](AttentionParams& p) { p.nvfp4_global_scale = kNan; },
       "nvfp4_global_scale nan"},
      // kMax + 2 tokens wraps negative in int32, which passed a check of offset + num_tokens.
      {DType::kNVFP4,
       [&](AttentionParams& p) {
         p.out_scale_rows = kMax;
         p.out_scale_row_offset = kMax;
       },
       "out_scale_row_offset 2147483647 + num_tokens 2 exceeds out_scale_rows"},
  };
  for (const Case& c : cases) {
    const AttentionProblem problem(decode_config(c.out_dtype));
    std::vector<uint8_t> out = problem.poisoned_out();
    std::vector<uint8_t> scales = problem.poisoned_block_scales();
    AttentionParams p = problem.host_params(out.data(), scales.data(), nullptr);
    ASSERT_EQ(rejection(p), "") << dtype_name(c.out_dtype);
    c.edit(p);
    EXPECT_NE(rejection(p).find(c.expected), std::string::npos)
        << "expected '" << c.expected << "', got '" << rejection(p) << "'";
    EXPECT_THROW(validate_attention_params(p), Error) << c.expected;
  }
}

// The o projection's e4m3 rows (AttentionParams::out_fp8): accepted at head_dim 128 with
// 128-column groups, out null or not; refused, naming what is allowed, at head_dim 64, with a
// per-row group, with FP8 output, with padding rows, and where they overlap q. The reference
// refuses the same output fields (all but the decode kernel's own head_dim and group rule).
TEST(DecodeAttentionValidation, Fp8RowsOutputIsCheckedAndNamesWhatIsAllowed) {
  AttentionProblemConfig c = decode_config(DType::kBF16);
  c.head_dim = 128;
  const AttentionProblem problem(c);
  std::vector<uint8_t> out = problem.poisoned_out();
  const int32_t width = c.num_q_heads * 128;
  std::vector<uint8_t> codes(static_cast<size_t>(problem.num_tokens()) * width + 16);
  std::vector<float> scales(codes.size() / 128 + 1);
  auto* aligned =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(codes.data()) + 15) & ~uintptr_t{15});
  const AttentionParams base = problem.host_params(out.data(), nullptr, nullptr);
  AttentionParams p = base;
  p.out_fp8 = Fp8RowsOut{aligned, scales.data(), 128, {problem.num_tokens(), true}};
  EXPECT_EQ(rejection(p), "");
  p.out = nullptr;
  EXPECT_EQ(rejection(p), "") << "out may be null with out_fp8";
  EXPECT_NO_THROW(validate_attention_scalars(p));

  using Edit = std::function<void(AttentionParams&)>;
  const std::vector<std::pair<Edit, std::string>> refusals = {
      {[&](AttentionParams& q) { q.out_fp8.group = width; },
       "out_fp8 with group 1024 at head_dim 128 is not supported; allowed: group 128 at head_dim "
       "128"},
      {[&](AttentionParams& q) { q.out_fp8.layout.padded_rows = problem.num_tokens() + 8; },
       "allowed: 0 or num_tokens (attention writes no padding rows)"},
      {[&](AttentionParams& q) { q.out_fp8.scales = nullptr; }, "scales must not be null"},
      {[&](AttentionParams& q) {
         q.out_fp8.data = const_cast<uint8_t*>(static_cast<const uint8_t*>(q.q));
       },
       "out_fp8 overlaps q"},
      {[&](AttentionParams& q) {
         q.out_dtype = DType::kFP8E4M3;
         q.out = out.data();
       },
       "out_fp8 needs bf16 output"},
  };
  for (const auto& [edit, expected] : refusals) {
    AttentionParams bad = p;
    edit(bad);
    EXPECT_NE(rejection(bad).find(expected), std::string::npos)
        << "expected '" << expected << "', got '" << rejection(bad) << "'";
  }
  AttentionParams no_output = base;
  no_output.out = nullptr;
  EXPECT_NE(rejection(no_output).find("out is null"), std::string::npos) << rejection(no_output);

  // head_dim 64: a 128-column group spans two q heads, which the epilogue does not reduce over.
  AttentionProblemConfig c64 = decode_config(DType::kBF16);
  c64.head_dim = 64;
  const AttentionProblem problem64(c64);
  std::vector<uint8_t> out64 = problem64.poisoned_out();
  AttentionParams p64 = problem64.host_params(out64.data(), nullptr, nullptr);
  p64.out_fp8 = Fp8RowsOut{aligned, scales.data(), 128, {}};
  EXPECT_NE(rejection(p64).find("out_fp8 with group 128 at head_dim 64 is not supported"),
            std::string::npos)
      << rejection(p64);
  EXPECT_NO_THROW(validate_attention_scalars(p64)) << "the reference writes any group";
}

}  // namespace
}  // namespace quench::testing_support
