// Where a RoPE kernel gets cos/sin from: the model's fp32 cos/sin cache, or sincos computed in
// the kernel from an inverse-frequency table that the host fills with rope_inv_freq (so every
// kernel uses exactly the frequencies of the CPU reference). Plain data, passed by value.
#pragma once

#include <cstdint>

#include "quench/ops/rope/rope_config.h"

namespace quench {

inline constexpr int32_t kMaxRopePairs = 128;  // rotary_dim <= 256

struct RopeAngles {
  RopeStyle style = RopeStyle::kNeox;
  int32_t rotary_dim = 0;
  // [cache_positions, rotary_dim] fp32: cos of pair i at [p][i], sin at [p][rotary_dim/2 + i];
  // nullptr selects the in-kernel sincos of p * inv_freq[i] (fp32).
  const float* cos_sin_cache = nullptr;
  int32_t cache_positions = 0;
  float inv_freq[kMaxRopePairs] = {};
};

// Fills the table for `config` (throws for rotary_dim > 2 * kMaxRopePairs).
RopeAngles make_rope_angles(const RopeConfig& config, const float* cos_sin_cache,
                            int32_t cache_positions);

}  // namespace quench
