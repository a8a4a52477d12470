// The GPU ops of the decoder around attention against their CPU references, on random inputs:
// RMSNorm with the fused residual add (qk_rms_norm_reference over one row, after a bf16 add),
// SwiGLU over the fused gate/up rows (swiglu_reference), the embedding gather (exact), and the
// cuBLAS linear layer (linear_reference, then one bf16 rounding).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quench/core/device_buffer.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/bias_add/bias_add.h"
#include "quench/ops/bias_add/bias_add_reference.h"
#include "quench/ops/embedding/embedding.h"
#include "quench/ops/linear/linear_cublas.h"
#include "quench/ops/linear/linear_reference.h"
#include "quench/ops/qk_norm/qk_norm_reference.h"
#include "quench/ops/rms_norm/rms_norm.h"
#include "quench/ops/swiglu/swiglu.h"
#include "quench/ops/swiglu/swiglu_reference.h"

namespace quench {
namespace {

std::vector<uint16_t> random_bf16(size_t n, float mean, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v)
    x = float_to_bf16_bits(dist(rng));
  return v;
}

template <typename T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  std::vector<T> host(n);
  check_cuda(cudaMemcpy(host.data(), b.as<void>(), n * sizeof(T), cudaMemcpyDeviceToHost),
             "download");
  return host;
}

// |a - b| within `ulps` bf16 steps of b.
::testing::AssertionResult bf16_close(uint16_t a, float b, int ulps) {
  const float got = bf16_bits_to_float(a);
  const float step = std::max(std::ldexp(std::abs(b), -7), 1e-30f);
  if (std::abs(got - b) <= ulps * step) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " vs " << b;
}

void expect_rms_norm_matches_reference(int32_t rows, int32_t width, uint32_t seed) {
  const auto residual = random_bf16(rows * width, 0.0f, 3.0f, seed);
  const auto delta = random_bf16(rows * width, 0.0f, 1.0f, seed + 1);
  const auto weight = random_bf16(width, 1.0f, 0.2f, seed + 2);
  for (bool add : {false, true}) {
    DeviceBuffer r = upload(residual), dl = upload(delta), w = upload(weight),
                 out(rows * width * 2);
    rms_norm_cuda({rows, width, r.as<uint16_t>(), add ? dl.as<uint16_t>() : nullptr,
                   w.as<uint16_t>(), 1e-5f, out.as<uint16_t>()},
                  nullptr);
    check_cuda(cudaDeviceSynchronize(), "rms_norm");
    std::vector<float> x(residual.size());
    std::vector<uint16_t> want_residual = residual;
    for (size_t i = 0; i < x.size(); ++i) {
      float v = bf16_bits_to_float(residual[i]);
      if (add) v = bf16_bits_to_float(float_to_bf16_bits(v + bf16_bits_to_float(delta[i])));
      want_residual[i] = float_to_bf16_bits(v);
      x[i] = v;
    }
    qk_rms_norm_reference(rows, 1, width, weight.data(), 1e-5f, x.data());
    EXPECT_EQ(download<uint16_t>(r, residual.size()), want_residual) << "add " << add;
    const auto got = download<uint16_t>(out, x.size());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_TRUE(bf16_close(got[i], x[i], 1)) << "add " << add << " i " << i;
  }
}

// Widths of whole 16-byte vectors take the vector kernel (2048: one vector per thread; 8192: the
// most it holds), others the element kernel (1000: not a multiple of the block either).
TEST(ModelOpsGpu, RmsNormWithAndWithoutTheResidualAdd) {
  for (const int32_t width : {1000, 2048, 2056, 8192}) {
    SCOPED_TRACE(::testing::Message() << "width " << width);
    expect_rms_norm_matches_reference(7, width, static_cast<uint32_t>(width));
  }
}

// SwiGLU rows of single elements (300 features: the element kernel) and of whole 16-byte vectors
// (2048: the vector kernel).
TEST(ModelOpsGpu, SwigluAndEmbedding) {
  for (const int32_t ff : {300, 2048}) {
    const int32_t rows = 5;
    const auto gate_up = random_bf16(rows * 2 * ff, 0.0f, 2.0f, 4);
    DeviceBuffer in = upload(gate_up), out(rows * ff * 2);
    swiglu_cuda(rows, ff, in.as<uint16_t>(), out.as<uint16_t>(), nullptr);
    std::vector<float> gate(rows * ff), up(rows * ff), want(rows * ff);
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t i = 0; i < ff; ++i) {
        gate[r * ff + i] = bf16_bits_to_float(gate_up[r * 2 * ff + i]);
        up[r * ff + i] = bf16_bits_to_float(gate_up[r * 2 * ff + ff + i]);
      }
    swiglu_reference(rows, ff, gate.data(), up.data(), want.data());
    const auto got = download<uint16_t>(out, want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(bf16_close(got[i], want[i], 1)) << ff << " features, element " << i;
  }

  // Rows of whole 16-byte vectors (24, 4096) and of single elements (26).
  for (const int32_t width : {24, 26, 4096}) {
    const int32_t vocab = 50;
    const auto table = random_bf16(vocab * width, 0.0f, 1.0f, 5);
    const std::vector<int32_t> ids = {3, 49, 0, 3};
    DeviceBuffer t = upload(table), d_ids = upload(ids), rows_out(ids.size() * width * 2);
    embedding_lookup_cuda(4, width, d_ids.as<int32_t>(), t.as<uint16_t>(), rows_out.as<uint16_t>(),
                          nullptr);
    const auto gathered = download<uint16_t>(rows_out, ids.size() * width);
    for (size_t r = 0; r < ids.size(); ++r)
      for (int32_t i = 0; i < width; ++i)
        ASSERT_EQ(gathered[r * width + i], table[ids[r] * width + i]) << width << " " << r;
  }
}

// The bias added to every row (Qwen2's q/k/v) equals its reference bit for bit.
TEST(ModelOpsGpu, BiasAddMatchesTheReferenceExactly) {
  const int32_t rows = 5, width = 700;
  const auto x = random_bf16(rows * width, 0.0f, 2.0f, 11);
  const auto bias = random_bf16(width, 0.5f, 1.0f, 12);
  std::vector<uint16_t> want = x;
  bias_add_reference(rows, width, bias.data(), want.data());
  DeviceBuffer dx = upload(x), db = upload(bias);
  bias_add_cuda(rows, width, db.as<uint16_t>(), dx.as<uint16_t>(), nullptr);
  EXPECT_EQ(download<uint16_t>(dx, want.size()), want);
  EXPECT_NE(want, x);
}

TEST(ModelOpsGpu, CublasLinearMatchesTheReference) {
  const int32_t tokens = 9, in = 320, out_features = 200;
  const auto x = random_bf16(tokens * in, 0.0f, 1.0f, 6);
  const auto w = random_bf16(out_features * in, 0.0f, 0.05f, 7);
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = bf16_bits_to_float(x[i]);
  std::vector<float> want(tokens * out_features);
  linear_reference(tokens, in, out_features, xf.data(), w.data(), want.data());
  const CublasHandle cublas;
  DeviceBuffer dx = upload(x), dw = upload(w), y16(want.size() * 2), y32(want.size() * 4);
  linear_cuda(cublas, tokens, in, out_features, dx.as<uint16_t>(), dw.as<uint16_t>(),
              y16.as<void>(), DType::kBF16, nullptr);
  linear_cuda(cublas, tokens, in, out_features, dx.as<uint16_t>(), dw.as<uint16_t>(),
              y32.as<void>(), DType::kF32, nullptr);
  const auto got16 = download<uint16_t>(y16, want.size());
  const auto got32 = download<float>(y32, want.size());
  double scale = 0.0;
  for (float v : want)
    scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < want.size(); ++i) {
    // Summation order differs; the sums are of ~300 terms of magnitude ~0.05.
    EXPECT_NEAR(got32[i], want[i], 1e-4 * scale) << i;
    ASSERT_TRUE(bf16_close(got16[i], want[i], 2) ||
                std::abs(bf16_bits_to_float(got16[i]) - want[i]) < 1e-3 * scale)
        << i;
  }
}

}  // namespace
}  // namespace quench
