#include "quench/ops/rope/rope_reference.h"

#include <cmath>

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"

namespace quench {

std::vector<float> build_rope_cos_sin_cache(const RopeConfig& config, int32_t max_position) {
  config.validate(config.rotary_dim);
  QUENCH_REQUIRE(max_position >= 1, "RoPE cache max_position ", max_position, " must be >= 1");
  const int32_t half = config.rotary_dim / 2;
  std::vector<float> cache(static_cast<size_t>(max_position) *
                           static_cast<size_t>(config.rotary_dim));
  parallel_for(max_position, [&](int64_t p) {
    float* row = cache.data() + p * config.rotary_dim;
    for (int32_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * static_cast<double>(rope_inv_freq(config, i));
      row[i] = static_cast<float>(std::cos(angle));
      row[half + i] = static_cast<float>(std::sin(angle));
    }
  });
  return cache;
}

void rope_cos_sin(const RopeConfig& config, const float* cos_sin_cache, int32_t position,
                  int32_t pair, float* cos_out, float* sin_out) {
  const int32_t half = config.rotary_dim / 2;
  if (cos_sin_cache != nullptr) {
    const float* row = cos_sin_cache + static_cast<int64_t>(position) * config.rotary_dim;
    *cos_out = row[pair];
    *sin_out = row[half + pair];
    return;
  }
  const float angle = static_cast<float>(position) * rope_inv_freq(config, pair);
  *cos_out = std::cos(angle);
  *sin_out = std::sin(angle);
}

void apply_rope_reference(const RopeConfig& config, int32_t num_tokens, int32_t num_heads,
                          int32_t head_dim, const int32_t* positions, const float* cos_sin_cache,
                          int32_t cache_positions, float* x) {
  config.validate(head_dim);
  QUENCH_REQUIRE(num_tokens >= 0, "RoPE num_tokens ", num_tokens, " must be >= 0");
  QUENCH_REQUIRE(num_heads >= 1, "RoPE num_heads ", num_heads, " must be >= 1");
  for (int32_t t = 0; t < num_tokens; ++t) {
    QUENCH_REQUIRE(positions[t] >= 0, "RoPE positions[", t, "]=", positions[t], " must be >= 0");
    QUENCH_REQUIRE(cos_sin_cache == nullptr || positions[t] < cache_positions, "RoPE positions[", t,
                   "]=", positions[t], " is outside the cos/sin cache; allowed: [0, ",
                   cache_positions, ")");
  }
  const int32_t half = config.rotary_dim / 2;
  parallel_for(num_tokens, [&](int64_t t) {
    for (int32_t i = 0; i < half; ++i) {
      float c = 0.0f;
      float s = 0.0f;
      rope_cos_sin(config, cos_sin_cache, positions[t], i, &c, &s);
      int32_t a = 0;
      int32_t b = 0;
      rope_pair_index(config.style, config.rotary_dim, i, &a, &b);
      for (int32_t h = 0; h < num_heads; ++h) {
        float* head = x + (t * num_heads + h) * static_cast<int64_t>(head_dim);
        rope_rotate_pair(head[a], head[b], c, s, &head[a], &head[b]);
      }
    }
  });
}

}  // namespace quench
