// Rotary position embedding: configuration and the per-pair arithmetic, shared by the CPU
// reference and every GPU kernel so that they agree bit for bit given the same cos/sin values.
//
// Pairs (style): neox rotates (x[i], x[i + rotary_dim/2]); gptj rotates (x[2i], x[2i+1]).
// Only the first rotary_dim elements of a head rotate (partial rotary); the rest pass through.
// Pair i at position p uses angle p * inv_freq(i), inv_freq(i) = theta^(-2i / rotary_dim),
// optionally rescaled by Llama-3's frequency scaling (llama3_factor > 0).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "quench/core/host_device.h"

namespace quench {

enum class RopeStyle : uint8_t { kNeox, kGptj };

const char* rope_style_name(RopeStyle style);
RopeStyle parse_rope_style(const std::string& name);  // "neox" | "gptj"

struct RopeConfig {
  RopeStyle style = RopeStyle::kNeox;
  int32_t rotary_dim = 128;  // even, <= head_dim
  float theta = 10000.0f;
  // Llama-3 scaling ("rope_type": "llama3"); disabled when llama3_factor <= 0.
  float llama3_factor = 0.0f;
  float llama3_low_freq_factor = 1.0f;
  float llama3_high_freq_factor = 4.0f;
  int32_t llama3_original_max_position = 8192;

  // Throws quench::Error naming the bad field, given the head dim it will be applied to.
  void validate(int32_t head_dim) const;
};

// Inverse frequency of pair i (0 <= i < rotary_dim/2), computed in double then rounded to
// float so that the host and any device produce the same cos/sin cache.
inline float rope_inv_freq(const RopeConfig& c, int32_t i) {
  const double base = std::pow(static_cast<double>(c.theta),
                               -2.0 * static_cast<double>(i) / static_cast<double>(c.rotary_dim));
  if (c.llama3_factor <= 0.0f) return static_cast<float>(base);
  const double two_pi = 6.283185307179586;
  const double wavelen = two_pi / base;
  const double original = static_cast<double>(c.llama3_original_max_position);
  const double low_wavelen = original / c.llama3_low_freq_factor;
  const double high_wavelen = original / c.llama3_high_freq_factor;
  if (wavelen < high_wavelen) return static_cast<float>(base);
  if (wavelen > low_wavelen) return static_cast<float>(base / c.llama3_factor);
  const double smooth = (original / wavelen - c.llama3_low_freq_factor) /
                        (c.llama3_high_freq_factor - c.llama3_low_freq_factor);
  return static_cast<float>((1.0 - smooth) * base / c.llama3_factor + smooth * base);
}

// Rotates one pair (x1, x2) by an angle with cosine c and sine s. fmaf pins the rounding so the
// host and device results are identical.
QUENCH_HD void rope_rotate_pair(float x1, float x2, float c, float s, float* out1, float* out2) {
  *out1 = fmaf(x1, c, -(x2 * s));
  *out2 = fmaf(x2, c, x1 * s);
}

// Index of the two elements of pair i within a head.
QUENCH_HD void rope_pair_index(RopeStyle style, int32_t rotary_dim, int32_t i, int32_t* a,
                               int32_t* b) {
  if (style == RopeStyle::kNeox) {
    *a = i;
    *b = i + rotary_dim / 2;
  } else {
    *a = 2 * i;
    *b = 2 * i + 1;
  }
}

}  // namespace quench
