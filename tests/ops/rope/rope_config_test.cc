// RopeConfig::validate: every field that would make the angles inf/NaN, or turn a setting off
// without a word, is an error naming the field and the allowed values.
#include "quench/ops/rope/rope_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/expect_error.h"

namespace quench {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Llama-3.1's scaling, as in its config.json.
RopeConfig llama31() {
  RopeConfig c;
  c.rotary_dim = 128;
  c.theta = 500000.0f;
  c.llama3_factor = 8.0f;
  c.llama3_low_freq_factor = 1.0f;
  c.llama3_high_freq_factor = 4.0f;
  c.llama3_original_max_position = 8192;
  return c;
}

TEST(RopeConfig, ThetaMustBeFinite) {
  RopeConfig c = llama31();
  EXPECT_NO_THROW(c.validate(128));
  c.theta = kInf;
  EXPECT_QUENCH_ERROR(c.validate(128), {"rope theta inf", "finite and > 1"});
  c.theta = kNan;
  EXPECT_QUENCH_ERROR(c.validate(128), {"rope theta nan", "finite and > 1"});
}

TEST(RopeConfig, Llama3FactorsMustBeFiniteAndPositive) {
  RopeConfig c = llama31();
  c.llama3_factor = kNan;  // compared false with 0: scaling silently off
  EXPECT_QUENCH_ERROR(c.validate(128), {"llama3 factor nan", "<= 0 (no llama3 scaling)"});
  c.llama3_factor = kInf;
  EXPECT_QUENCH_ERROR(c.validate(128), {"llama3 factor inf", "finite and > 0"});
  c = llama31();
  c.llama3_low_freq_factor = 0.0f;  // original / 0 = inf: the low-frequency band vanishes
  EXPECT_QUENCH_ERROR(c.validate(128), {"llama3 low_freq_factor 0", "finite and > 0"});
  c.llama3_low_freq_factor = -1.0f;
  EXPECT_QUENCH_ERROR(c.validate(128), {"llama3 low_freq_factor -1", "finite and > 0"});
  c = llama31();
  c.llama3_high_freq_factor = kInf;
  EXPECT_QUENCH_ERROR(c.validate(128), {"llama3 high_freq_factor inf", "finite"});
  // Off (factor <= 0): the other llama3 fields are unused and not checked.
  c = llama31();
  c.llama3_factor = 0.0f;
  c.llama3_low_freq_factor = 0.0f;
  EXPECT_NO_THROW(c.validate(128));
}

// rope_pair_index reads every value but kNeox as gptj; validate names a corrupt one instead.
TEST(RopeConfig, StyleOutsideTheEnumIsRejected) {
  RopeConfig c = llama31();
  c.style = static_cast<RopeStyle>(5);
  EXPECT_QUENCH_ERROR(c.validate(128), {"RoPE style 5", "allowed: neox (0), gptj (1)"});
}

}  // namespace
}  // namespace quench
