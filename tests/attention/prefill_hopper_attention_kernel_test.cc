// The two backend faces of the Hopper prefill kernel: for an FP8 query `auto` picks
// "prefill_hopper_fp8pv" (FP8 P·V), which serves only an FP8 query; "prefill_hopper" (bf16 P·V)
// serves every query and is what `auto` picks for a bf16 one, or by name for an FP8 one.
#include <gtest/gtest.h>

#include <string>

#include "harness/log_capture.h"
#include "quench/attention/attention_kernel_override.h"
#include "quench/attention/attention_kernel_registry.h"
#include "quench/attention/attention_kernel_selection.h"
#include "quench/attention/prefill_hopper_attention_kernel.h"

namespace quench {
namespace {

using Kind = AttentionKernelOverride::Kind;

AttentionConfig llama_3_8b_on_sm90(DType kv_dtype) {
  AttentionConfig c;
  c.compute_capability = 90;
  c.num_q_heads = 32;
  c.num_kv_heads = 8;
  c.kv_dtype = kv_dtype;
  return c;
}

TEST(PrefillHopperAttentionKernel, AutoPicksFp8PvForAnFp8Query) {
  testing_support::LogCapture quiet;
  const auto s = AttentionBackendSelection::decide(llama_3_8b_on_sm90(DType::kFP8E4M3), {}, {});
  EXPECT_EQ(s.prefill().kernel->name(), kPrefillHopperFp8PvKernelName);
  EXPECT_EQ(s.prefill().q_dtype, DType::kFP8E4M3);
}

TEST(PrefillHopperAttentionKernel, AutoPicksBf16PvForABf16Query) {
  testing_support::LogCapture quiet;
  const auto s = AttentionBackendSelection::decide(llama_3_8b_on_sm90(DType::kBF16), {}, {});
  EXPECT_EQ(s.prefill().kernel->name(), kPrefillHopperKernelName);
  EXPECT_EQ(s.prefill().q_dtype, DType::kBF16);
}

TEST(PrefillHopperAttentionKernel, Bf16PvIsServedWhenNamedWithAnFp8Query) {
  testing_support::LogCapture log;
  const auto s = AttentionBackendSelection::decide(llama_3_8b_on_sm90(DType::kFP8E4M3),
                                                   {Kind::kUse, kPrefillHopperKernelName}, {});
  EXPECT_EQ(s.prefill().kernel->name(), kPrefillHopperKernelName);
  EXPECT_TRUE(s.prefill().override_honoured);
  EXPECT_EQ(s.prefill().q_dtype, DType::kFP8E4M3);
  EXPECT_NE(s.prefill().reason.find("bf16 P·V"), std::string::npos) << s.prefill().reason;
  EXPECT_EQ(log.text(LogLevel::kWarning), "");
}

TEST(PrefillHopperAttentionKernel, Fp8PvNamedOverABf16CacheWarnsAndFallsBack) {
  testing_support::LogCapture log;
  const auto s = AttentionBackendSelection::decide(llama_3_8b_on_sm90(DType::kBF16),
                                                   {Kind::kUse, kPrefillHopperFp8PvKernelName}, {});
  EXPECT_EQ(s.prefill().kernel->name(), kPrefillHopperKernelName);
  EXPECT_FALSE(s.prefill().override_honoured);
  EXPECT_NE(log.text(LogLevel::kWarning).find("prefill_hopper_fp8pv needs an FP8 query"),
            std::string::npos)
      << log.text(LogLevel::kWarning);
}

}  // namespace
}  // namespace quench
