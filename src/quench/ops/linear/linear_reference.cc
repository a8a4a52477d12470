#include "quench/ops/linear/linear_reference.h"

#include <algorithm>
#include <vector>

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"

namespace quench {

void check_linear_args(int32_t num_tokens, int32_t in_features, int32_t out_features,
                       const float* x, const uint16_t* weight, const float* out) {
  QUENCH_REQUIRE(num_tokens >= 0, "linear num_tokens ", num_tokens, " must be >= 0");
  QUENCH_REQUIRE(in_features >= 1 && out_features >= 1, "linear features ", in_features, " -> ",
                 out_features, " must both be >= 1");
  QUENCH_REQUIRE(x != nullptr && weight != nullptr && out != nullptr,
                 "linear x, weight and out must not be null");
}

namespace {

// Rows of the weight widened by `widen_row` (row n into fp32 [in]) then dotted with every token:
// each row is widened once and used by every token, which is what makes a decode step (few
// tokens) read the weights once.
template <typename WidenRow>
void dot_widened_rows(int32_t num_tokens, int32_t in_features, int32_t out_features, const float* x,
                      float* out, WidenRow&& widen_row) {
  constexpr int64_t kRowsPerBlock = 16;
  const int64_t blocks = (out_features + kRowsPerBlock - 1) / kRowsPerBlock;
  parallel_for(blocks, [&](int64_t block) {
    std::vector<float> row(static_cast<size_t>(in_features));
    const int64_t end = std::min<int64_t>(out_features, (block + 1) * kRowsPerBlock);
    for (int64_t n = block * kRowsPerBlock; n < end; ++n) {
      widen_row(n, row.data());
      for (int32_t t = 0; t < num_tokens; ++t) {
        const float* xt = x + static_cast<int64_t>(t) * in_features;
        float sum = 0.0f;
        for (int32_t k = 0; k < in_features; ++k)
          sum += xt[k] * row[static_cast<size_t>(k)];
        out[static_cast<int64_t>(t) * out_features + n] = sum;
      }
    }
  });
}

}  // namespace

void linear_reference(int32_t num_tokens, int32_t in_features, int32_t out_features, const float* x,
                      const uint16_t* weight, float* out) {
  check_linear_args(num_tokens, in_features, out_features, x, weight, out);
  if (num_tokens == 0) return;
  dot_widened_rows(num_tokens, in_features, out_features, x, out, [&](int64_t n, float* row) {
    const uint16_t* w = weight + n * in_features;
    for (int32_t k = 0; k < in_features; ++k)
      row[k] = bf16_bits_to_float(w[k]);
  });
}

void linear_fp8_weight_reference(int32_t num_tokens, int32_t in_features, int32_t out_features,
                                 const float* x, const uint8_t* weight, const float* scales,
                                 WeightScaling scaling, int32_t block_out, int32_t block_in,
                                 float* out) {
  QUENCH_REQUIRE(num_tokens >= 0, "linear num_tokens ", num_tokens, " must be >= 0");
  QUENCH_REQUIRE(in_features >= 1 && out_features >= 1, "linear features ", in_features, " -> ",
                 out_features, " must both be >= 1");
  QUENCH_REQUIRE(x != nullptr && weight != nullptr && scales != nullptr && out != nullptr,
                 "linear x, weight, scales and out must not be null");
  QUENCH_REQUIRE(scaling != WeightScaling::kBlock || (block_out >= 1 && block_in >= 1),
                 "linear FP8 weight blocks of ", block_out, " x ", block_in,
                 " are invalid; allowed: both >= 1");
  if (num_tokens == 0) return;
  dot_widened_rows(num_tokens, in_features, out_features, x, out, [&](int64_t n, float* row) {
    const uint8_t* w = weight + n * in_features;
    for (int32_t k = 0; k < in_features; ++k)
      row[k] = fp8_e4m3_to_float(w[k]) *
               scales[weight_scale_index(scaling, n, k, in_features, block_out, block_in)];
  });
}

}  // namespace quench
