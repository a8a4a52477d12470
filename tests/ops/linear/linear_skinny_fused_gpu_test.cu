// The weight-streaming linear kernel with the decoder's residual add + RMSNorm in front and,
// optionally, SwiGLU behind (linear_skinny_fused.h), against the composition of the CPU
// references on random inputs with non-unit norm weights: the bf16 residual add, then
// qk_rms_norm_reference over the row and one bf16 rounding, then linear_reference, then (SwiGLU)
// one bf16 rounding of the gate and up sums and swiglu_reference. The summed residual must be
// written exactly, and left alone where there is no delta. Over FP8 weights (per-channel and
// block scales) the reference's linear is linear_fp8_weight_reference.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/device_buffer.h"
#include "harness/expect_error.h"
#include "harness/linear_expectations.h"
#include "harness/random_inputs.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/linear/linear_reference.h"
#include "quench/ops/linear/linear_skinny.h"
#include "quench/ops/linear/linear_skinny_fused.h"
#include "quench/ops/qk_norm/qk_norm_reference.h"
#include "quench/ops/swiglu/swiglu_reference.h"

namespace quench {
namespace {

using testing_support::DeviceBuffer;

std::vector<uint16_t> random_bf16(size_t n, float mean, float stddev, uint64_t seed) {
  std::vector<uint16_t> v;
  for (float f : testing_support::RandomInputs(seed).normal(n, mean, stddev))
    v.push_back(float_to_bf16_bits(f));
  return v;
}

float round_bf16(float f) {
  return bf16_bits_to_float(float_to_bf16_bits(f));
}

struct Case {
  int32_t tokens, in, out;
  bool delta, swiglu;
  // FP8 weights: kTensor means bf16 weights here; kChannel or kBlock (128 x 128) FP8.
  WeightScaling fp8 = WeightScaling::kTensor;
};

void expect_matches_reference(const Case& c, uint64_t seed) {
  const bool fp8 = c.fp8 != WeightScaling::kTensor;
  SCOPED_TRACE(::testing::Message()
               << c.tokens << " x " << c.in << " -> " << c.out << (c.delta ? " delta" : "")
               << (c.swiglu ? " swiglu" : "") << (fp8 ? " fp8 " : "")
               << (fp8 ? weight_scaling_name(c.fp8) : ""));
  const size_t n_x = static_cast<size_t>(c.tokens) * c.in;
  const int32_t rows = c.swiglu ? 2 * c.out : c.out;
  const auto residual = random_bf16(n_x, 0.1f, 1.0f, seed);
  const auto delta = random_bf16(n_x, 0.0f, 0.5f, seed + 1);
  const auto norm_weight = random_bf16(static_cast<size_t>(c.in), 1.0f, 0.3f, seed + 2);
  const auto w = random_bf16(static_cast<size_t>(rows) * c.in, 0.0f, 0.05f, seed + 3);
  const testing_support::Fp8TestWeight w8(
      fp8 ? rows : 1, fp8 ? c.in : 16, fp8 ? c.fp8 : WeightScaling::kChannel, 128, 128, seed + 4);
  // The weights' values, as the reference multiplies them.
  const auto weight_value = [&](int32_t row, int32_t k) {
    const size_t i = static_cast<size_t>(row) * c.in + k;
    return fp8 ? w8.values[i] : bf16_bits_to_float(w[i]);
  };
  const float eps = 1e-5f;

  // The reference: residual add, norm, bf16 rounding, linear.
  std::vector<float> summed(n_x), h(n_x);
  for (size_t i = 0; i < n_x; ++i) {
    const float r = bf16_bits_to_float(residual[i]);
    summed[i] = c.delta ? round_bf16(r + bf16_bits_to_float(delta[i])) : r;
  }
  h = summed;
  qk_rms_norm_reference(c.tokens, 1, c.in, norm_weight.data(), eps, h.data());
  for (float& v : h)
    v = round_bf16(v);
  std::vector<float> sums(static_cast<size_t>(c.tokens) * rows);
  if (fp8) {
    sums = w8.reference(c.tokens, h);
  } else {
    linear_reference(c.tokens, c.in, rows, h.data(), w.data(), sums.data());
  }

  const DeviceBuffer d_residual = DeviceBuffer::from_host(residual);
  const DeviceBuffer d_delta = DeviceBuffer::from_host(delta);
  const DeviceBuffer d_norm = DeviceBuffer::from_host(norm_weight);
  const DeviceBuffer d_w = DeviceBuffer::from_host(w);
  const std::vector<uint16_t> poison(n_x, 0x7fc1);  // a NaN no kernel writes
  const DeviceBuffer d_residual_out = DeviceBuffer::from_host(poison);
  const DeviceBuffer d_out(static_cast<size_t>(c.tokens) * c.out * 2);
  SkinnyResidualNorm norm;
  norm.residual = d_residual.as<uint16_t>();
  norm.delta = c.delta ? d_delta.as<uint16_t>() : nullptr;
  norm.residual_out = d_residual_out.as<uint16_t>();
  norm.weight = d_norm.as<uint16_t>();
  norm.eps = eps;
  linear_skinny_norm_cuda(c.tokens, c.in, c.out, norm,
                          fp8 ? w8.device() : LinearWeight::bf16(d_w.as<uint16_t>()), c.swiglu,
                          d_out.as<uint16_t>(), nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> got = d_out.to_host<uint16_t>();
  const std::vector<uint16_t> got_residual = d_residual_out.to_host<uint16_t>();

  for (size_t i = 0; i < n_x; ++i) {
    ASSERT_EQ(got_residual[i], c.delta ? float_to_bf16_bits(summed[i]) : poison[i])
        << "residual_out at " << i;
  }
  // Each sum differs from the reference's by its order (4 sqrt(in) fp32 epsilons of the terms'
  // magnitudes) and by the normalised inputs whose bf16 rounding the kernel's other reduction
  // order flips (a bf16 step of the largest term, a few times over).
  const auto sum_tolerance = [&](int32_t t, int32_t row) {
    double magnitude = 0.0, largest = 0.0;
    for (int32_t k = 0; k < c.in; ++k) {
      const double term = std::abs(static_cast<double>(h[static_cast<size_t>(t) * c.in + k]) *
                                   weight_value(row, k));
      magnitude += term;
      largest = std::max(largest, term);
    }
    return 4.0 * std::sqrt(static_cast<double>(c.in)) * 5.96e-8 * magnitude +
           4.0 * 0.0078125 * largest + 1e-7;
  };
  for (int32_t t = 0; t < c.tokens; ++t) {
    for (int32_t n = 0; n < c.out; ++n) {
      const float value = bf16_bits_to_float(got[static_cast<size_t>(t) * c.out + n]);
      const float s = sums[static_cast<size_t>(t) * rows + n];
      if (!c.swiglu) {
        ASSERT_NEAR(value, s, std::abs(s) * 0.0039 + sum_tolerance(t, n)) << t << ", " << n;
        continue;
      }
      const float u = sums[static_cast<size_t>(t) * rows + c.out + n];
      const float g16 = round_bf16(s), u16 = round_bf16(u);
      float want = 0.0f;
      swiglu_reference(1, 1, &g16, &u16, &want);
      // A flipped bf16 rounding of g or u (a step each, beside their sum tolerances) moves
      // silu(g) * u by at most these, and the result is rounded once more.
      const double silu = std::abs(g16 / (1.0 + std::exp(-static_cast<double>(g16))));
      const double dg = std::abs(g16) * 0.0078125 + sum_tolerance(t, n);
      const double du = std::abs(u16) * 0.0078125 + sum_tolerance(t, c.out + n);
      const double tol = 1.1 * std::abs(u16) * dg + silu * du + std::abs(want) * 0.0039 + 1e-7;
      ASSERT_NEAR(value, want, tol) << t << ", " << n << " (g " << g16 << ", u " << u16 << ")";
    }
  }
}

TEST(LinearSkinnyFusedGpu, NormInFrontMatchesTheReference) {
  uint64_t seed = 100;
  for (int32_t tokens : {1, 2, 5, 8}) {
    for (const auto& [in, out] :
         std::vector<std::pair<int32_t, int32_t>>{{8, 3}, {328, 200}, {2048, 37}, {2048, 3072}}) {
      for (bool delta : {false, true})
        expect_matches_reference({tokens, in, out, delta, false}, seed += 4);
    }
  }
}

TEST(LinearSkinnyFusedGpu, NormAndSwigluMatchTheReference) {
  uint64_t seed = 200;
  for (int32_t tokens : {1, 3, 8}) {
    for (const auto& [in, out] :
         std::vector<std::pair<int32_t, int32_t>>{{8, 5}, {512, 300}, {2048, 1024}}) {
      for (bool delta : {false, true})
        expect_matches_reference({tokens, in, out, delta, true}, seed += 4);
    }
  }
}

// FP8 weights with per-channel and block scales, plain and SwiGLU, with and without the add.
TEST(LinearSkinnyFusedGpu, Fp8WeightsMatchTheReference) {
  uint64_t seed = 400;
  for (WeightScaling scaling : {WeightScaling::kChannel, WeightScaling::kBlock}) {
    for (int32_t tokens : {1, 4, 8}) {
      for (bool swiglu : {false, true}) {
        for (const auto& [in, out] :
             std::vector<std::pair<int32_t, int32_t>>{{16, 5}, {2048, 400}, {1024, 1536}})
          expect_matches_reference({tokens, in, out, tokens != 4, swiglu, scaling}, seed += 8);
      }
    }
  }
}

// The widest rows a CTA stages (8B's hidden 4096 at the token limit the shared memory allows),
// and more features than the grid has warps (each warp strides over several).
TEST(LinearSkinnyFusedGpu, WideRowsAndManyFeaturesMatchTheReference) {
  expect_matches_reference({1, 4096, 6144, true, false}, 300);
  expect_matches_reference({6, 4096, 96, true, true}, 304);
  expect_matches_reference({2, 256, 9000, true, false}, 308);
  expect_matches_reference({1, 256, 9000, true, true}, 312);
}

TEST(LinearSkinnyFusedGpu, RejectsWhatItDoesNotTake) {
  DeviceBuffer residual(1 << 16), delta(1 << 16), out_residual(1 << 16), norm_weight(1 << 14),
      w(1 << 16), y(1 << 16);
  SkinnyResidualNorm norm;
  norm.residual = residual.as<uint16_t>();
  norm.delta = delta.as<uint16_t>();
  norm.residual_out = out_residual.as<uint16_t>();
  norm.weight = norm_weight.as<uint16_t>();
  const auto run = [&](int32_t tokens, int32_t in, const SkinnyResidualNorm& n) {
    linear_skinny_norm_cuda(tokens, in, 4, n, w.as<uint16_t>(), false, y.as<uint16_t>(), nullptr);
  };
  EXPECT_QUENCH_ERROR(run(9, 64, norm), {"9 tokens", "1 to 8 tokens"});
  EXPECT_QUENCH_ERROR(run(1, 36, norm), {"36 inputs", "multiple of 8"});
  EXPECT_QUENCH_ERROR(run(8, 4096, norm), {"8 tokens x 4096 inputs", "<= 49152"});
  SkinnyResidualNorm aliased = norm;
  aliased.residual_out = residual.as<uint16_t>();
  EXPECT_QUENCH_ERROR(run(1, 64, aliased), {"residual_out must alias neither"});
  SkinnyResidualNorm no_out = norm;
  no_out.residual_out = nullptr;
  EXPECT_QUENCH_ERROR(run(1, 64, no_out), {"a delta needs residual_out"});
  SkinnyResidualNorm odd = norm;
  odd.residual = residual.as<uint16_t>() + 1;
  EXPECT_QUENCH_ERROR(run(1, 64, odd), {"16-byte aligned"});
  SkinnyResidualNorm bad_eps = norm;
  bad_eps.eps = 0.0f;
  EXPECT_QUENCH_ERROR(run(1, 64, bad_eps), {"eps 0", "> 0"});
  EXPECT_FALSE(linear_skinny_norm_supported(0, 64));
  EXPECT_TRUE(linear_skinny_norm_supported(6, 4096));
  EXPECT_FALSE(linear_skinny_norm_supported(7, 4096));
}

}  // namespace
}  // namespace quench
