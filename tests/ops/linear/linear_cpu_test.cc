// The CPU backend's linear layer against the reference: the same layout and values up to the
// order of the fp32 additions, at shapes that leave every tile, chunk and block partly filled.
#include "quench/ops/linear/linear_cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "harness/expect_error.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/linear/linear_reference.h"

namespace quench {
namespace {

TEST(LinearCpu, HandExampleUsesTheOutByInLayout) {
  const std::vector<float> x = {1, 2, 3, 0.5f, -1, 4};  // [2 tokens, 3 in]
  std::vector<uint16_t> w;                              // [2 out, 3 in]
  for (float v : {1.0f, 0.0f, -1.0f, 2.0f, 0.5f, 0.25f})
    w.push_back(float_to_bf16_bits(v));
  std::vector<float> out(4);
  linear_cpu(2, 3, 2, x.data(), w.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{-2.0f, 3.75f, -3.5f, 1.5f}));
}

// Each output within fp32 reassociation error of the reference's (the bound of the reference's
// own test against a double sum, twice), and not all of them equal to it bit for bit being fine.
TEST(LinearCpu, RandomShapesMatchTheReference) {
  struct Shape {
    int32_t tokens, in, out;
  };
  // Tokens past a 32-token chunk and odd (the 2-token tile's remainder); in off the 8-lane
  // vectors; rows off the 4-row tiles and the 32-row blocks; one token (a decode step).
  const Shape shapes[] = {{1, 2048, 70}, {5, 300, 37}, {33, 129, 131}, {70, 64, 33},
                          {2, 7, 5},     {1, 1, 1},    {64, 520, 96}};
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const Shape& s : shapes) {
    const std::string what =
        std::to_string(s.tokens) + " x " + std::to_string(s.in) + " -> " + std::to_string(s.out);
    std::vector<float> x(static_cast<size_t>(s.tokens) * s.in);
    for (float& v : x)
      v = dist(rng) * 3.0f;
    std::vector<uint16_t> w(static_cast<size_t>(s.out) * s.in);
    for (uint16_t& v : w)
      v = float_to_bf16_bits(dist(rng) * 0.05f);
    std::vector<float> want(static_cast<size_t>(s.tokens) * s.out);
    std::vector<float> got(want.size(), NAN);
    linear_reference(s.tokens, s.in, s.out, x.data(), w.data(), want.data());
    linear_cpu(s.tokens, s.in, s.out, x.data(), w.data(), got.data());
    for (int32_t t = 0; t < s.tokens; ++t) {
      for (int32_t n = 0; n < s.out; ++n) {
        double magnitude = 0.0;
        for (int32_t k = 0; k < s.in; ++k) {
          magnitude += std::abs(static_cast<double>(x[static_cast<size_t>(t) * s.in + k]) *
                                bf16_bits_to_float(w[static_cast<size_t>(n) * s.in + k]));
        }
        const size_t i = static_cast<size_t>(t) * s.out + n;
        ASSERT_NEAR(got[i], want[i], 2e-6 * s.in * magnitude + 1e-30)
            << what << ": token " << t << " feature " << n;
      }
    }
  }
}

TEST(LinearCpu, BadSizesAndNullPointersAreErrors) {
  float x = 1.0f, out = 0.0f;
  const uint16_t w = float_to_bf16_bits(1.0f);
  EXPECT_QUENCH_ERROR(linear_cpu(1, 0, 1, &x, &w, &out), {"features", ">= 1"});
  EXPECT_QUENCH_ERROR(linear_cpu(-1, 1, 1, &x, &w, &out), {"num_tokens", ">= 0"});
  EXPECT_QUENCH_ERROR(linear_cpu(1, 1, 1, nullptr, &w, &out), {"must not be null"});
  linear_cpu(0, 4, 4, &x, &w, &out);  // no tokens: nothing to do, nothing read
}

}  // namespace
}  // namespace quench
