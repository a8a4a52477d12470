// Every way validate_attention_params rejects an AttentionParams: the message names the field
// and the bad value.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "harness/attention_problem.h"
#include "quench/core/error.h"
#include "quench/ops/attention/attention_reference.h"

namespace quench::testing_support {
namespace {

// A valid FP8-query, NVFP4-output batch (so every check is reachable) whose index arrays are
// mutable copies.
class AttentionValidation : public ::testing::Test {
 protected:
  AttentionValidation() : problem_(config()) {
    q_offsets_ = problem_.q_offsets();
    seq_lens_ = problem_.seq_lens();
    block_table_ = problem_.block_table();
    out_ = problem_.poisoned_out();
    scales_ = problem_.poisoned_block_scales();
    params_ = problem_.host_params(out_.data(), scales_.data(), nullptr);
    params_.q_offsets = q_offsets_.data();
    params_.seq_lens = seq_lens_.data();
    params_.block_table = block_table_.data();
    params_.k_scale.per_head = k_scales_;
    params_.v_scale.per_head = nullptr;
  }

  static AttentionProblemConfig config() {
    AttentionProblemConfig c;
    c.seqs = {{3, 20}, {1, 33}};  // 2 and 3 pages of 16
    c.num_q_heads = 8;
    c.num_kv_heads = 2;
    c.q_dtype = DType::kFP8E4M3;
    c.kv_dtype = DType::kFP8E4M3;
    c.out_dtype = DType::kNVFP4;
    c.sinks = true;
    return c;
  }

  // Expects validate_attention_params to throw a quench::Error whose message contains every
  // fragment.
  void expect_rejected(const std::vector<std::string>& fragments) {
    try {
      validate_attention_params(params_);
      ADD_FAILURE() << "accepted; expected an error mentioning '" << fragments.front() << "'";
    } catch (const Error& e) {
      for (const std::string& fragment : fragments) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
            << "message: " << e.what() << "\nmissing: " << fragment;
      }
    }
  }

  AttentionProblem problem_;
  std::vector<int32_t> q_offsets_, seq_lens_, block_table_;
  std::vector<uint8_t> out_, scales_;
  float k_scales_[2] = {0.5f, 2.0f};
  AttentionParams params_;
};

TEST_F(AttentionValidation, BaseIsValid) {
  EXPECT_NO_THROW(validate_attention_params(params_));
}

TEST_F(AttentionValidation, NullPointers) {
  const std::vector<std::pair<std::string, std::function<void(AttentionParams&)>>> cases = {
      {"attention q is null", [](AttentionParams& p) { p.q = nullptr; }},
      {"k_cache is null", [](AttentionParams& p) { p.k_cache = nullptr; }},
      {"v_cache is null", [](AttentionParams& p) { p.v_cache = nullptr; }},
      {"out is null", [](AttentionParams& p) { p.out = nullptr; }},
      {"q_offsets is null", [](AttentionParams& p) { p.q_offsets = nullptr; }},
      {"seq_lens is null", [](AttentionParams& p) { p.seq_lens = nullptr; }},
      {"block_table is null", [](AttentionParams& p) { p.block_table = nullptr; }},
      {"out_block_scales is null", [](AttentionParams& p) { p.out_block_scales = nullptr; }},
  };
  const AttentionParams valid = params_;
  for (const auto& [message, mutate] : cases) {
    params_ = valid;
    mutate(params_);
    expect_rejected({message});
  }
}

TEST_F(AttentionValidation, KvLayout) {
  params_.kv.page_size = 24;
  expect_rejected({"page_size 24", "16, 32, 64"});
}

TEST_F(AttentionValidation, QueryDtype) {
  params_.q_dtype = DType::kF32;
  expect_rejected({"q_dtype f32", "bf16, f16, fp8_e4m3, fp8_e5m2"});
}

TEST_F(AttentionValidation, Fp8QueryNeedsFp8Cache) {
  params_.kv.dtype = DType::kBF16;
  expect_rejected({"q_dtype fp8_e4m3 with KV dtype bf16", "fp8_e4m3 or fp8_e5m2"});
}

TEST_F(AttentionValidation, F16QueryNeedsFp8Cache) {
  params_.q_dtype = DType::kF16;
  params_.kv.dtype = DType::kBF16;
  expect_rejected({"q_dtype f16 with KV dtype bf16", "fp8_e4m3 or fp8_e5m2"});
}

TEST_F(AttentionValidation, OutputDtype) {
  params_.out_dtype = DType::kF16;
  expect_rejected({"out_dtype f16", "bf16, fp8_e4m3, fp8_e5m2, nvfp4"});
}

TEST_F(AttentionValidation, HeadsNotDivisible) {
  params_.num_q_heads = 7;
  expect_rejected({"num_q_heads 7", "multiple of num_kv_heads 2"});
}

TEST_F(AttentionValidation, NoSequences) {
  params_.num_seqs = 0;
  expect_rejected({"num_seqs 0", ">= 1"});
}

TEST_F(AttentionValidation, FirstOffsetNotZero) {
  q_offsets_[0] = 1;
  expect_rejected({"q_offsets[0] 1", "allowed: 0"});
}

TEST_F(AttentionValidation, LastOffsetNotNumTokens) {
  params_.num_tokens = 5;
  expect_rejected({"q_offsets[num_seqs=2] 4 != num_tokens 5"});
}

TEST_F(AttentionValidation, OffsetsNotMonotone) {
  q_offsets_ = {0, 5, 4};
  params_.num_tokens = 4;
  params_.max_q_len = 5;  // keeps seq 0 (5 rows of 20 tokens) itself valid
  expect_rejected({"not non-decreasing at seq 1", "q_offsets[1] = 5 > q_offsets[2] = 4"});
}

TEST_F(AttentionValidation, BlockTableStride) {
  params_.block_table_stride = 0;
  expect_rejected({"block_table_stride 0", ">= 1"});
}

TEST_F(AttentionValidation, NegativeSeqLen) {
  q_offsets_ = {0, 0, 4};
  seq_lens_[0] = -3;
  expect_rejected({"seq_lens[0] -3", ">= 0"});
}

TEST_F(AttentionValidation, QueryLongerThanSequence) {
  seq_lens_[0] = 2;
  expect_rejected({"seq 0 has q_len 3 > seq_lens[0] 2"});
}

TEST_F(AttentionValidation, MaxQLenTooSmall) {
  params_.max_q_len = 2;
  expect_rejected({"q_len 3 > max_q_len 2"});
}

TEST_F(AttentionValidation, MaxSeqLenTooSmall) {
  params_.max_seq_len = 32;
  expect_rejected({"seq_lens[1] 33 > max_seq_len 32"});
}

TEST_F(AttentionValidation, SequenceNeedsMorePagesThanTheStride) {
  params_.block_table_stride = 2;  // seq 1 (33 tokens) needs 3
  expect_rejected({"needs 3 pages", "block_table_stride is 2"});
}

// seq_len + page_size - 1 overflows int32 near INT32_MAX; the page count must not wrap negative
// and let a table of a few columns through for a sequence that needs 134217728 pages.
TEST_F(AttentionValidation, PageCountOfTheLongestSeqLenDoesNotOverflow) {
  const int32_t longest = std::numeric_limits<int32_t>::max();
  seq_lens_[1] = longest;
  params_.max_seq_len = longest;
  expect_rejected({"needs 134217728 pages",
                   "block_table_stride is " + std::to_string(params_.block_table_stride)});
}

TEST_F(AttentionValidation, PageIdOutOfRange) {
  block_table_[1] = params_.kv.num_pages;
  expect_rejected({"block_table[0][1] = page " + std::to_string(params_.kv.num_pages),
                   "1.." + std::to_string(params_.kv.num_pages - 1)});
}

TEST_F(AttentionValidation, NullPageInUse) {
  block_table_[0] = 0;
  expect_rejected({"block_table[0][0] = page 0", "reserved null page"});
}

TEST_F(AttentionValidation, SmScale) {
  params_.sm_scale = 0.0f;
  expect_rejected({"sm_scale 0", "finite and > 0"});
  params_.sm_scale = NAN;
  expect_rejected({"sm_scale nan"});
}

TEST_F(AttentionValidation, QScaleOfFp8Query) {
  params_.q_scale = -1.0f;
  expect_rejected({"q_scale -1", "finite and > 0"});
}

TEST_F(AttentionValidation, QScaleIgnoredFor16BitQuery) {
  params_.q_dtype = DType::kBF16;
  params_.q_scale = -1.0f;
  EXPECT_NO_THROW(validate_attention_params(params_));
}

TEST_F(AttentionValidation, KScalePerTensor) {
  params_.k_scale.per_head = nullptr;
  params_.k_scale.per_tensor = 0.0f;
  expect_rejected({"k_scale.per_tensor 0", "finite and > 0"});
}

TEST_F(AttentionValidation, VScalePerHead) {
  const float bad[2] = {1.0f, INFINITY};
  params_.v_scale.per_head = bad;
  expect_rejected({"v_scale.per_head[1] inf", "finite and > 0"});
}

TEST_F(AttentionValidation, WindowLeft) {
  params_.window_left = -2;
  expect_rejected({"window_left -2", "-1 (no window) or >= 0"});
}

TEST_F(AttentionValidation, SoftCap) {
  params_.logit_soft_cap = -1.0f;
  expect_rejected({"logit_soft_cap -1", "0 (off) or finite and > 0"});
  params_.logit_soft_cap = INFINITY;
  expect_rejected({"logit_soft_cap inf"});
}

TEST_F(AttentionValidation, Sinks) {
  std::vector<float> sinks(8, 0.5f);
  sinks[5] = NAN;
  params_.sinks = sinks.data();
  expect_rejected({"sinks[5] nan", "finite"});
}

TEST_F(AttentionValidation, OScaleOfFp8Output) {
  params_.out_dtype = DType::kFP8E5M2;
  params_.o_scale = 0.0f;
  expect_rejected({"o_scale 0", "finite and > 0"});
}

TEST_F(AttentionValidation, Nvfp4GlobalScale) {
  params_.nvfp4_global_scale = -2.0f;
  expect_rejected({"nvfp4_global_scale -2", "finite and > 0"});
}

TEST_F(AttentionValidation, Nvfp4ScaleRowOffset) {
  params_.out_scale_row_offset = -1;
  expect_rejected({"out_scale_row_offset -1", ">= 0"});
}

TEST_F(AttentionValidation, Nvfp4ScaleRowsTooFew) {
  params_.out_scale_row_offset = 1;  // 4 tokens from row 1 need 5 rows; the tensor has 4
  expect_rejected({"out_scale_row_offset 1 + num_tokens 4 exceeds out_scale_rows 4"});
}

TEST_F(AttentionValidation, ReferenceValidatesFirst) {
  params_.window_left = -5;
  EXPECT_THROW(attention_reference(params_), Error);
}

}  // namespace
}  // namespace quench::testing_support
