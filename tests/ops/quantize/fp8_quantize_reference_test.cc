#include "quench/ops/quantize/fp8_quantize_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/numerics/fp8.h"

namespace quench {
namespace {

// Hand-checked e4m3 codes: x / scale with scale 2 (the scale divides).
TEST(Fp8QuantizeReference, PerTensorHandChecked) {
  const std::vector<float> x = {1.0f, -3.0f, 4.0f, 2000.0f, -2000.0f};
  std::vector<uint8_t> q(x.size(), 0xA5);
  quantize_fp8_per_tensor_reference(x.data(), 5, 2.0f, DType::kFP8E4M3, q.data());
  EXPECT_EQ(q[0], 0x30);  // 0.5  = 2^-1:        0 0110 000
  EXPECT_EQ(q[1], 0xBC);  // -1.5 = -1.5 * 2^0:  1 0111 100
  EXPECT_EQ(q[2], 0x40);  // 2    = 2^1:         0 1000 000
  EXPECT_EQ(q[3], 0x7E);  // 1000 saturates to 448
  EXPECT_EQ(q[4], 0xFE);  // -1000 saturates to -448
  std::vector<uint8_t> e5(1);
  quantize_fp8_per_tensor_reference(&x[3], 1, 0.01f, DType::kFP8E5M2, e5.data());
  EXPECT_EQ(e5[0], 0x7B);  // 200000 saturates to 57344
  std::vector<float> back(5);
  dequantize_fp8_per_tensor_reference(q.data(), 5, 2.0f, DType::kFP8E4M3, back.data());
  EXPECT_EQ(back, (std::vector<float>{1.0f, -3.0f, 4.0f, 896.0f, -896.0f}));
}

// The fp8 value nearest to x / scale computed in double (ties are measure-zero for random data).
float nearest_fp8(double target, Fp8Format format) {
  double best = std::numeric_limits<double>::infinity();
  float best_value = 0.0f;
  for (int code = 0; code < 256; ++code) {
    const float value = fp8_to_float(static_cast<uint8_t>(code), format);
    if (!std::isfinite(value)) continue;
    const double distance = std::fabs(static_cast<double>(value) - target);
    if (distance < best) {
      best = distance;
      best_value = value;
    }
  }
  return best_value;
}

TEST(Fp8QuantizeReference, PerHeadAgainstDouble) {
  const int64_t rows = 7;
  const int32_t heads = 3, head_dim = 16;
  const float scales[heads] = {0.37f, 2.5f, 0.0123f};
  testing_support::RandomInputs rng(17);
  const std::vector<float> x = rng.uniform(static_cast<size_t>(rows * heads * head_dim), -8, 8);
  for (DType dtype : {DType::kFP8E4M3, DType::kFP8E5M2}) {
    const Fp8Format format = fp8_format_of(dtype);
    HeadScales scale;
    scale.per_head = scales;
    std::vector<uint8_t> q(x.size(), 0xA5);
    quantize_fp8_per_head_reference(x.data(), rows, heads, head_dim, scale, dtype, q.data());
    std::vector<float> back(x.size());
    dequantize_fp8_per_head_reference(q.data(), rows, heads, head_dim, scale, dtype, back.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const int32_t h = static_cast<int32_t>((i / head_dim) % heads);
      const float expected = nearest_fp8(double(x[i]) / double(scales[h]), format);
      ASSERT_EQ(fp8_to_float(q[i], format), expected) << dtype_name(dtype) << " i=" << i;
      ASSERT_EQ(back[i], static_cast<float>(double(expected) * double(scales[h])));
    }
  }
}

TEST(Fp8QuantizeReference, ScaleFromAmax) {
  EXPECT_EQ(fp8_scale_from_amax(448.0f, DType::kFP8E4M3), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(896.0f, DType::kFP8E4M3), 2.0f);
  EXPECT_EQ(fp8_scale_from_amax(57344.0f * 0.5f, DType::kFP8E5M2), 0.5f);
  EXPECT_EQ(fp8_scale_from_amax(0.0f, DType::kFP8E4M3), 1.0f);
  const std::vector<float> x = {0.5f, -3.0f, 1.0f, 0.25f, 2.0f, -1.0f};  // [rows 3, heads 2, d 1]
  EXPECT_FLOAT_EQ(fp8_per_tensor_scale(x.data(), 6, DType::kFP8E4M3), 3.0f / 448.0f);
  const std::vector<float> per_head = fp8_per_head_scales(x.data(), 3, 2, 1, DType::kFP8E4M3);
  ASSERT_EQ(per_head.size(), 2u);
  EXPECT_FLOAT_EQ(per_head[0], 2.0f / 448.0f);
  EXPECT_FLOAT_EQ(per_head[1], 3.0f / 448.0f);
  // With its own scale, each head's amax lands on (close to) the top fp8 value.
  HeadScales scale;
  scale.per_head = per_head.data();
  std::vector<uint8_t> q(6);
  quantize_fp8_per_head_reference(x.data(), 3, 2, 1, scale, DType::kFP8E4M3, q.data());
  EXPECT_EQ(q[4], 0x7E);
  EXPECT_EQ(q[1], 0xFE);
}

TEST(Fp8QuantizeReference, Errors) {
  const std::vector<float> x(4, 1.0f);
  std::vector<uint8_t> q(4);
  std::vector<float> back(4);
  EXPECT_QUENCH_ERROR(
      quantize_fp8_per_tensor_reference(x.data(), 4, 0.0f, DType::kFP8E4M3, q.data()),
      {"scale 0", "finite and > 0"});
  EXPECT_QUENCH_ERROR(
      quantize_fp8_per_tensor_reference(x.data(), 4, -1.0f, DType::kFP8E4M3, q.data()),
      {"scale -1"});
  EXPECT_QUENCH_ERROR(
      quantize_fp8_per_tensor_reference(x.data(), 4, std::numeric_limits<float>::infinity(),
                                        DType::kFP8E4M3, q.data()),
      {"scale inf"});
  EXPECT_QUENCH_ERROR(quantize_fp8_per_tensor_reference(x.data(), 4, 1.0f, DType::kBF16, q.data()),
                      {"bf16", "fp8_e4m3, fp8_e5m2"});
  const float bad_heads[2] = {1.0f, 0.0f};
  HeadScales scale;
  scale.per_head = bad_heads;
  EXPECT_QUENCH_ERROR(
      quantize_fp8_per_head_reference(x.data(), 1, 2, 2, scale, DType::kFP8E4M3, q.data()),
      {"[head 1] 0"});
  EXPECT_QUENCH_ERROR(
      dequantize_fp8_per_head_reference(q.data(), 1, 2, 2, scale, DType::kFP8E4M3, back.data()),
      {"[head 1] 0"});
  EXPECT_QUENCH_ERROR(
      quantize_fp8_per_head_reference(x.data(), 1, 0, 4, HeadScales{}, DType::kFP8E4M3, q.data()),
      {"shape [1, 0, 4]"});
  EXPECT_QUENCH_ERROR(
      dequantize_fp8_per_tensor_reference(q.data(), 4, 0.0f, DType::kFP8E5M2, back.data()),
      {"scale 0"});
  EXPECT_QUENCH_ERROR(fp8_scale_from_amax(-1.0f, DType::kFP8E4M3), {"amax -1", ">= 0"});
  EXPECT_QUENCH_ERROR(fp8_scale_from_amax(std::nanf(""), DType::kFP8E4M3), {"amax nan"});
  EXPECT_QUENCH_ERROR(fp8_per_head_scales(x.data(), 1, 0, 4, DType::kFP8E4M3), {"num_heads 0"});
}

}  // namespace
}  // namespace quench
