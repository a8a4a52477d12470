#include "quench/ops/swiglu/swiglu_reference.h"

#include <cmath>

#include "quench/core/error.h"

namespace quench {

void swiglu_reference(int64_t num_tokens, int32_t features, const float* gate, const float* up,
                      float* out) {
  QUENCH_REQUIRE(num_tokens >= 0 && features >= 1, "swiglu shape [", num_tokens, ", ", features,
                 "] must have tokens >= 0 and features >= 1");
  QUENCH_REQUIRE(gate != nullptr && up != nullptr && out != nullptr,
                 "swiglu gate, up and out must not be null");
  const int64_t n = num_tokens * features;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace quench
