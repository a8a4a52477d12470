// CPU reference of rotary position embedding: the oracle every RoPE kernel is checked against.
//
// cos/sin come either from a precomputed cache or are computed on the fly:
//   cache     [max_position, rotary_dim] fp32, cos of pair i at [p][i], sin at
//             [p][rotary_dim/2 + i], built in double from rope_inv_freq and rounded to float
//             (build_rope_cos_sin_cache); GPU kernels reading the same cache match bit for bit.
//   on the fly  angle = (float)p * rope_inv_freq(config, i) in fp32, then cosf/sinf: what a
//             kernel computes with sincosf; host and device libm differ by an ulp or so.
// The rotation itself is rope_rotate_pair on the elements rope_pair_index names (rope_config.h).
#pragma once

#include <cstdint>
#include <vector>

#include "quench/ops/rope/rope_config.h"

namespace quench {

// Returns [max_position, rotary_dim] fp32, row p = cos of pairs 0..rotary_dim/2-1 then their sin.
// Throws when max_position < 1 or the config is invalid for head_dim = rotary_dim.
std::vector<float> build_rope_cos_sin_cache(const RopeConfig& config, int32_t max_position);

// cos and sin of pair `pair` at `position`: from cos_sin_cache when non-null (laid out as above),
// otherwise computed on the fly in fp32. No range checks (callers validate positions).
void rope_cos_sin(const RopeConfig& config, const float* cos_sin_cache, int32_t position,
                  int32_t pair, float* cos_out, float* sin_out);

// Rotates x in place.
//   x:          fp32 [num_tokens, num_heads, head_dim], dense row-major. Elements at index
//               >= config.rotary_dim within a head are left untouched (partial rotary).
//   positions:  int32 [num_tokens], each in [0, cache_positions) when a cache is given, else >= 0.
//   cos_sin_cache: optional fp32 [cache_positions, rotary_dim] (nullptr: cos/sin on the fly).
// Throws quench::Error naming the bad token/position or config field.
void apply_rope_reference(const RopeConfig& config, int32_t num_tokens, int32_t num_heads,
                          int32_t head_dim, const int32_t* positions, const float* cos_sin_cache,
                          int32_t cache_positions, float* x);

}  // namespace quench
