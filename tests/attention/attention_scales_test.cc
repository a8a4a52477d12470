#include "quench/attention/attention_scales.h"

#include <gtest/gtest.h>

#include "harness/log_capture.h"
#include "quench/core/error.h"

namespace quench {
namespace {

using testing_support::LogCapture;

TEST(AttentionScales, CheckpointScalesAreKeptSeparately) {
  CheckpointAttentionScales ckpt;
  ckpt.q_scale = std::vector<float>{0.02f};
  ckpt.k_scale = std::vector<float>{0.03f};
  ckpt.v_scale = std::vector<float>{0.05f, 0.07f};
  ckpt.o_scale = std::vector<float>{0.11f};
  LogCapture log;
  const auto s = AttentionScales::from_checkpoint(ckpt, 2, DType::kFP8E4M3, "layers.0");
  EXPECT_EQ(log.lines().size(), 0u);
  EXPECT_EQ(s.q_scale(), 0.02f);
  EXPECT_EQ(s.o_scale(), 0.11f);
  EXPECT_EQ(s.k_scale().per_head, nullptr);
  EXPECT_EQ(s.k_scale().at(1), 0.03f);
  ASSERT_NE(s.v_scale().per_head, nullptr);
  EXPECT_EQ(s.v_scale().at(0), 0.05f);
  EXPECT_EQ(s.v_scale().at(1), 0.07f);
}

TEST(AttentionScales, MissingScalesFollowVllmDefaultsWithWarnings) {
  CheckpointAttentionScales ckpt;
  ckpt.k_scale = std::vector<float>{0.03f, 0.04f};
  LogCapture log;
  const auto s = AttentionScales::from_checkpoint(ckpt, 2, DType::kFP8E4M3, "layers.3");
  EXPECT_EQ(s.q_scale(), 0.04f);  // q_scale = k_scale (the larger per-head one)
  EXPECT_EQ(s.v_scale().at(1), 1.0f);
  EXPECT_EQ(s.o_scale(), 1.0f);
  const std::string warnings = log.text(LogLevel::kWarning);
  EXPECT_EQ(log.count(LogLevel::kWarning), 3) << warnings;
  EXPECT_NE(warnings.find("layers.3: checkpoint has no v_scale; using 1.0."), std::string::npos);
  EXPECT_NE(warnings.find("layers.3: checkpoint has no q_scale; using q_scale = k_scale = 0.04."),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("no o_scale for the fp8_e4m3 output"), std::string::npos);
}

TEST(AttentionScales, NoScalesAtAll) {
  LogCapture log;
  const auto s = AttentionScales::from_checkpoint({}, 8, DType::kBF16, "layers.0");
  EXPECT_EQ(s.q_scale(), 1.0f);
  EXPECT_EQ(s.k_scale().at(7), 1.0f);
  EXPECT_EQ(log.count(LogLevel::kWarning), 3);  // k, v, q; o unused for a bf16 output
}

TEST(AttentionScales, RejectsBadScales) {
  LogCapture log;  // defaults for the absent scales warn; only the errors matter here
  CheckpointAttentionScales bad_count;
  bad_count.k_scale = std::vector<float>{1.0f, 2.0f, 3.0f};
  EXPECT_THROW(AttentionScales::from_checkpoint(bad_count, 2, DType::kBF16, "l"), Error);
  CheckpointAttentionScales per_head_q;
  per_head_q.q_scale = std::vector<float>{1.0f, 2.0f};
  EXPECT_THROW(AttentionScales::from_checkpoint(per_head_q, 2, DType::kBF16, "l"), Error);
  CheckpointAttentionScales zero;
  zero.v_scale = std::vector<float>{0.0f};
  try {
    AttentionScales::from_checkpoint(zero, 2, DType::kBF16, "layers.9");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.9: v_scale[0] = 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace quench
