#include "quench/ops/rope/rope_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "harness/expect_error.h"
#include "harness/random_inputs.h"

namespace quench {
namespace {

RopeConfig small_config(RopeStyle style, int32_t rotary_dim) {
  RopeConfig c;
  c.style = style;
  c.rotary_dim = rotary_dim;
  c.theta = 10000.0f;
  return c;
}

TEST(RopeReference, InvFreqPlain) {
  const RopeConfig c = small_config(RopeStyle::kNeox, 128);
  EXPECT_EQ(rope_inv_freq(c, 0), 1.0f);
  EXPECT_FLOAT_EQ(rope_inv_freq(c, 1), static_cast<float>(std::pow(10000.0, -2.0 / 128.0)));
  EXPECT_FLOAT_EQ(rope_inv_freq(c, 32), 0.01f);  // 10000^(-64/128)
}

// Llama-3.1-8B: theta 500000, factor 8, low 1, high 4, original 8192. Wavelength 2*pi/base
// below 2048 keeps base, above 8192 divides it by 8, in between blends with
// smooth = (8192 / wavelength - 1) / 3. Values computed by hand (Python, double).
TEST(RopeReference, InvFreqLlama31) {
  RopeConfig c;
  c.rotary_dim = 128;
  c.theta = 500000.0f;
  c.llama3_factor = 8.0f;
  c.llama3_low_freq_factor = 1.0f;
  c.llama3_high_freq_factor = 4.0f;
  c.llama3_original_max_position = 8192;
  EXPECT_EQ(rope_inv_freq(c, 0), 1.0f);
  EXPECT_FLOAT_EQ(rope_inv_freq(c, 20), 0.016560440080994446f);   // wavelength 379: unchanged
  EXPECT_FLOAT_EQ(rope_inv_freq(c, 30), 0.0013718935677611381f);  // 2948: blended
  EXPECT_FLOAT_EQ(rope_inv_freq(c, 34), 0.0001785078127679964f);  // 6695: blended
  EXPECT_FLOAT_EQ(rope_inv_freq(c, 35), 9.556212353964683e-05f);  // 8219: base / 8
  EXPECT_FLOAT_EQ(rope_inv_freq(c, 63), 3.068925988914511e-07f);
}

// x = [1, 2, 3, 4], rotary_dim 4, theta 10000: pair 0 turns by p*1, pair 1 by p*0.01.
struct KnownCase {
  RopeStyle style;
  int32_t a0, b0, a1, b1;  // elements of pair 0 and pair 1
};

TEST(RopeReference, KnownVectorBothStylesCacheAndOnTheFly) {
  for (const KnownCase& kc :
       {KnownCase{RopeStyle::kNeox, 0, 2, 1, 3}, KnownCase{RopeStyle::kGptj, 0, 1, 2, 3}}) {
    const RopeConfig c = small_config(kc.style, 4);
    const int32_t position = 3;
    const std::vector<float> cache = build_rope_cos_sin_cache(c, 8);
    for (const float* cos_sin : {static_cast<const float*>(nullptr), cache.data()}) {
      std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
      apply_rope_reference(c, 1, 1, 4, &position, cos_sin, 8, x.data());
      std::vector<double> expected(4);
      const double input[4] = {1, 2, 3, 4};
      const double angle0 = 3.0, angle1 = 0.03;
      expected[kc.a0] = input[kc.a0] * std::cos(angle0) - input[kc.b0] * std::sin(angle0);
      expected[kc.b0] = input[kc.b0] * std::cos(angle0) + input[kc.a0] * std::sin(angle0);
      expected[kc.a1] = input[kc.a1] * std::cos(angle1) - input[kc.b1] * std::sin(angle1);
      expected[kc.b1] = input[kc.b1] * std::cos(angle1) + input[kc.a1] * std::sin(angle1);
      for (int d = 0; d < 4; ++d) {
        EXPECT_NEAR(x[d], expected[d], 2e-6)
            << rope_style_name(kc.style) << " d=" << d << (cos_sin ? " cache" : " on the fly");
      }
    }
  }
}

TEST(RopeReference, PartialRotaryLeavesTailUntouched) {
  for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kGptj}) {
    const RopeConfig c = small_config(style, 4);
    const int32_t positions[2] = {3, 5};
    testing_support::RandomInputs rng(7);
    std::vector<float> x = rng.uniform(2 * 3 * 8);  // [2 tokens, 3 heads, head_dim 8]
    const std::vector<float> before = x;
    apply_rope_reference(c, 2, 3, 8, positions, nullptr, 0, x.data());
    for (int row = 0; row < 6; ++row) {
      EXPECT_EQ(std::memcmp(&x[row * 8 + 4], &before[row * 8 + 4], 4 * sizeof(float)), 0);
      EXPECT_NE(x[row * 8], before[row * 8]);
      // A rotation keeps the norm of the rotated part.
      double n0 = 0, n1 = 0;
      for (int d = 0; d < 4; ++d) {
        n0 += before[row * 8 + d] * before[row * 8 + d];
        n1 += x[row * 8 + d] * x[row * 8 + d];
      }
      EXPECT_NEAR(n0, n1, 1e-5);
    }
  }
}

TEST(RopeReference, CacheHoldsDoubleCosSinRoundedToFloat) {
  RopeConfig c = small_config(RopeStyle::kNeox, 64);
  c.llama3_factor = 8.0f;
  const std::vector<float> cache = build_rope_cos_sin_cache(c, 5000);
  ASSERT_EQ(cache.size(), 5000u * 64u);
  for (int32_t p : {0, 1, 777, 4999}) {
    for (int32_t i : {0, 5, 31}) {
      const double angle = static_cast<double>(p) * static_cast<double>(rope_inv_freq(c, i));
      EXPECT_EQ(cache[p * 64 + i], static_cast<float>(std::cos(angle))) << p << " " << i;
      EXPECT_EQ(cache[p * 64 + 32 + i], static_cast<float>(std::sin(angle))) << p << " " << i;
    }
  }
}

// With a cache the result is exactly rope_rotate_pair on the cached values: what a GPU kernel
// reading the same cache must reproduce bit for bit.
TEST(RopeReference, CachePathIsBitExactRotatePair) {
  for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kGptj}) {
    const RopeConfig c = small_config(style, 96);
    const std::vector<float> cache = build_rope_cos_sin_cache(c, 300);
    testing_support::RandomInputs rng(11);
    const int32_t T = 5, H = 3, D = 128;
    std::vector<int32_t> positions(T);
    for (auto& p : positions)
      p = rng.uniform_int(0, 299);
    std::vector<float> x = rng.normal(static_cast<size_t>(T * H * D));
    std::vector<float> expected = x;
    for (int32_t t = 0; t < T; ++t) {
      for (int32_t h = 0; h < H; ++h) {
        float* head = &expected[static_cast<size_t>((t * H + h) * D)];
        for (int32_t i = 0; i < 48; ++i) {
          const int32_t a = style == RopeStyle::kNeox ? i : 2 * i;
          const int32_t b = style == RopeStyle::kNeox ? i + 48 : 2 * i + 1;
          const float cs = cache[positions[t] * 96 + i], sn = cache[positions[t] * 96 + 48 + i];
          const float xa = head[a], xb = head[b];
          head[a] = std::fmaf(xa, cs, -(xb * sn));
          head[b] = std::fmaf(xb, cs, xa * sn);
        }
      }
    }
    apply_rope_reference(c, T, H, D, positions.data(), cache.data(), 300, x.data());
    EXPECT_EQ(std::memcmp(x.data(), expected.data(), x.size() * sizeof(float)), 0);
  }
}

TEST(RopeReference, OnTheFlyAgreesWithCache) {
  const RopeConfig c = small_config(RopeStyle::kNeox, 128);
  const std::vector<float> cache = build_rope_cos_sin_cache(c, 4096);
  for (int32_t p : {1, 100, 4095}) {
    for (int32_t i : {0, 1, 63}) {
      float c0, s0, c1, s1;
      rope_cos_sin(c, nullptr, p, i, &c0, &s0);
      rope_cos_sin(c, cache.data(), p, i, &c1, &s1);
      // fp32 angle rounding: |error| <= p * ulp(inv_freq) / 2 + ulp(angle).
      EXPECT_NEAR(c0, c1, 1e-3) << p << " " << i;
      EXPECT_NEAR(s0, s1, 1e-3) << p << " " << i;
    }
  }
  float c0, s0;
  rope_cos_sin(c, nullptr, 2, 0, &c0, &s0);
  EXPECT_EQ(c0, std::cos(2.0f));
  EXPECT_EQ(s0, std::sin(2.0f));
}

TEST(RopeReference, PositionZeroIsIdentity) {
  const RopeConfig c = small_config(RopeStyle::kGptj, 64);
  testing_support::RandomInputs rng(3);
  std::vector<float> x = rng.uniform(64);
  const std::vector<float> before = x;
  const int32_t position = 0;
  apply_rope_reference(c, 1, 1, 64, &position, nullptr, 0, x.data());
  EXPECT_EQ(x, before);
}

TEST(RopeReference, Errors) {
  const RopeConfig c = small_config(RopeStyle::kNeox, 4);
  std::vector<float> x(8, 1.0f);
  const int32_t negative[2] = {0, -1};
  EXPECT_QUENCH_ERROR(apply_rope_reference(c, 2, 1, 4, negative, nullptr, 0, x.data()),
                      {"positions[1]=-1", ">= 0"});
  const std::vector<float> cache = build_rope_cos_sin_cache(c, 4);
  const int32_t beyond[2] = {3, 4};
  EXPECT_QUENCH_ERROR(apply_rope_reference(c, 2, 1, 4, beyond, cache.data(), 4, x.data()),
                      {"positions[1]=4", "[0, 4)"});
  const int32_t ok[1] = {1};
  EXPECT_QUENCH_ERROR(
      apply_rope_reference(small_config(RopeStyle::kNeox, 6), 1, 1, 4, ok, nullptr, 0, x.data()),
      {"rotary_dim 6", "head_dim=4"});
  EXPECT_QUENCH_ERROR(
      apply_rope_reference(small_config(RopeStyle::kNeox, 3), 1, 1, 4, ok, nullptr, 0, x.data()),
      {"rotary_dim 3", "even"});
  EXPECT_QUENCH_ERROR(apply_rope_reference(c, 1, 0, 4, ok, nullptr, 0, x.data()), {"num_heads 0"});
  EXPECT_QUENCH_ERROR(build_rope_cos_sin_cache(c, 0), {"max_position 0", ">= 1"});
}

}  // namespace
}  // namespace quench
