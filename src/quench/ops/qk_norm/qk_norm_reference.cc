#include "quench/ops/qk_norm/qk_norm_reference.h"

#include <cmath>

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"

namespace quench {

void qk_rms_norm_reference(int32_t num_tokens, int32_t num_heads, int32_t head_dim,
                           const uint16_t* weight, float eps, float* x) {
  QUENCH_REQUIRE(num_tokens >= 0, "RMSNorm num_tokens ", num_tokens, " must be >= 0");
  QUENCH_REQUIRE(num_heads >= 1, "RMSNorm num_heads ", num_heads, " must be >= 1");
  QUENCH_REQUIRE(head_dim >= 1, "RMSNorm head_dim ", head_dim, " must be >= 1");
  QUENCH_REQUIRE(eps > 0.0f, "RMSNorm eps ", eps, " must be > 0");
  QUENCH_REQUIRE(weight != nullptr, "RMSNorm weight must not be null");
  parallel_for(static_cast<int64_t>(num_tokens) * num_heads, [&](int64_t row) {
    float* v = x + row * head_dim;
    float sum_squares = 0.0f;
    for (int32_t d = 0; d < head_dim; ++d)
      sum_squares += v[d] * v[d];
    const float denominator = std::sqrt(sum_squares / static_cast<float>(head_dim) + eps);
    for (int32_t d = 0; d < head_dim; ++d) {
      v[d] = v[d] / denominator * bf16_bits_to_float(weight[d]);
    }
  });
}

}  // namespace quench
