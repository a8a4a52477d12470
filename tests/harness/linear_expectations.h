// The GPU linear kernels' check against linear_reference on random inputs (every kernel of
// ops/linear: the weight-streaming one, the tensor-core one for batched steps, linear_cuda), and
// over FP8 weights against linear_fp8_weight_reference.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "harness/device_buffer.h"
#include "harness/random_inputs.h"
#include "quench/core/dtype.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/linear/linear_reference.h"
#include "quench/ops/linear/linear_weight.h"

namespace quench::testing_support {

// bf16 values from N(0.1, stddev): a mean, so that the sums do not cancel to ~0.
inline std::vector<uint16_t> random_linear_bf16(size_t n, float stddev, uint64_t seed) {
  std::vector<uint16_t> v;
  for (float f : RandomInputs(seed).normal(n, 0.1f, stddev))
    v.push_back(float_to_bf16_bits(f));
  return v;
}

// The check both expectations below make: every fp32 output within 4 sqrt(in) fp32 epsilons of
// the sum of its terms' magnitudes (xf: the inputs, wf: the weights' values as the reference
// multiplies them, [out, in]) of the reference's sum, and every bf16 output within one more
// rounding.
inline void expect_sums_near(int32_t tokens, int32_t in, int32_t out_features,
                             const std::vector<float>& xf, const std::vector<float>& wf,
                             const std::vector<float>& want, const std::vector<uint16_t>& got16,
                             const std::vector<float>& got32, const char* what) {
  const double eps = 4.0 * std::sqrt(static_cast<double>(in)) * 5.96e-8;
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t o = 0; o < out_features; ++o) {
      double magnitude = 0.0;
      for (int32_t k = 0; k < in; ++k)
        magnitude += std::abs(static_cast<double>(xf[static_cast<size_t>(t) * in + k]) *
                              wf[static_cast<size_t>(o) * in + k]);
      const size_t i = static_cast<size_t>(t) * out_features + o;
      const double tol = eps * magnitude + 1e-7;
      ASSERT_NEAR(got32[i], want[i], tol)
          << tokens << " x " << in << " -> " << out_features << " (" << what << ") at " << i;
      ASSERT_NEAR(bf16_bits_to_float(got16[i]), want[i], std::abs(want[i]) * 0.0039 + tol)
          << tokens << " x " << in << " -> " << out_features << " (" << what << ") at " << i
          << " (bf16)";
    }
  }
}

// Runs `linear` (bf16 and f32 outputs) on tokens x in -> out and checks both against the
// reference. fp32: the sums differ from the reference's by their order only, so within
// 4 sqrt(in) fp32 epsilons of the sum of the terms' magnitudes (a dropped or doubled vector of 8
// terms is ~100x that). bf16: one rounding of the fp32 result more.
template <typename Linear>
void expect_linear_matches_reference(int32_t tokens, int32_t in, int32_t out_features,
                                     uint32_t seed, Linear&& linear) {
  const auto x = random_linear_bf16(static_cast<size_t>(tokens) * in, 1.0f, seed);
  const auto w = random_linear_bf16(static_cast<size_t>(out_features) * in, 0.05f, seed + 1);
  std::vector<float> xf(x.size()), wf(w.size());
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = bf16_bits_to_float(x[i]);
  for (size_t i = 0; i < w.size(); ++i)
    wf[i] = bf16_bits_to_float(w[i]);
  std::vector<float> want(static_cast<size_t>(tokens) * out_features);
  linear_reference(tokens, in, out_features, xf.data(), w.data(), want.data());
  const DeviceBuffer dx = DeviceBuffer::from_host(x), dw = DeviceBuffer::from_host(w);
  const DeviceBuffer y16(want.size() * 2), y32(want.size() * 4);
  linear(tokens, in, out_features, dx.as<uint16_t>(), dw.as<uint16_t>(), y16.as<void>(),
         DType::kBF16);
  linear(tokens, in, out_features, dx.as<uint16_t>(), dw.as<uint16_t>(), y32.as<void>(),
         DType::kF32);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  expect_sums_near(tokens, in, out_features, xf, wf, want, y16.to_host<uint16_t>(),
                   y32.to_host<float>(), "bf16 weight");
}

// A random FP8 e4m3 weight with non-unit scales, on the host and the device: e4m3 values from
// N(0, 16) (a spread of exponents, subnormals included) and scales in [0.5, 2) / 64, so that the
// effective weights (fp8 x scale, `values`) are ~N(0, 0.25).
struct Fp8TestWeight {
  int32_t out = 0, in = 0;
  WeightScaling scaling = WeightScaling::kTensor;
  int32_t block_out = 0, block_in = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<float> values;  // fp8 x scale, [out, in]
  DeviceBuffer device_bytes, device_scales;

  Fp8TestWeight(int32_t out_features, int32_t in_features, WeightScaling s, int32_t bo, int32_t bi,
                uint64_t seed)
      : out(out_features), in(in_features), scaling(s), block_out(bo), block_in(bi) {
    for (float f : RandomInputs(seed).normal(static_cast<size_t>(out) * in, 0.0f, 16.0f))
      bytes.push_back(float_to_fp8_e4m3(f));
    LinearWeight shape;
    shape.scaling = s;
    shape.block_out = bo;
    shape.block_in = bi;
    for (float f : RandomInputs(seed + 1).uniform(
             static_cast<size_t>(weight_scale_count(shape, out, in)), 0.5f, 2.0f))
      scales.push_back(f / 64.0f);
    values.resize(bytes.size());
    for (int64_t r = 0; r < out; ++r)
      for (int64_t c = 0; c < in; ++c)
        values[static_cast<size_t>(r * in + c)] =
            fp8_e4m3_to_float(bytes[static_cast<size_t>(r * in + c)]) *
            scales[static_cast<size_t>(weight_scale_index(s, r, c, in, bo, bi))];
    device_bytes = DeviceBuffer::from_host(bytes);
    device_scales = DeviceBuffer::from_host(scales);
  }

  LinearWeight device() const {
    LinearWeight w;
    w.dtype = DType::kFP8E4M3;
    w.data = device_bytes.as<void>();
    w.scales = device_scales.as<float>();
    w.scaling = scaling;
    w.block_out = block_out;
    w.block_in = block_in;
    return w;
  }

  // The reference sums of fp32 rows x [tokens, in].
  std::vector<float> reference(int32_t tokens, const std::vector<float>& x) const {
    std::vector<float> sums(static_cast<size_t>(tokens) * out);
    linear_fp8_weight_reference(tokens, in, out, x.data(), bytes.data(), scales.data(), scaling,
                                block_out, block_in, sums.data());
    return sums;
  }
};

// expect_linear_matches_reference over an FP8 weight: `linear(tokens, in, out, x, LinearWeight,
// y, out_dtype)`, at the same tolerances (the kernels widen fp8 x scale exactly as the reference
// does, up to where the scale joins the sum: another order of the same fp32 roundings).
template <typename Linear>
void expect_fp8_linear_matches_reference(int32_t tokens, const Fp8TestWeight& w, uint32_t seed,
                                         Linear&& linear) {
  const int32_t in = w.in, out_features = w.out;
  const auto x = random_linear_bf16(static_cast<size_t>(tokens) * in, 1.0f, seed);
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = bf16_bits_to_float(x[i]);
  const std::vector<float> want = w.reference(tokens, xf);
  const DeviceBuffer dx = DeviceBuffer::from_host(x);
  const DeviceBuffer y16(want.size() * 2), y32(want.size() * 4);
  linear(tokens, in, out_features, dx.as<uint16_t>(), w.device(), y16.as<void>(), DType::kBF16);
  linear(tokens, in, out_features, dx.as<uint16_t>(), w.device(), y32.as<void>(), DType::kF32);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  expect_sums_near(tokens, in, out_features, xf, w.values, want, y16.to_host<uint16_t>(),
                   y32.to_host<float>(), weight_scaling_name(w.scaling));
}

}  // namespace quench::testing_support
