// The residual add and RMSNorm of rms_norm.h on 16-byte vectors of 8 bf16: one definition for
// rms_norm's vector kernel and for the linear layers that fold the norm in front of their product
// (ops/linear/linear_skinny_kernel.cuh). The CTA-wide sum of squares is core/block_reduce.cuh's.
//   add:       bf16(residual + delta) per element
//   squares:   the fp32 sum of the (rounded) elements' squares
//   normalise: bf16(x / denominator * weight), denominator = sqrt(mean(x^2) + eps)
#pragma once

#include <cstdint>

#include "quench/numerics/half_pair.cuh"

namespace quench::rms_norm_device {

__device__ __forceinline__ uint32_t add_pair(uint32_t a, uint32_t b) {
  return pack_half_pair<true>(bf16_pair_lo(a) + bf16_pair_lo(b), bf16_pair_hi(a) + bf16_pair_hi(b));
}

// bf16(r + d), element by element.
__device__ __forceinline__ uint4 add_residual(uint4 r, const uint4& d) {
  r.x = add_pair(r.x, d.x);
  r.y = add_pair(r.y, d.y);
  r.z = add_pair(r.z, d.z);
  r.w = add_pair(r.w, d.w);
  return r;
}

// sum + the squares of r's eight elements.
__device__ __forceinline__ float add_squares(const uint4& r, float sum) {
  const uint32_t words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    sum += bf16_pair_lo(words[i]) * bf16_pair_lo(words[i]);
    sum += bf16_pair_hi(words[i]) * bf16_pair_hi(words[i]);
  }
  return sum;
}

__device__ __forceinline__ uint32_t normalise_pair(uint32_t x, uint32_t g, float denominator) {
  return pack_half_pair<true>(bf16_pair_lo(x) / denominator * bf16_pair_lo(g),
                              bf16_pair_hi(x) / denominator * bf16_pair_hi(g));
}

// bf16(x / denominator * weight), element by element.
__device__ __forceinline__ uint4 normalise(const uint4& x, const uint4& weight, float denominator) {
  return make_uint4(
      normalise_pair(x.x, weight.x, denominator), normalise_pair(x.y, weight.y, denominator),
      normalise_pair(x.z, weight.z, denominator), normalise_pair(x.w, weight.w, denominator));
}

}  // namespace quench::rms_norm_device
