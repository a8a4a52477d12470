#include "quench/ops/rope/rope_angles.h"

#include "quench/core/error.h"

namespace quench {

RopeAngles make_rope_angles(const RopeConfig& config, const float* cos_sin_cache,
                            int32_t cache_positions) {
  QUENCH_REQUIRE(config.rotary_dim <= 2 * kMaxRopePairs, "rotary_dim ", config.rotary_dim,
                 " exceeds the GPU kernels' limit ", 2 * kMaxRopePairs);
  RopeAngles angles;
  angles.style = config.style;
  angles.rotary_dim = config.rotary_dim;
  angles.cos_sin_cache = cos_sin_cache;
  angles.cache_positions = cache_positions;
  if (cos_sin_cache == nullptr) {
    for (int32_t i = 0; i < config.rotary_dim / 2; ++i)
      angles.inv_freq[i] = rope_inv_freq(config, i);
  }
  return angles;
}

}  // namespace quench
