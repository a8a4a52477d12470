// One random draw from a row of logits: its parameters, and the arithmetic that the CPU reference
// (sample_rows_reference.h) and the GPU kernel (sample_rows.h) share, so that both pick the same
// token for the same row and key, bit for bit.
//
// The draw: tokens weigh w = exp((logit - max) / temperature), 0 under min_p (w < min_p, since the
// largest weighs 1); top_k keeps the k first of the ranking (descending logit, the lower id first
// among equals); top_p keeps the shortest prefix of what is left whose weight reaches top_p of its
// total; among those, the token with the largest w / E wins, where E = -ln U is an exponential
// variable drawn per token from (key, id). That race picks token i with probability w_i / sum(w):
// a categorical draw without a sort and without a running sum, which a GPU can do in one pass.
//
// Exactness between the two implementations comes from using only operations whose results IEEE
// fixes (add, multiply, divide, fused multiply-add, conversions) and integer sums: exp and ln are
// written here with explicit fmaf, never the platforms' own; nucleus sums are in fixed point, so
// their order does not matter.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "quench/core/host_device.h"

namespace quench {

// What one row's draw asks for. temperature 0 = greedy (the largest logit, the lowest id among
// equals); top_k 0 = every token; top_p 1 = no nucleus; min_p 0 = off. key: the row's 64 random
// bits, drawn by the request's generator (the same key gives the same token).
struct RowSampler {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t key = 0;
};

// A float as an unsigned integer that orders like the float (larger float, larger key), with -0
// and +0 as one key (they compare equal as logits, so they rank by id like any other equals).
QUENCH_HD uint32_t sampling_order_key(float x) {
  if (x == 0.0f) x = 0.0f;
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

QUENCH_HD float sampling_key_value(uint32_t key) {
  const uint32_t bits = (key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key;
  float x = 0.0f;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// exp(x) for x <= 0, relative error ~1e-6: 2^n * e^t with n = floor(x / ln 2), t = x - n ln 2
// in two fused steps (ln 2's high part is exact in float times any n here), and e^t in [1, 2) by a
// degree-8 Taylor polynomial. 0 below e^-87 (where floats turn subnormal).
QUENCH_HD float sampling_exp(float x) {
  if (x < -87.0f) return 0.0f;
  const float n = std::floor(x * 1.44269504f);  // log2(e)
  float t = std::fma(-n, 0.693145752f, x);      // ln 2, high 16 bits
  t = std::fma(-n, 1.42860677e-6f, t);          // ln 2, the rest
  float p = 2.48015873e-5f;                     // 1/8!
  p = std::fma(p, t, 1.98412698e-4f);           // 1/7!
  p = std::fma(p, t, 1.38888889e-3f);
  p = std::fma(p, t, 8.33333333e-3f);
  p = std::fma(p, t, 4.16666667e-2f);
  p = std::fma(p, t, 1.66666667e-1f);
  p = std::fma(p, t, 0.5f);
  p = std::fma(p, t, 1.0f);
  p = std::fma(p, t, 1.0f);
  const auto exponent = static_cast<int32_t>(n) + 127;  // n in [-126, 0]
  if (exponent <= 0) return 0.0f;
  const uint32_t bits = static_cast<uint32_t>(exponent) << 23;
  float scale = 0.0f;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// -ln(u) for u in (0, 1), relative error ~1e-7: u = 2^e * m with m in [sqrt(1/2), sqrt(2)), and
// ln m = 2 atanh(s), s = (m - 1) / (m + 1), by its odd series to s^11.
QUENCH_HD float sampling_neg_log(float u) {
  uint32_t bits = 0;
  std::memcpy(&bits, &u, sizeof(bits));
  auto e = static_cast<int32_t>((bits >> 23) & 0xffu) - 127;
  bits = (bits & 0x007fffffu) | 0x3f800000u;  // m in [1, 2)
  float m = 0.0f;
  std::memcpy(&m, &bits, sizeof(m));
  if (m > 1.41421356f) {
    m *= 0.5f;
    ++e;
  }
  const float s = (m - 1.0f) / (m + 1.0f);
  const float z = s * s;
  float p = 1.0f / 11.0f;
  p = std::fma(p, z, 1.0f / 9.0f);
  p = std::fma(p, z, 1.0f / 7.0f);
  p = std::fma(p, z, 1.0f / 5.0f);
  p = std::fma(p, z, 1.0f / 3.0f);
  p = std::fma(p, z, 1.0f);
  const float ln_m = 2.0f * s * p;
  return -std::fma(static_cast<float>(e), 0.693147181f, ln_m);
}

// The uniform variable of token `id` under `key`: (h + 0.5) / 2^23 for 23 bits h of a splitmix64
// hash, in (0, 1) exactly in float (never 0, never 1).
QUENCH_HD float sampling_uniform(uint64_t key, int32_t id) {
  uint64_t z = key + (static_cast<uint64_t>(id) + 1u) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (static_cast<float>(z >> 41) + 0.5f) * 1.1920929e-7f;  // 2^-23
}

// Greedy: temperature 0, or one so small that 1 / temperature overflows (the draw would be the
// argmax anyway, and (logit - max) * inf is NaN at the max).
QUENCH_HD bool sampling_is_greedy(float temperature) {
  return !(temperature > 0.0f) || !(1.0f / temperature < 3.0e38f);
}

// A token's weight: exp((logit - max) * inv_temperature), 0 under min_p.
QUENCH_HD float sampling_weight(float logit, float max_logit, float inv_temperature, float min_p) {
  const float w = sampling_exp((logit - max_logit) * inv_temperature);
  return w < min_p ? 0.0f : w;
}

// The weight in fixed point (2^40 = weight 1) for the nucleus' sums: a 151936-token vocabulary
// sums below 2^58, and integer sums do not depend on their order.
QUENCH_HD uint64_t sampling_fixed_weight(float w) {
  return static_cast<uint64_t>(w * 1099511627776.0f);
}

// The nucleus' weight target within a total: the prefix ends at the first token that brings its
// sum to at least this (so it always holds the first token, which weighs 2^40).
QUENCH_HD uint64_t sampling_nucleus_target(float top_p, uint64_t total) {
  const auto target =
      static_cast<uint64_t>(static_cast<double>(top_p) * static_cast<double>(total));
  return target == 0 ? 1 : target;
}

// The race's score of a kept token: w / E. The largest wins; among equals the lower id.
QUENCH_HD float sampling_score(float w, uint64_t key, int32_t id) {
  return w / sampling_neg_log(sampling_uniform(key, id));
}

}  // namespace quench
