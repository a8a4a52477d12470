// The FP8 outputs of rms_norm and swiglu (fp8_rows_out.h), which feed an FP8-weight GEMM without a
// separate quantization pass: bit for bit the codes and scales of the chain they replace (the
// bf16 kernel, then quantize_fp8_dynamic_rows_cuda over its rows), per row and per 128 columns,
// scales row- or group-major, padding rows (zeros, scale 1) written over poisoned memory; the bf16
// rows and the updated residual unchanged beside them; and, dequantized, within e4m3 rounding of
// the CPU reference chain (qk_rms_norm_reference / swiglu_reference) on rows scaled by 2^-10 to
// 2^10. Plus the requests they refuse.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/device_buffer.h"
#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/qk_norm/qk_norm_reference.h"
#include "quench/ops/quantize/fp8_rows_out.h"
#include "quench/ops/quantize/quantize_fp8_dynamic.h"
#include "quench/ops/rms_norm/rms_norm.h"
#include "quench/ops/swiglu/swiglu.h"
#include "quench/ops/swiglu/swiglu_reference.h"

namespace quench {
namespace {

using testing_support::DeviceBuffer;

struct Case {
  int32_t rows, width, group, padded_rows;
  bool by_group;
};

::testing::Message describe(const Case& c) {
  return ::testing::Message() << c.rows << " rows (padded " << c.padded_rows << ") x " << c.width
                              << " group " << c.group << (c.by_group ? " group-major" : "");
}

// bf16 rows whose row r is scaled by 2^[-10, 10).
std::vector<uint16_t> scaled_rows(int32_t rows, int32_t width, float stddev, uint64_t seed) {
  testing_support::RandomInputs random(seed);
  const auto values = random.normal(static_cast<size_t>(rows) * width, 0.0f, stddev);
  const auto exponents = random.uniform(static_cast<size_t>(rows), -10.0f, 10.0f);
  std::vector<uint16_t> x(values.size());
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float_to_bf16_bits(values[i] * std::exp2(exponents[i / static_cast<size_t>(width)]));
  return x;
}

int32_t padded(const Case& c) {
  return c.padded_rows > 0 ? c.padded_rows : c.rows;
}

// An FP8 destination of the case's shape over poisoned memory (codes 0x7f = NaN, scales -1).
struct Fp8Rows {
  DeviceBuffer codes, scales;
  Fp8RowsOut out;
  explicit Fp8Rows(const Case& c)
      : codes(DeviceBuffer::from_host(
            std::vector<uint8_t>(static_cast<size_t>(padded(c)) * c.width, 0x7f))),
        scales(DeviceBuffer::from_host(
            std::vector<float>(static_cast<size_t>(padded(c)) * (c.width / c.group), -1.0f))) {
    out.data = codes.as<uint8_t>();
    out.scales = scales.as<float>();
    out.group = c.group;
    out.layout.padded_rows = c.padded_rows;
    out.layout.scales_by_group = c.by_group;
  }
};

// `got`'s codes and scales equal the chain's (quantize_fp8_dynamic over the bf16 rows `bf16`),
// and dequantized they lie within e4m3 rounding (plus a bf16 step) of the reference values.
void expect_rows(const Case& c, const Fp8Rows& got, const DeviceBuffer& bf16,
                 const std::vector<float>& reference) {
  Fp8Rows want(c);
  quantize_fp8_dynamic_rows_cuda(c.rows, c.width, c.group, bf16.as<uint16_t>(), want.out.data,
                                 want.out.scales, want.out.layout, nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const auto codes = got.codes.to_host<uint8_t>();
  const auto scales = got.scales.to_host<float>();
  EXPECT_EQ(codes, want.codes.to_host<uint8_t>());
  EXPECT_EQ(scales, want.scales.to_host<float>());
  const int32_t groups = c.width / c.group;
  for (int32_t r = 0; r < padded(c); ++r) {
    for (int32_t i = 0; i < c.width; ++i) {
      const int32_t g = i / c.group;
      const float scale =
          scales[static_cast<size_t>(c.by_group ? g * padded(c) + r : r * groups + g)];
      const float value =
          fp8_to_float(codes[static_cast<size_t>(r) * c.width + i], Fp8Format::kE4M3) * scale;
      if (r >= c.rows) {
        ASSERT_EQ(value, 0.0f) << "padding row " << r;
        ASSERT_EQ(scale, 1.0f) << "padding row " << r;
        continue;
      }
      const float ref = reference[static_cast<size_t>(r) * c.width + i];
      // e4m3: 3 mantissa bits (half a step 2^-4 relative), subnormals below 2^-6 x scale.
      const float tolerance = 0.07f * std::abs(ref) + scale * std::exp2(-9.0f);
      ASSERT_LE(std::abs(value - ref), tolerance) << "row " << r << " column " << i;
    }
  }
}

void expect_rms_norm(const Case& c, bool add, bool with_bf16, uint64_t seed) {
  SCOPED_TRACE(describe(c) << (add ? " + residual add" : "") << (with_bf16 ? " + bf16" : ""));
  const auto residual = scaled_rows(c.rows, c.width, 3.0f, seed);
  const auto delta = scaled_rows(c.rows, c.width, 1.0f, seed + 1);
  std::vector<uint16_t> weight;
  for (float f : testing_support::RandomInputs(seed + 2).normal(c.width, 1.0f, 0.3f))
    weight.push_back(float_to_bf16_bits(f));
  const DeviceBuffer dw = DeviceBuffer::from_host(weight), dd = DeviceBuffer::from_host(delta);
  const size_t n = static_cast<size_t>(c.rows) * c.width;
  // The chain: the bf16 kernel alone.
  const DeviceBuffer chain_residual = DeviceBuffer::from_host(residual), chain_out(n * 2);
  rms_norm_cuda({c.rows, c.width, chain_residual.as<uint16_t>(), add ? dd.as<uint16_t>() : nullptr,
                 dw.as<uint16_t>(), 1e-5f, chain_out.as<uint16_t>()},
                nullptr);
  // Fused.
  const DeviceBuffer fused_residual = DeviceBuffer::from_host(residual);
  const DeviceBuffer fused_out = DeviceBuffer::from_host(std::vector<uint16_t>(n, 0x7fc0));
  Fp8Rows got(c);
  rms_norm_cuda({c.rows, c.width, fused_residual.as<uint16_t>(), add ? dd.as<uint16_t>() : nullptr,
                 dw.as<uint16_t>(), 1e-5f, with_bf16 ? fused_out.as<uint16_t>() : nullptr},
                got.out, nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(fused_residual.to_host<uint16_t>(), chain_residual.to_host<uint16_t>());
  EXPECT_EQ(fused_out.to_host<uint16_t>(),
            with_bf16 ? chain_out.to_host<uint16_t>() : std::vector<uint16_t>(n, 0x7fc0));
  std::vector<float> reference(n);
  const auto updated = chain_residual.to_host<uint16_t>();
  for (size_t i = 0; i < n; ++i)
    reference[i] = bf16_bits_to_float(updated[i]);
  qk_rms_norm_reference(c.rows, 1, c.width, weight.data(), 1e-5f, reference.data());
  expect_rows(c, got, chain_out, reference);
}

void expect_swiglu(const Case& c, bool with_bf16, uint64_t seed) {
  SCOPED_TRACE(describe(c) << (with_bf16 ? " + bf16" : ""));
  const int32_t ff = c.width;
  const auto gate_up = scaled_rows(c.rows, 2 * ff, 2.0f, seed);
  const DeviceBuffer in = DeviceBuffer::from_host(gate_up);
  const size_t n = static_cast<size_t>(c.rows) * ff;
  const DeviceBuffer chain_out(n * 2);
  swiglu_cuda(c.rows, ff, in.as<uint16_t>(), chain_out.as<uint16_t>(), nullptr);
  const DeviceBuffer fused_out = DeviceBuffer::from_host(std::vector<uint16_t>(n, 0x7fc0));
  Fp8Rows got(c);
  swiglu_cuda(c.rows, ff, in.as<uint16_t>(), with_bf16 ? fused_out.as<uint16_t>() : nullptr,
              got.out, nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(fused_out.to_host<uint16_t>(),
            with_bf16 ? chain_out.to_host<uint16_t>() : std::vector<uint16_t>(n, 0x7fc0));
  std::vector<float> gate(n), up(n), reference(n);
  for (int32_t r = 0; r < c.rows; ++r) {
    for (int32_t i = 0; i < ff; ++i) {
      const size_t row = static_cast<size_t>(r) * 2 * ff;
      gate[static_cast<size_t>(r) * ff + i] = bf16_bits_to_float(gate_up[row + i]);
      up[static_cast<size_t>(r) * ff + i] = bf16_bits_to_float(gate_up[row + ff + i]);
    }
  }
  swiglu_reference(c.rows, ff, gate.data(), up.data(), reference.data());
  expect_rows(c, got, chain_out, reference);
}

// Widths: whole rows of one vector per thread and of the most each kernel holds, a width 128
// does not divide (row scales only), single and ragged row counts, the GEMM's padding to 8.
std::vector<Case> cases(int32_t max_width) {
  std::vector<Case> out;
  for (const int32_t rows : {1, 5, 33}) {
    const int32_t pad = (rows + 7) / 8 * 8;
    out.push_back({rows, 264, 264, 0, false});
    out.push_back({rows, 2048, 2048, rows == 5 ? pad : 0, false});
    out.push_back({rows, 2048, 128, pad, true});
    out.push_back({rows, 384, 128, 0, false});
    out.push_back({rows, max_width, 128, pad, true});
    out.push_back({rows, max_width, max_width, 0, false});
  }
  return out;
}

TEST(Fp8RowsOutGpu, RmsNormWritesTheQuantizedChainBitForBit) {
  uint64_t seed = 100;
  for (const Case& c : cases(8192)) {
    for (const bool add : {false, true})
      expect_rms_norm(c, add, /*with_bf16=*/add, seed += 5);
  }
}

TEST(Fp8RowsOutGpu, SwigluWritesTheQuantizedChainBitForBit) {
  uint64_t seed = 200;
  for (const Case& c : cases(kSwigluFp8MaxFeatures)) {
    for (const bool with_bf16 : {false, true})
      expect_swiglu(c, with_bf16, seed += 5);
  }
}

TEST(Fp8RowsOutGpu, RejectsWhatItDoesNotTake) {
  DeviceBuffer x(1 << 16), y(1 << 16), w(1 << 14), codes(1 << 16), scales(1 << 12);
  Fp8RowsOut o;
  o.data = codes.as<uint8_t>();
  o.scales = scales.as<float>();
  const auto norm = [&](int32_t width, const Fp8RowsOut& fp8) {
    rms_norm_cuda({2, width, x.as<uint16_t>(), nullptr, w.as<uint16_t>(), 1e-5f, nullptr}, fp8,
                  nullptr);
  };
  o.group = 64;
  EXPECT_QUENCH_ERROR(norm(192, o), {"rms_norm", "group 64", "or 128 where"});
  o.group = 128;
  EXPECT_QUENCH_ERROR(norm(196, o), {"rms_norm", "a multiple of 8 (196)"});
  EXPECT_QUENCH_ERROR(norm(264, o), {"group 128 over 264", "a multiple of 128"});
  o.layout.padded_rows = 1;
  EXPECT_QUENCH_ERROR(norm(256, o), {"padded_rows 1", ">= rows"});
  o.layout.padded_rows = 0;
  Fp8RowsOut no_scales = o;
  no_scales.scales = nullptr;
  EXPECT_QUENCH_ERROR(norm(256, no_scales), {"scales must not be null"});
  EXPECT_QUENCH_ERROR(norm(256, Fp8RowsOut{}), {"out (or an FP8 output) must not be null"});
  EXPECT_QUENCH_ERROR(
      swiglu_cuda(2, kSwigluFp8MaxFeatures + 128, x.as<uint16_t>(), nullptr, o, nullptr),
      {"swiglu", "32896 features", "up to 32768"});
  EXPECT_QUENCH_ERROR(swiglu_cuda(2, 256, x.as<uint16_t>() + 1, nullptr, o, nullptr),
                      {"swiglu", "16-byte aligned"});
  o.group = 256;
  EXPECT_QUENCH_ERROR(swiglu_cuda(2, 384, x.as<uint16_t>(), nullptr, o, nullptr),
                      {"swiglu", "group 256 over 384"});
}

}  // namespace
}  // namespace quench
